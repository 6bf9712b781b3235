"""GPU checks through NVML: count, ECC, remapped rows, PCIe link, clock-event reasons, idle state.

Each check reads every GPU NVML sees and returns one result: the worst action over the GPUs, a reason
naming each GPU at fault, and the values read per GPU under ``figures["gpus"]``.
"""

from __future__ import annotations

from typing import Any

from slonk_infra.health.context import CheckContext
from slonk_infra.health.nvml import (
    CLOCK_EVENT_BITS,
    DRIVER_NOT_LOADED,
    GPU_IS_LOST,
    LIBRARY_NOT_FOUND,
    RESET_REQUIRED,
    UNKNOWN,
    NvmlError,
)
from slonk_infra.health.result import Action, CheckResult, failed, passed, worst

MIB = 1024 * 1024

Problem = tuple[Action, str]


def nvml_fault_action(err: NvmlError) -> Action:
    """What an NVML failure calls for: a lost or wedged GPU needs the machine reset; anything else a person."""
    if err.code in (GPU_IS_LOST, RESET_REQUIRED, UNKNOWN, DRIVER_NOT_LOADED):
        return "replace-machine"
    return "needs-person"


def _verdict(check: str, problems: list[Problem], figures: dict[str, Any], ok_reason: str) -> CheckResult:
    if not problems:
        return passed(check, ok_reason, figures)
    action = worst([a for a, _ in problems])
    return failed(check, action, "; ".join(reason for _, reason in problems), figures)


def _per_gpu(ctx: CheckContext) -> tuple[list[Problem], list[dict[str, Any]]]:
    return [], [{"index": i} for i in ctx.gpus()]


def gpu_count(ctx: CheckContext) -> CheckResult:
    """NVML loads and sees exactly the GPUs the catalog declares for this machine."""
    expected = ctx.spec.gpu.count
    if ctx.nvml is None:
        err = ctx.nvml_error or NvmlError(UNKNOWN, "nvmlInit")
        # No library in the image is a build/wiring fault no new machine fixes; a driver that does
        # not load, or a GPU lost at init, is the machine's.
        action: Action = "needs-person" if err.code == LIBRARY_NOT_FOUND else nvml_fault_action(err)
        return failed("gpu-count", action, f"NVML unavailable: {err}", {"expected": expected, "nvmlError": err.code})
    nvml = ctx.nvml
    found = nvml.device_count()
    gpus = [
        {"index": i, "name": nvml.name(i), "uuid": nvml.uuid(i), "pciBusId": nvml.pci_bus_id(i)} for i in range(found)
    ]
    figures = {"expected": expected, "found": found, "driverVersion": nvml.driver_version(), "gpus": gpus}
    if found < expected:
        return failed("gpu-count", "replace-machine", f"{found} of {expected} GPUs visible", figures)
    if found > expected:
        # More GPUs than the catalog says: the declaration or catalog is wrong, not the machine.
        return failed("gpu-count", "needs-person", f"{found} GPUs visible, {expected} declared", figures)
    return passed("gpu-count", f"{found} GPUs visible as declared", figures)


def gpu_ecc(ctx: CheckContext) -> CheckResult:
    """ECC is on and uncorrectable (and optionally correctable) error counts are within limits."""
    spec = ctx.spec.gpu
    assert ctx.nvml is not None
    nvml = ctx.nvml
    problems, gpus = _per_gpu(ctx)
    for fig in gpus:
        i = fig["index"]
        try:
            current, pending = nvml.ecc_mode(i)
        except NvmlError as err:
            if not err.not_supported:
                problems.append((nvml_fault_action(err), f"GPU {i}: reading ECC mode failed: {err}"))
            elif spec.require_ecc:
                problems.append(("needs-person", f"GPU {i}: ECC is not supported, and requireEcc is set"))
            fig["eccMode"] = "not supported" if err.not_supported else f"error {err.code}"
            continue
        fig["eccMode"] = {"current": current, "pending": pending}
        if spec.require_ecc and not current:
            # A fresh or rebooted machine comes back with ECC on (pending shows what a reboot gives).
            problems.append(("replace-machine", f"GPU {i}: ECC is disabled (pending: {'on' if pending else 'off'})"))
            continue
        if not current:
            continue
        try:
            counts = {
                "volatileUncorrected": nvml.ecc_errors(i, uncorrected=True, volatile=True),
                "aggregateUncorrected": nvml.ecc_errors(i, uncorrected=True, volatile=False),
                "volatileCorrected": nvml.ecc_errors(i, uncorrected=False, volatile=True),
                "aggregateCorrected": nvml.ecc_errors(i, uncorrected=False, volatile=False),
            }
        except NvmlError as err:
            problems.append((nvml_fault_action(err), f"GPU {i}: reading ECC counters failed: {err}"))
            continue
        fig["eccErrors"] = counts
        limits = {
            "volatileUncorrected": spec.max_volatile_uncorrectable_ecc,
            "aggregateUncorrected": spec.max_aggregate_uncorrectable_ecc,
            "volatileCorrected": spec.max_volatile_correctable_ecc,
        }
        for name, limit in limits.items():
            if limit is not None and counts[name] > limit:
                problems.append(("replace-machine", f"GPU {i}: {counts[name]} {name} ECC errors (limit {limit})"))
    return _verdict("gpu-ecc", problems, {"gpus": gpus}, "ECC on, error counts within limits")


def gpu_remapped_rows(ctx: CheckContext) -> CheckResult:
    """No row remapping waits for a GPU reset, and none has failed."""
    spec = ctx.spec.gpu
    assert ctx.nvml is not None
    problems, gpus = _per_gpu(ctx)
    for fig in gpus:
        i = fig["index"]
        try:
            corr, unc, pending, failure = ctx.nvml.remapped_rows(i)
        except NvmlError as err:
            if not err.not_supported:  # GPUs before Ampere retire pages instead of remapping rows
                problems.append((nvml_fault_action(err), f"GPU {i}: reading remapped rows failed: {err}"))
            fig["remappedRows"] = "not supported" if err.not_supported else f"error {err.code}"
            continue
        fig["remappedRows"] = {"correctable": corr, "uncorrectable": unc, "pending": pending, "failure": failure}
        if failure and not spec.tolerate_remap_failure:
            problems.append(("needs-person", f"GPU {i}: row remapping failed (out of spare rows; the GPU needs RMA)"))
        if pending and not spec.tolerate_remap_pending:
            problems.append(("replace-machine", f"GPU {i}: remapped rows pending a GPU reset"))
    return _verdict("gpu-remapped-rows", problems, {"gpus": gpus}, "no remapping pending or failed")


def _busy(reasons: int) -> bool:
    return not reasons & CLOCK_EVENT_BITS["gpuIdle"]


def gpu_pcie(ctx: CheckContext) -> CheckResult:
    """Each GPU's PCIe link runs at full width, and at full generation while busy (see PcieSpec)."""
    spec = ctx.spec.gpu.pcie
    assert ctx.nvml is not None
    problems, gpus = _per_gpu(ctx)
    for fig in gpus:
        i = fig["index"]
        try:
            link = ctx.nvml.pcie(i)
            busy = _busy(ctx.nvml.clock_event_reasons(i))
        except NvmlError as err:
            if not err.not_supported:
                problems.append((nvml_fault_action(err), f"GPU {i}: reading the PCIe link failed: {err}"))
            fig["pcie"] = "not supported" if err.not_supported else f"error {err.code}"
            continue
        fig["pcie"] = {**link, "busy": busy}
        cur_w, max_w, cur_g, max_g = link["currentWidth"], link["maxWidth"], link["currentGen"], link["maxGen"]
        if spec.require_max_width and cur_w < max_w:
            problems.append(("replace-machine", f"GPU {i}: PCIe link x{cur_w}, below its maximum x{max_w}"))
        if spec.min_width is not None and max_w < spec.min_width:
            problems.append(("replace-machine", f"GPU {i}: PCIe link at most x{max_w}, expected x{spec.min_width}"))
        if spec.min_generation is not None and max_g < spec.min_generation:
            problems.append(
                ("replace-machine", f"GPU {i}: PCIe link at most gen {max_g}, expected gen {spec.min_generation}")
            )
        if spec.check_generation_when_busy and busy and cur_g < max_g:
            problems.append(("replace-machine", f"GPU {i}: busy GPU's PCIe link at gen {cur_g}, below its gen {max_g}"))
    return _verdict("gpu-pcie", problems, {"gpus": gpus}, "PCIe links at full width")


def reason_names(mask: int) -> list[str]:
    """Names (CLOCK_EVENT_BITS) of the bits set in ``mask``."""
    return [name for name, bit in CLOCK_EVENT_BITS.items() if mask & bit]


def gpu_throttle(ctx: CheckContext) -> CheckResult:
    """No clock-event (throttle) reason HealthSpec calls fatal is active."""
    fatal: dict[str, Action] = {str(name): action for name, action in ctx.spec.gpu.fatal_throttle_reasons.items()}
    assert ctx.nvml is not None
    problems, gpus = _per_gpu(ctx)
    for fig in gpus:
        i = fig["index"]
        try:
            mask = ctx.nvml.clock_event_reasons(i)
            fig["temperatureC"] = ctx.nvml.temperature(i)
            fig["performanceState"] = ctx.nvml.performance_state(i)
        except NvmlError as err:
            if not err.not_supported:
                problems.append((nvml_fault_action(err), f"GPU {i}: reading clock-event reasons failed: {err}"))
            fig["clockEventReasons"] = "not supported" if err.not_supported else f"error {err.code}"
            continue
        names = reason_names(mask)
        fig["clockEventReasons"] = {"mask": mask, "active": names}
        for name in names:
            action = fatal.get(name)
            if action is not None and action != "none":
                problems.append((action, f"GPU {i}: clocks held down by {name} at {fig['temperatureC']} C"))
    return _verdict("gpu-throttle", problems, {"gpus": gpus}, "no fatal clock-event reason active")


def _idle_problems(ctx: CheckContext, gpus: list[dict[str, Any]]) -> list[Problem]:
    spec = ctx.spec.gpu
    assert ctx.nvml is not None
    problems: list[Problem] = []
    for fig in gpus:
        i = fig["index"]
        procs = ctx.nvml.compute_processes(i)
        mem = ctx.nvml.memory(i)
        used_mib = (mem["used"] or 0) // MIB
        fig["processes"] = [{"pid": pid, "usedMiB": None if used is None else used // MIB} for pid, used in procs]
        fig["memoryMiB"] = {k: None if v is None else v // MIB for k, v in mem.items()}
        found = []
        if len(procs) > spec.max_idle_processes:
            pids = ", ".join(str(pid) for pid, _ in procs[:5])
            found.append(f"{len(procs)} compute processes (pids {pids})")
        if used_mib > spec.max_idle_memory_mib:
            found.append(f"{used_mib} MiB in use (limit {spec.max_idle_memory_mib})")
        if found:
            problems.append((spec.leftover_action, f"GPU {i} at idle: {' and '.join(found)}"))
    return problems


def gpu_idle(ctx: CheckContext) -> CheckResult:
    """No compute process and little memory in use on a GPU no job holds.

    In prolog and epilog only the job's own GPUs are looked at (every GPU at boot): another job's
    processes on the others are legitimate. A finished job's processes can take a moment to release the
    GPU, so the check looks again every half second for ``idleGraceSeconds`` before it reports them.
    """
    deadline = ctx.clock() + ctx.spec.gpu.idle_grace_seconds
    indices = list(ctx.gpus()) if ctx.job_gpus is None else ctx.job_gpu_indices()
    if ctx.job_gpus is not None and len(indices) != len(set(ctx.job_gpus)):
        # A job GPU no device answers to would otherwise pass unseen: the GRES and the GPUs disagree.
        return failed(
            "gpu-idle",
            "needs-person",
            f"the job's GPUs {sorted(set(ctx.job_gpus))} match NVML devices {indices} only (by minor number)",
            {"jobGpus": sorted(set(ctx.job_gpus)), "matched": indices},
        )
    while True:
        gpus: list[dict[str, Any]] = [{"index": i} for i in indices]
        try:
            problems = _idle_problems(ctx, gpus)
        except NvmlError as err:
            if err.not_supported:
                return passed("gpu-idle", f"process list not supported: {err}", {"gpus": gpus})
            return failed("gpu-idle", nvml_fault_action(err), f"reading GPU processes failed: {err}", {"gpus": gpus})
        if not problems or ctx.clock() >= deadline:
            break
        ctx.sleep(0.5)
    return _verdict("gpu-idle", problems, {"gpus": gpus}, "no leftover processes or memory")
