"""The checks run in a child process the run can abandon: a call stuck in the kernel holds only the child.

An NVML call can block for good when a GPU stops answering (a GSP firmware timeout, the driver stuck on
its own lock); ``nvidia-smi`` hangs the same way. The driver takes that lock uninterruptibly, so the
calling thread sits in the kernel (state D) where no signal reaches it, and a process with such a thread
is never reaped: if the checks ran in slurmd's own child, slurmd would wait on it for good (it reads the
program's output to its end, then waits for it), a prolog would hold its job for ever, and a run slurmd
stops after 60 s would drain nothing.

So :func:`run_isolated` forks a child in a session of its own, with no standard stream of the parent's,
that runs the checks and reports each step as it goes (events on a pipe, one JSON object a line). The
parent watches: an NVML call still unanswered after ``stuck_after`` seconds, or a run past its deadline,
ends the watch; the parent kills the child (which dies whenever the kernel lets it go), and judges from
what it was told. The child adds about a millisecond of fork to a run.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from slonk_infra.health.result import CheckResult, Fingerprint, Skipped

Read = tuple[int | None, str]
"""An NVML value being read: (GPU index or None for a system-wide value, its key)."""


class Sink:
    """The child's side: what it tells the parent, a line at a time (unbuffered, so nothing is lost)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def _send(self, event: dict[str, Any]) -> None:
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(self._fd, data) :]

    def step(self, name: str) -> None:
        """The child begins ``name`` (a check, or one of NVML's own steps)."""
        self._send({"step": name})

    def read(self, what: Read | None) -> None:
        """An NVML read begins (``what``) or has ended (None)."""
        self._send({"read": list(what) if what is not None else None})

    def plan(self, names: list[str], skipped: list[Skipped]) -> None:
        """The checks to run, planned again once NVML is open."""
        self._send({"plan": {"names": names, "skipped": [s.model_dump(by_alias=True) for s in skipped]}})

    def result(self, result: CheckResult) -> None:
        """A check's result."""
        self._send({"result": result.model_dump(by_alias=True)})

    def ident(self, fingerprint: Fingerprint) -> None:
        """The machine's fingerprint."""
        self._send({"ident": fingerprint.model_dump(by_alias=True)})

    def recording(self, data: dict[str, Any]) -> None:
        """Every NVML answer of the run (``--nvml-record``), which the parent writes."""
        self._send({"recording": data})

    def error(self, text: str) -> None:
        """Something outside any check broke; the child ends after this."""
        self._send({"error": text})

    def done(self) -> None:
        """Everything is said."""
        self._send({"done": True})


Ending = Literal["done", "stuck", "deadline", "ended"]


@dataclass
class Outcome:
    """What the parent learned, and how the watch ended: ``done`` (the child said all), ``stuck`` (an NVML
    read unanswered past its limit), ``deadline`` (the run's deadline passed first) or ``ended`` (the child
    went without saying done)."""

    names: list[str]
    skipped: list[Skipped]
    results: list[CheckResult] = field(default_factory=list)
    ident: Fingerprint | None = None
    step: str = "start"
    read: Read | None = None
    read_since: float = 0.0
    """When the read in progress began (the parent's clock)."""
    read_seconds: float = 0.0
    """How long the read in progress at the end had been waiting."""
    elapsed: float = 0.0
    error: str | None = None
    recording: dict[str, Any] | None = None
    ending: Ending = "done"
    pid: int = 0

    def take(self, event: dict[str, Any], now: float) -> None:
        """Apply one event, received at ``now``."""
        if "step" in event:
            self.step = str(event["step"])
        elif "read" in event:
            value = event["read"]
            self.read = (value[0], str(value[1])) if value is not None else None
            self.read_since = now
        elif "plan" in event:
            self.names = [str(n) for n in event["plan"]["names"]]
            self.skipped = [Skipped.model_validate(s) for s in event["plan"]["skipped"]]
        elif "result" in event:
            self.results.append(CheckResult.model_validate(event["result"]))
        elif "ident" in event:
            self.ident = Fingerprint.model_validate(event["ident"])
        elif "recording" in event:
            self.recording = dict(event["recording"])
        elif "error" in event:
            self.error = str(event["error"])


def _child(work: Callable[[Sink], None], write_fd: int, read_fd: int) -> None:
    """The child: its own session, no stream of slurmd's, the work, then out (never back into the caller)."""
    try:
        os.close(read_fd)
        os.setsid()
        if write_fd <= 2:  # started with a standard stream closed: keep the pipe clear of the dup2s below
            write_fd = fcntl.fcntl(write_fd, fcntl.F_DUPFD, 3)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        sink = Sink(write_fd)
        try:
            work(sink)
            sink.done()
        except Exception as exc:  # a verdict must still come out; the parent names the step
            sink.error(f"{type(exc).__name__}: {exc}")
    finally:
        os._exit(0)


def run_isolated(
    work: Callable[[Sink], None],
    names: list[str],
    skipped: list[Skipped],
    *,
    deadline_s: float | None,
    stuck_after: Callable[[Read], float],
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Run ``work`` in a child and watch it (see the module docstring). ``names`` and ``skipped`` are the
    plan until the child plans again; ``stuck_after`` gives the seconds a read may take."""
    read_fd, write_fd = os.pipe()
    began = clock()
    pid = os.fork()
    if pid == 0:
        _child(work, write_fd, read_fd)
    os.close(write_fd)
    out = Outcome(names=list(names), skipped=list(skipped), pid=pid)
    try:
        _watch(out, read_fd, began, deadline_s, stuck_after, clock)
    except BaseException:
        _abandon(pid)  # a watch that broke (or was interrupted) leaves no child behind
        raise
    finally:
        os.close(read_fd)
    if out.ending in ("stuck", "deadline"):
        _abandon(pid)
    else:
        _reap(pid)
    return out


def _watch(
    out: Outcome,
    read_fd: int,
    began: float,
    deadline_s: float | None,
    stuck_after: Callable[[Read], float],
    clock: Callable[[], float],
) -> None:
    """Read the child's events into ``out`` until it has gone, an NVML read is stuck or the deadline passes."""
    pending = b""
    said_done = False
    while True:
        deadline_at = began + deadline_s if deadline_s is not None else None
        stuck_at = out.read_since + stuck_after(out.read) if out.read is not None else None
        wakes = [t for t in (deadline_at, stuck_at) if t is not None]
        timeout = max(0.0, min(wakes) - clock()) if wakes else None
        ready, _, _ = select.select([read_fd], [], [], timeout)
        now = clock()
        if not ready:
            if stuck_at is not None and now >= stuck_at:
                out.ending = "stuck"
            elif deadline_at is not None and now >= deadline_at:
                out.ending = "deadline"
            else:
                continue  # woke a little early: neither bound is reached yet
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:  # the child has gone: all said, or it broke (or was killed) on the way
            out.ending = "done" if said_done and out.error is None else "ended"
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            event = json.loads(line)
            said_done = said_done or bool(event.get("done"))
            out.take(event, now)
    out.elapsed = clock() - began
    if out.read is not None:
        out.read_seconds = clock() - out.read_since


def _abandon(pid: int) -> None:
    """Kill the child's session; it dies when the kernel lets it go, and nothing here waits for that."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # not yet its own session leader: the child alone
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
    _reap(pid, wait_s=0.2)


def _reap(pid: int, wait_s: float = 5.0) -> None:
    """Collect the child's exit, waiting at most ``wait_s`` (a child that cannot die is left to init)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.01)
