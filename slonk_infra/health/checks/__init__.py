"""The checks, and which of them each mode runs.

- ``boot`` (pod start): every check.
- ``interval`` (Slurm HealthCheckProgram, while jobs may run): every check but ``gpu-idle``.
- ``prolog`` / ``epilog``: the fast subset, every check but ``gpu-xid`` (listening for events costs
  ``xidWaitMs`` and sees only events raised while listening). ``gpu-idle`` looks only at the job's own
  GPUs (Slurm's ``SLURM_JOB_GPUS``; a whole-node job holds them all) and is left out for a job holding
  none: another job's processes on a shared node, or a CPU job beside a GPU job, are legitimate.
"""

from __future__ import annotations

from collections.abc import Callable

from slonk_infra.health.checks import disk, gpu, tpu, xid
from slonk_infra.health.context import CheckContext, Mode
from slonk_infra.health.result import CheckResult

Check = Callable[[CheckContext], CheckResult]

GPU_CHECKS: dict[str, Check] = {
    "gpu-count": gpu.gpu_count,
    "gpu-ecc": gpu.gpu_ecc,
    "gpu-remapped-rows": gpu.gpu_remapped_rows,
    "gpu-xid": xid.gpu_xid,
    "gpu-pcie": gpu.gpu_pcie,
    "gpu-throttle": gpu.gpu_throttle,
    "gpu-idle": gpu.gpu_idle,
}
OTHER_CHECKS: dict[str, Check] = {
    "tpu-count": tpu.tpu_count,
    "disk-scratch": disk.disk_scratch,
    "disk-home": disk.disk_home,
}
CHECKS: dict[str, Check] = {**GPU_CHECKS, **OTHER_CHECKS}


def mode_skips(mode: Mode, job_gpus_known: bool = False) -> dict[str, str]:
    """Checks ``mode`` leaves out, with the reason. ``job_gpus_known``: Slurm named the job's GPUs."""
    if mode == "interval":
        return {"gpu-idle": "interval runs while jobs may use the GPUs"}
    if mode in ("prolog", "epilog"):
        skips = {"gpu-xid": f"{mode} runs the fast subset; XID events are heard by boot and interval runs"}
        if not job_gpus_known:
            skips["gpu-idle"] = "the job holds no GPU (no SLURM_JOB_GPUS)"
        return skips
    return {}
