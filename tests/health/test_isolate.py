"""The checks' child process: it reports as it goes, and a call that never returns holds only the child."""

from __future__ import annotations

import os
import time

import pytest

from slonk_infra.health.isolate import Sink, run_isolated
from slonk_infra.health.result import Fingerprint, Skipped, passed

NEVER = 3600.0


def _gone(pid: int, within: float = 10.0) -> bool:
    """The child has exited (reaped here if run_isolated had not yet), waiting up to ``within``."""
    deadline = time.monotonic() + within
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True  # reaped already
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_a_child_that_finishes_tells_everything() -> None:
    def work(sink: Sink) -> None:
        sink.plan(["gpu-count"], [Skipped(check="gpu-idle", reason="interval")])
        sink.step("gpu-count")
        sink.read((None, "deviceCount"))
        sink.read(None)
        sink.result(passed("gpu-count", "8 of 8", {"found": 8}))
        sink.ident(Fingerprint(kind="machine-id", value="sha256:ab"))

    out = run_isolated(work, ["x"], [], deadline_s=30, stuck_after=lambda read: NEVER)
    assert out.ending == "done" and out.error is None
    assert (out.names, [s.check for s in out.skipped]) == (["gpu-count"], ["gpu-idle"])
    assert [r.check for r in out.results] == ["gpu-count"] and out.results[0].figures == {"found": 8}
    assert out.ident == Fingerprint(kind="machine-id", value="sha256:ab")
    assert out.read is None and _gone(out.pid)


def test_a_read_that_never_returns_is_stuck_and_the_child_is_killed() -> None:
    def work(sink: Sink) -> None:
        sink.step("gpu-ecc")
        sink.read((2, "eccErrors.uncorrected.volatile"))
        time.sleep(NEVER)

    began = time.monotonic()
    out = run_isolated(work, ["gpu-ecc"], [], deadline_s=None, stuck_after=lambda read: 0.3)
    assert out.ending == "stuck" and 0.3 <= out.read_seconds < 10 and time.monotonic() - began < 10
    assert (out.step, out.read) == ("gpu-ecc", (2, "eccErrors.uncorrected.volatile"))
    assert _gone(out.pid)


def test_reads_that_keep_answering_run_into_the_deadline_not_stuck() -> None:
    def work(sink: Sink) -> None:
        sink.step("gpu-count")
        for i in range(10_000):
            sink.read((i % 8, "uuid"))
            time.sleep(0.01)
            sink.read(None)

    out = run_isolated(work, ["gpu-count"], [], deadline_s=1.5, stuck_after=lambda read: 1.0)
    assert out.ending == "deadline" and out.step == "gpu-count" and 1.5 <= out.elapsed < 10
    assert _gone(out.pid)


def test_a_child_that_breaks_outside_a_check_says_why() -> None:
    def work(sink: Sink) -> None:
        sink.step("identity")
        raise OSError("no space left on device")

    out = run_isolated(work, [], [], deadline_s=30, stuck_after=lambda read: NEVER)
    assert (out.ending, out.step, out.error) == ("ended", "identity", "OSError: no space left on device")


def test_the_child_holds_none_of_the_callers_streams_and_leads_its_own_session(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # slurmd reads the program's output to its end: a stuck child holding it would hold slurmd.
    def work(sink: Sink) -> None:
        os.write(1, b"child stdout\n")
        os.write(2, b"child stderr\n")
        sink.step(
            f"sid {os.getsid(0)} pid {os.getpid()} fds {[os.readlink(f'/proc/self/fd/{fd}') for fd in (0, 1, 2)]}"
        )
        sink.ident(Fingerprint(kind="unknown", value=""))

    out = run_isolated(work, [], [], deadline_s=30, stuck_after=lambda read: NEVER)
    assert out.step == f"sid {out.pid} pid {out.pid} fds {[os.devnull] * 3}"
    assert capfd.readouterr() == ("", "")
