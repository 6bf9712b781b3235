"""What a run reports when its checks' child did not finish: NVML stuck, a deadline, a child gone.

The child (:mod:`slonk_infra.health.isolate`) tells the run each step and each NVML call as it goes; from
how the watch ended and what was said, :func:`gave_up` decides which check fails, with which action, and
which checks were not run. :func:`merge` folds that into the results the child did send, one entry per
check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from slonk_infra.health.checks import CHECKS, GPU_CHECKS
from slonk_infra.health.config import HealthSpec
from slonk_infra.health.isolate import Outcome, Read
from slonk_infra.health.result import CheckResult, Skipped, failed
from slonk_infra.health.state import StuckCall

NVML_STEPS = ("nvml-open", "identity", "nvml-close")
"""The steps of a run outside any check that call NVML: opening it, reading the GPUs' UUIDs for the
fingerprint, and shutting it down. ``gpu-count`` answers for them: it is the check of NVML answering."""
NVML_CALL_S = 15.0
"""How long one NVML call may go unanswered before the run takes it for stuck. A healthy call answers in
milliseconds; bringing up a GPU that is not kept initialised (no persistence mode: Google's installer
starts nvidia-persistenced only on confidential GPU nodes) takes 1-3 s, and a run does that one GPU per
call (NVIDIA's driver persistence guide, docs.nvidia.com/deploy/driver-persistence). Listening for XID
events takes health.gpu.xidWaitMs more."""
PENDING_AT_DEADLINE_S = 5.0
"""At the run's deadline, a call unanswered this long is taken for stuck too (a call that began too late
to reach :data:`NVML_CALL_S` before the deadline): still more than any healthy call, GPU bring-up included.
One unanswered for less is slow, not stuck, and fails nothing."""
EVENTS_KEY = "events"
"""The read that listens for XID events (slonk_infra/health/nvml.py ``wait_events``)."""


def nvml_call_seconds(spec: HealthSpec, read: Read, limit: float = NVML_CALL_S) -> float:
    """How long ``read`` may take before the run takes it for stuck (``limit``, plus the XID wait)."""
    return limit + (spec.gpu.xid_wait_ms / 1000 if read[1] == EVENTS_KEY else 0.0)


def nvml_call(read: Read | None) -> str:
    """An NVML call as a reason names it: ``GPU 1: NVML eccErrors...``, ``NVML initialisation``."""
    if read is None:
        return "NVML"
    device, key = read
    if device is not None:
        return f"GPU {device}: NVML {key}"
    return f"NVML {({'init': 'initialisation', 'shutdown': 'shutdown'}).get(key, key)}"


@dataclass
class GaveUp:
    """The failed results, the checks not run, a note for people where nothing failed, and whether an NVML
    call was left stuck (the run records its child for the next runs)."""

    results: list[CheckResult] = field(default_factory=list)
    not_run: list[Skipped] = field(default_factory=list)
    note: str | None = None
    stuck: bool = False


def _missing(outcome: Outcome) -> list[str]:
    done = {r.check for r in outcome.results}
    return [n for n in outcome.names if n not in done]


def _blamed(outcome: Outcome) -> str | None:
    """The check that answers for the step the child was in: that check, ``gpu-count`` for opening NVML,
    else the first planned check without a result (a child gone between checks); None when every planned
    check has one."""
    step, missing = outcome.step, _missing(outcome)
    if step in CHECKS and step in missing:
        return step
    if step == "nvml-open":
        return "gpu-count"
    return missing[0] if missing else None


def gave_up(outcome: Outcome, deadline_s: float | None, spec: HealthSpec) -> GaveUp:
    """What to report for a watch that did not end ``done`` (slonk_infra/health/isolate.py):

    * ``stuck``, or the deadline with an NVML call unanswered for :data:`PENDING_AT_DEADLINE_S`: the call's
      check (``gpu-count`` for NVML's own steps) fails with ``replace-machine``: a GPU whose driver no
      longer answers needs the machine reset or replaced (a call stuck in the driver's lock ends only with
      a reboot).
    * the deadline, NVML answering but slowly (a call pending less, or none between calls): nothing fails;
      the checks left are not run and the note says why.
    * the deadline in any other step: that check fails with ``needs-person`` (its own timeouts should have
      ended it: a bug, or a kernel that no longer answers).
    * ``ended``: the child went (killed, or broke outside any check) with checks unanswered: the one it was
      in fails with ``needs-person``; after the last check, only the note says so.
    """
    step, read, blamed = outcome.step, outcome.read, _blamed(outcome)
    figures = {"gaveUpAfterSeconds": round(outcome.elapsed, 1)}
    limit = f"the run's {deadline_s:g} s deadline" if deadline_s is not None else "the run's deadline"

    def not_run(reason: str, failing: str | None) -> list[Skipped]:
        return [Skipped(check=n, reason=reason) for n in _missing(outcome) if n != failing]

    pending = read is not None and outcome.read_seconds >= nvml_call_seconds(spec, read, PENDING_AT_DEADLINE_S)
    if read is not None and (outcome.ending == "stuck" or (outcome.ending == "deadline" and pending)):
        check = step if step in GPU_CHECKS else "gpu-count"
        reason = f"{nvml_call(read)} did not answer within {outcome.read_seconds:.0f} s: the GPU or its driver has stopped answering"
        result = failed(check, "replace-machine", reason, {**figures, "callSeconds": round(outcome.read_seconds, 1)})
        return GaveUp([result], not_run(f"not run: {nvml_call(read)} is stuck", check), stuck=True)
    if outcome.ending == "deadline" and (step in GPU_CHECKS or step in NVML_STEPS):
        call = f"{nvml_call(read)}, {outcome.read_seconds:.1f} s into that call" if read else "between NVML calls"
        skipped = [Skipped(check=n, reason=f"not run: {limit} passed during {step}, NVML slow but answering")
                   for n in _missing(outcome)]  # fmt: skip
        note = f"{limit} passed during {step} while NVML was answering slowly ({call}); {len(skipped)} check(s) not run, nothing failed"
        return GaveUp([], skipped, note)
    if blamed is None:
        return GaveUp(note=f"the checks' process ended during {step}, after every check: {_why(outcome)}")
    if outcome.ending == "deadline":
        reason = f"did not finish within {limit}" if step == blamed else f"not reached within {limit} ({step})"
        return GaveUp(
            [failed(blamed, "needs-person", reason, figures)], not_run(f"not run: the run gave up on {step}", blamed)
        )
    reason = f"the checks' process ended during {step}: {_why(outcome)}"
    return GaveUp(
        [failed(blamed, "needs-person", reason, figures)],
        not_run(f"not run: the checks' process ended during {step}", blamed),
    )


def _why(outcome: Outcome) -> str:
    return outcome.error or "it ended without saying why (killed?)"


def merge(
    results: list[CheckResult], more: list[CheckResult], skipped: list[Skipped]
) -> tuple[list[CheckResult], list[Skipped]]:
    """One result per check (a later one replaces an earlier: a passed ``gpu-count`` by NVML stuck at its
    close), and the checks not run that have no result, each once."""
    merged: dict[str, CheckResult] = {}
    for result in [*results, *more]:
        merged[result.check] = result
    seen = set(merged)
    kept: list[Skipped] = []
    for entry in skipped:
        if entry.check not in seen:
            seen.add(entry.check)
            kept.append(entry)
    return list(merged.values()), kept


def still_stuck_result(stuck: StuckCall) -> CheckResult:
    """``gpu-count``'s failure while an earlier run's NVML call is still stuck (no new call is made)."""
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stuck.since))
    return failed(
        "gpu-count",
        "replace-machine",
        f"NVML stuck since {since}: an earlier run's call has not returned (pid {stuck.pid}): {stuck.what}",
        {"stuckPid": stuck.pid},
    )
