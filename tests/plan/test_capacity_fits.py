"""Every accelerated machine's worker pod fits its node, with the figures and sources of the catalog.

For each GPU and TPU machine of the catalog, on its cloud: the slurmd request Slurm's node line
implies (whole CPUs, RealMemory) plus the pod's sidecars plus the node's system pods stays within
the node's allocatable CPU and memory, as the cloud's node model computes it; and RealMemory never
exceeds what slurmd's container may request.
"""

from __future__ import annotations

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.plan.capacity import (
    MUNGED,
    Request,
    fits,
    node_budget,
)
from tests.support import parse_quantity_m, parse_quantity_mib

CATALOG = load_catalog()
STORAGE = {"gcp": ["filestore"], "aws": ["efs", "fsx-lustre"], "local": []}
ACCELERATED = sorted(m.name for m in CATALOG.machines.values() if m.kind in ("gpu", "tpu"))


@pytest.mark.parametrize("machine", ACCELERATED)
def test_worker_request_plus_system_pods_fits_allocatable(machine: str) -> None:
    m = CATALOG.machines[machine]
    budget = node_budget(m, STORAGE[m.cloud])
    shape = budget.shape
    slurmd = Request(cpu_m=shape.cpus * 1000, memory_mib=shape.real_memory_mib)
    assert fits(budget, slurmd), (machine, budget)
    assert shape.real_memory_mib <= budget.slurmd.memory_mib
    assert shape.cpus * 1000 <= budget.slurmd.cpu_m
    # The figures behind it are the catalog's, each with its source.
    assert all(p.source for p in CATALOG.daemonset_reservation(m, frozenset(STORAGE[m.cloud])).pods)
    # And one more MiB would not fit: the request is the whole of what the node offers.
    assert not fits(budget, Request(slurmd.cpu_m, budget.slurmd.memory_mib + 1))


def test_memory_is_below_nominal_by_the_documented_shares() -> None:
    mega = node_budget(CATALOG.machines["a3-megagpu-8g"], ["filestore"])
    nominal = 1872 * 1024
    # GKE: 3% below nominal for MemTotal, then ~2% reserved on top of that, then the system pods.
    assert nominal * 0.94 < mega.shape.real_memory_mib < nominal * 0.96
    p5 = node_budget(CATALOG.machines["p5.48xlarge"], ["efs"])
    assert p5.capacity_mib <= 2097152 - 49192  # Karpenter's measurement of p5.48xlarge


def test_storage_daemonsets_and_sidecars_come_off_slurms_share() -> None:
    p5 = CATALOG.machines["p5.48xlarge"]
    bare, with_efs = node_budget(p5, []), node_budget(p5, ["efs"])
    assert with_efs.slurmd.memory_mib < bare.slurmd.memory_mib
    assert bare.sidecars == MUNGED
    heavier = node_budget(p5, [], sidecars=[MUNGED, Request(100, 512)])
    assert heavier.slurmd.memory_mib == bare.slurmd.memory_mib - 512


def test_cpu_goes_to_slurm_in_whole_cores() -> None:
    shape = node_budget(CATALOG.machines["g6.xlarge"], []).shape
    # 4 vCPUs, 2 threads per core: after ~0.5 core of reservations and system pods, 1 core is kept.
    assert (shape.cpus, shape.core_spec) == (2, 1)


def test_a_node_with_nothing_left_is_an_error() -> None:
    tiny = CATALOG.machines["local-2c4g"].model_copy(update={"vcpus": 1, "sockets": 1, "threads_per_core": 1})
    with pytest.raises(ValueError, match="nothing left for slurmd"):
        _ = node_budget(tiny, [], sidecars=[Request(2000, 64)]).shape


@pytest.mark.parametrize(
    ("text", "mib"), [("512Mi", 512), ("2Gi", 2048), ("1048576Ki", 1024), ("1Ti", 1048576), ("1048577", 2)]
)
def test_memory_quantities(text: str, mib: int) -> None:
    assert parse_quantity_mib(text) == mib


@pytest.mark.parametrize(("text", "m"), [("250m", 250), ("2", 2000), ("0.5", 500)])
def test_cpu_quantities(text: str, m: int) -> None:
    assert parse_quantity_m(text) == m
