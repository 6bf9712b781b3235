"""GPU checks against NVML answers recorded on a real H100, and failure variants derived from them.

Each failure variant changes one recorded answer to what a faulty GPU reports and asserts the
check's action; the unchanged recording must pass, so a check that always fails cannot pass here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.health.checks import CHECKS
from slonk_infra.health.config import HealthSpec
from slonk_infra.health.context import CheckContext, Mode
from slonk_infra.health.nvml import Nvml, NvmlError, ReplayBackend
from slonk_infra.health.result import CheckResult
from slonk_infra.health.runner import plan, run_check

DATA = Path(__file__).resolve().parents[1] / "data" / "nvml"
MIB = 1024 * 1024


def recording(name: str = "h100-idle") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return data


def spec(**gpu: Any) -> HealthSpec:
    return HealthSpec.model_validate({"gpu": {"count": 1, "idleGraceSeconds": 0, **gpu}})


def context(rec: dict[str, Any], health: HealthSpec | None = None, mode: Mode = "boot") -> CheckContext:
    health = health or spec()
    try:
        return CheckContext(spec=health, mode=mode, nvml=Nvml(ReplayBackend(rec)))
    except NvmlError as err:
        return CheckContext(spec=health, mode=mode, nvml_error=err)


def check(name: str, rec: dict[str, Any], health: HealthSpec | None = None) -> CheckResult:
    return run_check(name, context(rec, health))


def answer(rec: dict[str, Any], key: str, value: Any, device: str | None = "0") -> dict[str, Any]:
    """A copy of ``rec`` with one answer replaced (``value`` or an NvmlError's code)."""
    out = copy.deepcopy(rec)
    scope = out["system"] if device is None else out["devices"][device]
    scope[key] = {"error": value.code, "message": value.message} if isinstance(value, NvmlError) else {"value": value}
    return out


GPU_CHECK_NAMES = [n for n in CHECKS if n.startswith("gpu-")]


# --- the healthy H100 ---


@pytest.mark.parametrize("rec_name", ["h100-idle", "h100b-idle"])
@pytest.mark.parametrize("name", GPU_CHECK_NAMES)
def test_every_gpu_check_passes_on_the_recorded_idle_h100s(name: str, rec_name: str) -> None:
    result = check(name, recording(rec_name))
    assert result.ok and result.action == "none", result


def test_replay_gives_what_the_live_h100_runs_reported() -> None:
    for rec_name in ("h100-idle", "h100-busy", "h100b-idle"):
        live = json.loads((DATA / f"{rec_name}.report.json").read_text())
        live_gpu = {r["check"]: r for r in live["results"] if r["check"].startswith("gpu-")}
        ctx = context(recording(rec_name))
        replayed = [run_check(n, ctx) for n in live_gpu]
        for result in replayed:
            expected = live_gpu[result.check]
            assert (result.ok, result.action) == (expected["ok"], expected["action"]), (rec_name, result)
            assert result.model_dump(by_alias=True)["figures"] == expected["figures"], (rec_name, result.check)


def test_recorded_h100_figures() -> None:
    count = check("gpu-count", recording())
    assert count.figures["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert count.figures["driverVersion"].startswith("580.")
    pcie = check("gpu-pcie", recording()).figures["gpus"][0]["pcie"]
    assert (pcie["currentWidth"], pcie["maxWidth"], pcie["maxGen"]) == (16, 16, 5)


# --- NVML itself ---


@pytest.mark.parametrize(
    ("code", "action"),
    [(12, "needs-person"), (9, "replace-machine"), (999, "replace-machine"), (4, "needs-person")],
)
def test_nvml_not_loadable(code: int, action: str) -> None:
    rec = recording()
    rec["init"] = {"error": code, "message": "from the test"}
    ctx = context(rec)
    assert ctx.nvml is None and ctx.nvml_error is not None
    result = run_check("gpu-count", ctx)
    assert (result.ok, result.action) == (False, action)
    names, skipped = plan(ctx)
    assert [n for n in names if n.startswith("gpu-")] == ["gpu-count"]
    assert {s.check for s in skipped} >= set(GPU_CHECK_NAMES) - {"gpu-count"}


def test_a_gpu_lost_in_the_middle_of_a_check_means_replace_machine() -> None:
    rec = answer(recording(), "remappedRows", NvmlError(15, "remappedRows", "GPU is lost"))
    result = check("gpu-remapped-rows", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and "GPU 0" in result.reason


def test_an_unexpected_nvml_error_outside_a_guard_is_still_a_verdict() -> None:
    rec = answer(recording(), "name", NvmlError(15, "name", "GPU is lost"))
    result = check("gpu-count", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and "NVML call failed" in result.reason


# --- count ---


def test_fewer_gpus_than_declared() -> None:
    result = check("gpu-count", recording(), spec(count=8))
    assert (result.ok, result.action, result.reason) == (False, "replace-machine", "1 of 8 GPUs visible")


def test_more_gpus_than_declared_is_a_declaration_problem() -> None:
    rec = answer(recording(), "deviceCount", 2, device=None)
    rec["devices"]["1"] = copy.deepcopy(rec["devices"]["0"])
    rec["devices"]["1"]["uuid"] = {"value": "GPU-00000000-0000-0000-0000-000000000001"}
    result = check("gpu-count", rec)
    assert (result.ok, result.action) == (False, "needs-person")


# --- ECC ---


def test_uncorrectable_volatile_ecc_errors() -> None:
    rec = answer(recording(), "eccErrors.uncorrected.volatile", 1)
    result = check("gpu-ecc", rec)
    assert (result.ok, result.action) == (False, "replace-machine")
    assert "1 volatileUncorrected ECC errors (limit 0)" in result.reason
    assert check("gpu-ecc", rec, spec(maxVolatileUncorrectableEcc=1)).ok


def test_aggregate_and_correctable_counts_only_when_limits_are_set() -> None:
    rec = answer(answer(recording(), "eccErrors.uncorrected.aggregate", 3), "eccErrors.corrected.volatile", 50)
    assert check("gpu-ecc", rec).ok
    assert check("gpu-ecc", rec, spec(maxAggregateUncorrectableEcc=2)).action == "replace-machine"
    assert check("gpu-ecc", rec, spec(maxVolatileCorrectableEcc=10)).action == "replace-machine"


def test_ecc_disabled() -> None:
    rec = answer(recording(), "eccMode", [0, 1])
    result = check("gpu-ecc", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and "pending: on" in result.reason
    assert check("gpu-ecc", rec, spec(requireEcc=False)).ok


def test_ecc_not_supported() -> None:
    rec = answer(recording(), "eccMode", NvmlError(3, "eccMode", "Not Supported"))
    assert check("gpu-ecc", rec).action == "needs-person"
    assert check("gpu-ecc", rec, spec(requireEcc=False)).ok


# --- remapped rows ---


def test_remapped_rows_pending() -> None:
    rec = answer(recording(), "remappedRows", [0, 1, 1, 0])
    result = check("gpu-remapped-rows", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and "pending" in result.reason
    assert check("gpu-remapped-rows", rec, spec(tolerateRemapPending=True)).ok


def test_remapping_failure_needs_a_person() -> None:
    rec = answer(recording(), "remappedRows", [0, 512, 1, 1])
    result = check("gpu-remapped-rows", rec)
    assert (result.ok, result.action) == (False, "needs-person")
    assert "failed" in result.reason and "pending" in result.reason
    assert check("gpu-remapped-rows", rec, spec(tolerateRemapFailure=True)).action == "replace-machine"


def test_remapped_rows_not_supported_on_older_gpus() -> None:
    rec = answer(recording(), "remappedRows", NvmlError(3, "remappedRows", "Not Supported"))
    assert check("gpu-remapped-rows", rec).ok


# --- XID events ---


@pytest.mark.parametrize(
    ("xid", "action"),
    [
        (79, "replace-machine"),
        (48, "replace-machine"),
        (63, "replace-machine"),
        (64, "replace-machine"),
        (74, "replace-machine"),
        (95, "replace-machine"),
        (119, "replace-machine"),
        (94, "restart-pod"),
        (9999, "needs-person"),
    ],
)
def test_xid_event_actions(xid: int, action: str) -> None:
    rec = answer(recording(), "events", [[0, 0x8, xid]], device=None)
    result = check("gpu-xid", rec)
    assert (result.ok, result.action) == (False, action)
    assert f"GPU 0: XID {xid}" in result.reason
    assert result.figures["events"] == [{"gpu": 0, "xid": xid, "action": action}]


@pytest.mark.parametrize("xid", [13, 31, 43, 45])
def test_xid_that_needs_no_action_is_reported_but_passes(xid: int) -> None:
    rec = answer(recording(), "events", [[0, 0x8, xid]], device=None)
    result = check("gpu-xid", rec)
    assert result.ok and result.figures["events"] == [{"gpu": 0, "xid": xid, "action": "none"}]


def test_double_bit_ecc_event_counts_as_xid_48_and_other_events_are_ignored() -> None:
    rec = answer(recording(), "events", [[0, 0x4, 1], [0, 0x2, 0]], device=None)
    result = check("gpu-xid", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and "XID 48" in result.reason


def test_the_worst_of_several_xids_wins() -> None:
    rec = answer(recording(), "events", [[0, 0x8, 94], [0, 0x8, 79]], device=None)
    assert check("gpu-xid", rec).action == "replace-machine"


def test_xid_rules_are_configurable() -> None:
    rec = answer(recording(), "events", [[0, 0x8, 31]], device=None)
    custom = spec(xidRules=[{"codes": [31], "action": "restart-pod", "meaning": "page fault"}])
    assert check("gpu-xid", rec, custom).action == "restart-pod"
    assert check("gpu-xid", rec).ok


@pytest.mark.parametrize("variant", ["no-event-types", "events-not-supported"])
def test_xid_events_not_offered_pass_with_a_note(variant: str) -> None:
    if variant == "no-event-types":
        rec = answer(recording(), "supportedEventTypes", 0x4)
        del rec["system"]["events"]  # nothing to listen for: the wait must not happen
    else:
        rec = answer(recording(), "events", NvmlError(3, "events", "Not Supported"), device=None)
    result = check("gpu-xid", rec)
    assert result.ok and result.figures["supported"] is False


def test_listening_for_xids_failing_otherwise_is_a_failure() -> None:
    rec = answer(recording(), "events", NvmlError(999, "events", "Unknown Error"), device=None)
    assert check("gpu-xid", rec).action == "replace-machine"


# --- PCIe ---


def test_pcie_width_below_maximum() -> None:
    rec = answer(recording(), "pcie.currentWidth", 8)
    result = check("gpu-pcie", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and "x8, below its maximum x16" in result.reason
    assert check("gpu-pcie", rec, spec(pcie={"requireMaxWidth": False})).ok


def test_an_idle_gpu_may_lower_its_link_generation_but_a_busy_one_may_not() -> None:
    idle_low = answer(recording(), "pcie.currentGen", 1)
    assert check("gpu-pcie", idle_low).ok
    busy_low = answer(recording("h100-busy"), "pcie.currentGen", 3)
    result = check("gpu-pcie", busy_low)
    assert (result.ok, result.action) == (False, "replace-machine") and "gen 3, below its gen 5" in result.reason
    assert check("gpu-pcie", busy_low, spec(pcie={"checkGenerationWhenBusy": False})).ok


def test_pcie_minimums_from_the_spec() -> None:
    assert check("gpu-pcie", recording(), spec(pcie={"minGeneration": 5, "minWidth": 16})).ok
    assert check("gpu-pcie", recording(), spec(pcie={"minGeneration": 6})).action == "replace-machine"
    slot = answer(answer(recording(), "pcie.maxWidth", 8), "pcie.currentWidth", 8)
    assert check("gpu-pcie", slot).ok
    assert check("gpu-pcie", slot, spec(pcie={"minWidth": 16})).action == "replace-machine"


# --- clock-event (throttle) reasons ---


@pytest.mark.parametrize(
    ("mask", "name"),
    [
        (0x8 | 0x40, "hwThermalSlowdown"),
        (0x8 | 0x80, "hwPowerBrakeSlowdown"),
        (0x8, "hwSlowdown"),
        (0x20, "swThermalSlowdown"),
    ],
)
def test_fatal_throttle_reasons(mask: int, name: str) -> None:
    rec = answer(recording("h100-busy"), "clockEventReasons", mask)
    result = check("gpu-throttle", rec)
    assert (result.ok, result.action) == (False, "replace-machine") and name in result.reason
    assert name in result.figures["gpus"][0]["clockEventReasons"]["active"]


def test_power_cap_and_idle_are_not_fatal() -> None:
    busy = check("gpu-throttle", recording("h100-busy"))
    assert busy.ok and busy.figures["gpus"][0]["clockEventReasons"]["active"] == ["swPowerCap"]


def test_fatal_throttle_reasons_are_configurable() -> None:
    rec = answer(recording(), "clockEventReasons", 0x20)
    assert check("gpu-throttle", rec, spec(fatalThrottleReasons={"swThermalSlowdown": "needs-person"})).action == (
        "needs-person"
    )
    assert check("gpu-throttle", rec, spec(fatalThrottleReasons={})).ok


# --- idle GPU ---


def test_leftover_process_recorded_on_the_h100() -> None:
    result = check("gpu-idle", recording("h100-busy"))
    assert (result.ok, result.action) == (False, "restart-pod")
    assert "1 compute processes (pids 454)" in result.reason
    assert result.figures["gpus"][0]["processes"] == [{"pid": 454, "usedMiB": 5098}]


def test_memory_in_use_without_a_process() -> None:
    rec = answer(recording(), "memory", {"total": 81559 * MIB, "reserved": 480 * MIB, "used": 1024 * MIB})
    result = check("gpu-idle", rec)
    assert (result.ok, result.action) == (False, "restart-pod") and "1024 MiB in use" in result.reason
    assert check("gpu-idle", rec, spec(maxIdleMemoryMiB=2048)).ok


class _Draining(ReplayBackend):
    """Replays ``busy`` for the first ``n`` process reads, then ``idle``: a job's process letting go."""

    def __init__(self, busy: dict[str, Any], idle: dict[str, Any], n: int) -> None:
        super().__init__(busy)
        self._idle = ReplayBackend(idle)
        self._left = n

    def read(self, device: int | None, key: str, fetch: Any) -> Any:
        if key == "computeProcesses":
            self._left -= 1
        if self._left < 0 and key in ("computeProcesses", "memory"):
            return self._idle.read(device, key, fetch)
        return super().read(device, key, fetch)


def test_epilog_waits_for_a_finished_jobs_process_to_let_go() -> None:
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    backend = _Draining(recording("h100-busy"), recording(), n=2)
    ctx = CheckContext(
        spec=spec(idleGraceSeconds=5), mode="epilog", nvml=Nvml(backend), sleep=sleep, clock=lambda: now[0]
    )
    assert run_check("gpu-idle", ctx).ok
    assert sleeps == [0.5, 0.5]
    # A process that stays past the grace period is reported.
    ctx = CheckContext(
        spec=spec(idleGraceSeconds=2),
        mode="epilog",
        nvml=Nvml(_Draining(recording("h100-busy"), recording(), n=100)),
        sleep=sleep,
        clock=lambda: now[0],
    )
    assert run_check("gpu-idle", ctx).action == "restart-pod"


# --- modes ---


def test_modes_choose_their_checks() -> None:
    rec = recording()
    health = spec()
    ran = {mode: plan(context(rec, health, mode))[0] for mode in ("boot", "interval", "prolog", "epilog")}
    assert "gpu-idle" in ran["boot"] and "gpu-xid" in ran["boot"]
    assert "gpu-idle" not in ran["interval"] and "gpu-xid" in ran["interval"]
    for mode in ("prolog", "epilog"):
        # a job holding no GPU (no SLURM_JOB_GPUS) has none to find idle, whatever the node runs
        assert "gpu-xid" not in ran[mode] and "gpu-idle" not in ran[mode]
    with_gpus = context(rec, health, "epilog")
    with_gpus.job_gpus = (0,)
    assert "gpu-idle" in plan(with_gpus)[0]


def _two_gpus(busy_device: str) -> dict[str, Any]:
    """A two-GPU node from the recordings: GPU ``busy_device`` is the busy H100, the other the idle one."""
    idle, busy = recording("h100-idle"), recording("h100-busy")
    rec = copy.deepcopy(idle)
    rec["system"]["deviceCount"] = {"value": 2}
    rec["devices"] = {"0": idle["devices"]["0"], "1": copy.deepcopy(idle["devices"]["0"])}
    rec["devices"][busy_device] = busy["devices"]["0"]
    for index in ("0", "1"):  # NVML's order reversed against the device files: minor 1 is index 0
        rec["devices"][index]["minorNumber"] = {"value": 1 - int(index)}
    return rec


@pytest.mark.parametrize("mode", ["prolog", "epilog"])
def test_a_shared_node_looks_only_at_the_jobs_own_gpus(mode: Mode) -> None:
    shared = HealthSpec.model_validate({"gpu": {"count": 2, "idleGraceSeconds": 0}, "exclusiveNodes": False})
    rec = _two_gpus(busy_device="0")  # NVML index 0 is /dev/nvidia1, which another job holds
    mine = context(rec, shared, mode)
    mine.job_gpus = (0,)  # /dev/nvidia0: NVML index 1, idle
    result = run_check("gpu-idle", mine)
    assert result.ok, result
    assert [g["index"] for g in result.figures["gpus"]] == [1]
    theirs = context(rec, shared, mode)
    theirs.job_gpus = (1,)
    result = run_check("gpu-idle", theirs)
    assert not result.ok and "GPU 0 at idle" in result.reason
    whole = context(rec, spec(count=2), mode)
    whole.job_gpus = (0, 1)  # a whole-node job holds every GPU: every one must be idle
    assert not run_check("gpu-idle", whole).ok
    unmatched = context(rec, shared, mode)
    unmatched.job_gpus = (0, 5)  # a GPU Slurm gave the job that no device answers to
    result = run_check("gpu-idle", unmatched)
    assert (result.ok, result.action) == (False, "needs-person") and "[0, 5]" in result.reason


def test_no_gpu_checks_on_a_node_without_gpus() -> None:
    ctx = CheckContext(spec=HealthSpec(), mode="boot")
    names, skipped = plan(ctx)
    assert not [n for n in names if n.startswith("gpu-")]
    assert len([s for s in skipped if s.check.startswith("gpu-")]) == len(GPU_CHECK_NAMES)


def test_a_crashing_check_yields_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: CheckContext) -> CheckResult:
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(CHECKS, "gpu-ecc", broken)
    result = check("gpu-ecc", recording())
    assert (result.ok, result.action) == (False, "needs-person") and "ZeroDivisionError" in result.reason
