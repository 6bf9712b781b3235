"""What a run reports when its checks' child did not finish: NVML stuck, a deadline, a child gone."""

from __future__ import annotations

from slonk_infra.health.config import HealthSpec
from slonk_infra.health.giveup import NVML_CALL_S, gave_up, merge, nvml_call_seconds, still_stuck_result
from slonk_infra.health.isolate import Outcome
from slonk_infra.health.result import Skipped, failed, passed
from slonk_infra.health.state import StuckCall

NAMES = ["gpu-count", "gpu-ecc", "gpu-remapped-rows", "disk-home"]
SPEC = HealthSpec()


def _outcome(**kwargs: object) -> Outcome:
    out = Outcome(names=list(NAMES), skipped=[], results=[passed("gpu-count", "8 of 8", {})], elapsed=15.2)
    for key, value in kwargs.items():
        setattr(out, key, value)
    return out


def test_a_stuck_read_fails_its_check_for_a_new_machine_naming_gpu_and_value() -> None:
    out = _outcome(ending="stuck", step="gpu-ecc", read=(3, "eccErrors.uncorrected.volatile"), read_seconds=15.04)
    given = gave_up(out, 28, SPEC)
    [result] = given.results
    assert (result.check, result.action, given.note, given.stuck) == ("gpu-ecc", "replace-machine", None, True)
    assert result.reason == (
        "GPU 3: NVML eccErrors.uncorrected.volatile did not answer within 15 s: "
        "the GPU or its driver has stopped answering"
    )
    assert result.figures == {"gaveUpAfterSeconds": 15.2, "callSeconds": 15.0}
    assert {s.check: s.reason for s in given.not_run} == {
        "gpu-remapped-rows": "not run: GPU 3: NVML eccErrors.uncorrected.volatile is stuck",
        "disk-home": "not run: GPU 3: NVML eccErrors.uncorrected.volatile is stuck",
    }


def test_nvml_s_own_steps_are_gpu_count_s_and_replace_its_pass() -> None:
    opening = gave_up(
        _outcome(ending="stuck", step="nvml-open", read=(None, "init"), read_seconds=15, results=[]), None, SPEC
    )
    assert (opening.results[0].check, opening.results[0].action) == ("gpu-count", "replace-machine")
    assert opening.results[0].reason.startswith("NVML initialisation did not answer within 15 s")
    done = [passed(n, "", {}) for n in NAMES]
    closing = _outcome(ending="stuck", step="nvml-close", read=(None, "shutdown"), read_seconds=15, results=done)
    given = gave_up(closing, 28, SPEC)
    results, skipped = merge(closing.results, given.results, given.not_run)
    assert [(r.check, r.ok) for r in results] == [("gpu-count", False), *((n, True) for n in NAMES[1:])]
    assert results[0].reason.startswith("NVML shutdown did not answer") and skipped == []


def test_at_the_deadline_a_call_pending_for_seconds_is_stuck_one_just_begun_is_slow() -> None:
    late = gave_up(_outcome(ending="deadline", step="gpu-ecc", read=(6, "uuid"), read_seconds=6.0), 28, SPEC)
    assert late.stuck and late.results[0].action == "replace-machine"
    slow = gave_up(_outcome(ending="deadline", step="gpu-ecc", read=(6, "uuid"), read_seconds=2.5), 28, SPEC)
    assert (slow.results, slow.stuck) == ([], False)
    why = "not run: the run's 28 s deadline passed during gpu-ecc, NVML slow but answering"
    assert {s.check: s.reason for s in slow.not_run} == {n: why for n in NAMES[1:]}
    assert slow.note is not None and "GPU 6: NVML uuid, 2.5 s into that call" in slow.note and "3 check(s)" in slow.note


def test_another_step_past_the_deadline_needs_a_person() -> None:
    out = _outcome(ending="deadline", step="disk-home", results=[passed(n, "", {}) for n in NAMES[:3]])
    [result] = gave_up(out, 28, SPEC).results
    assert (result.check, result.action, result.reason) == (
        "disk-home",
        "needs-person",
        "did not finish within the run's 28 s deadline",
    )


def test_a_child_gone_is_blamed_on_the_check_it_owed() -> None:
    [result] = gave_up(_outcome(ending="ended", step="gpu-ecc", error="MemoryError: "), 28, SPEC).results
    assert (result.check, result.action) == ("gpu-ecc", "needs-person")
    assert result.reason == "the checks' process ended during gpu-ecc: MemoryError: "
    # Gone before its first word, or between two checks: the first check without a result answers for it.
    [first] = gave_up(_outcome(ending="ended", step="start", results=[]), 28, SPEC).results
    assert first.check == "gpu-count"
    between = _outcome(ending="ended", step="gpu-ecc", results=[passed(n, "", {}) for n in NAMES[:2]])
    assert gave_up(between, 28, SPEC).results[0].check == "gpu-remapped-rows"
    after = gave_up(_outcome(ending="ended", step="nvml-close", results=[passed(n, "", {}) for n in NAMES]), 28, SPEC)
    assert after.results == [] and after.note == (
        "the checks' process ended during nvml-close, after every check: it ended without saying why (killed?)"
    )


def test_merge_keeps_one_entry_per_check() -> None:
    results, skipped = merge(
        [passed("gpu-count", "", {})],
        [failed("gpu-count", "replace-machine", "stuck", {})],
        [
            Skipped(check="gpu-count", reason="x"),
            Skipped(check="gpu-ecc", reason="a"),
            Skipped(check="gpu-ecc", reason="b"),
        ],
    )
    assert [(r.check, r.action) for r in results] == [("gpu-count", "replace-machine")]
    assert skipped == [Skipped(check="gpu-ecc", reason="a")]


def test_still_stuck_names_the_earlier_call_and_when() -> None:
    result = still_stuck_result(StuckCall(4242, 1795000000.0, "GPU 1: NVML eccErrors did not answer within 15 s"))
    assert (result.check, result.action) == ("gpu-count", "replace-machine")
    assert result.reason == (
        "NVML stuck since 2026-11-18T11:06:40Z: an earlier run's call has not returned (pid 4242): "
        "GPU 1: NVML eccErrors did not answer within 15 s"
    )


def test_listening_for_xid_events_gets_its_wait_on_top() -> None:
    spec = HealthSpec.model_validate({"gpu": {"xidWaitMs": 4000}})
    assert nvml_call_seconds(spec, (None, "events")) == NVML_CALL_S + 4
    assert nvml_call_seconds(spec, (0, "uuid"), 2) == 2
