"""Choose the checks for a run and run them; a check that breaks becomes a result, never a traceback."""

from __future__ import annotations

from collections.abc import Iterable

from slonk_infra.health.checks import CHECKS, GPU_CHECKS, mode_skips
from slonk_infra.health.checks.gpu import nvml_fault_action
from slonk_infra.health.context import CheckContext
from slonk_infra.health.nvml import NvmlError
from slonk_infra.health.result import CheckResult, Skipped, failed


def plan(ctx: CheckContext, only: Iterable[str] = (), skip: Iterable[str] = ()) -> tuple[list[str], list[Skipped]]:
    """The checks to run, in order, and those left out with the reason."""
    only, skip = set(only), set(skip)
    unknown = (only | skip) - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(sorted(unknown))}; known: {', '.join(CHECKS)}")
    spec = ctx.spec
    mode_out = mode_skips(ctx.mode, ctx.job_gpus is not None)
    run: list[str] = []
    skipped: list[Skipped] = []
    for name in CHECKS:
        why: str | None = None
        if only and name not in only:
            why = "not selected (--check)"
        elif name in skip:
            why = "skipped (--skip)"
        elif name in mode_out:
            why = mode_out[name]
        elif name in GPU_CHECKS and spec.gpu.count == 0:
            why = "no GPUs declared for this node (gpu.count 0)"
        elif name in GPU_CHECKS and name != "gpu-count" and ctx.nvml is None:
            why = "NVML unavailable (see gpu-count)"
        elif name == "tpu-count" and spec.tpu.chips_per_host == 0:
            why = "no TPU declared for this node (tpu.chipsPerHost 0)"
        elif name == "disk-scratch" and spec.disk.scratch_path is None:
            why = "no scratch path configured"
        elif name == "disk-home" and spec.disk.home_path is None:
            why = "no home path configured"
        if why is None:
            run.append(name)
        else:
            skipped.append(Skipped(check=name, reason=why))
    return run, skipped


def run_check(name: str, ctx: CheckContext) -> CheckResult:
    """Run one check; an NVML error it did not expect or a crash is reported as its failure."""
    try:
        return CHECKS[name](ctx)
    except NvmlError as err:
        return failed(name, nvml_fault_action(err), f"NVML call failed: {err}", {"nvmlError": err.code})
    except Exception as exc:  # a broken check must still yield a verdict a person will read
        return failed(name, "needs-person", f"check crashed: {type(exc).__name__}: {exc}", {})
