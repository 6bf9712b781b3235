"""What every check receives: the spec, the mode, NVML (or why it is missing) and the clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from slonk_infra.health.config import HealthSpec
from slonk_infra.health.nvml import Nvml, NvmlError

Mode = Literal["boot", "interval", "prolog", "epilog"]
MODES: tuple[Mode, ...] = ("boot", "interval", "prolog", "epilog")


@dataclass
class CheckContext:
    """Inputs shared by the checks of one run."""

    spec: HealthSpec
    mode: Mode
    nvml: Nvml | None = None
    nvml_error: NvmlError | None = None
    job_gpus: tuple[int, ...] | None = None
    """The job's GPUs as Slurm numbers them (``SLURM_JOB_GPUS`` in prolog and epilog): indexes into the
    node's gres.conf device list, which the rendered gres.conf writes as one ``File=/dev/nvidia[0-N]``, so
    index i is /dev/nvidia<i>, the device of minor number i. None where Slurm named none (no job, or a job
    holding no GPU)."""
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.monotonic)

    def gpus(self) -> range:
        """Indices of the GPUs NVML sees (empty without NVML)."""
        if self.nvml is None:
            return range(0)
        return range(self.nvml.device_count())

    def job_gpu_indices(self) -> list[int]:
        """NVML indices of the job's GPUs (:attr:`job_gpus`), matched by minor number.

        NVML orders GPUs by PCI address, Slurm by the device files gres.conf names, so the two agree only
        by the device's minor number; a backend that cannot tell it (an older recording) counts as 1:1.
        """
        if self.nvml is None or self.job_gpus is None:
            return []
        wanted = set(self.job_gpus)
        out = []
        for i in self.gpus():
            try:
                minor = self.nvml.minor_number(i)
            except (NvmlError, KeyError):
                minor = i
            if minor in wanted:
                out.append(i)
        return out
