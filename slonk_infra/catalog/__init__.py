"""The machine catalog and the cloud facts that go with it, every figure with its source.

Layers inside the package, lowest first: :mod:`.types` (clouds, pool kinds, fabric names),
:mod:`.machines` (machine types, accelerators, TPU generations), the fact modules (:mod:`.nodes`,
:mod:`.fabrics`, :mod:`.storage`, :mod:`.platform`, :mod:`.slurm_versions`), and :mod:`.loader`,
which reads ``slonk_infra/data/*.yaml`` and indexes it. Nothing here imports the rest of the library.
"""

from __future__ import annotations

from slonk_infra.catalog.loader import Catalog, load_catalog, topology_chips, tpu_vms
from slonk_infra.catalog.machines import MachineType, TpuGeneration
from slonk_infra.catalog.types import CLOUDS, Cloud, PoolKind

__all__ = [
    "CLOUDS",
    "Catalog",
    "Cloud",
    "MachineType",
    "PoolKind",
    "TpuGeneration",
    "load_catalog",
    "topology_chips",
    "tpu_vms",
]
