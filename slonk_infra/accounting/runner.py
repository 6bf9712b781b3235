"""The reconciler process: reads the desired state, reads what slurmdbd holds, runs the ``sacctmgr -i``
commands between them, reports drift and held deletions, and (with an interval) does it again.

It runs beside slurmdbd (a pod in the cluster image) as the SlurmUser or root: slurmdbd lets both change
anything whatever their user record says (``_validate_super_user`` in Slurm's src/slurmdbd/proc_req.c); any
other user needs ``AdminLevel=Operator`` (https://slurm.schedmd.com/user_permissions.html) or is refused
"Access/permission denied" (checked on 22.05). ``sacctmgr`` and ``squeue`` find slurmdbd and slurmctld
through slurm.conf (``$SLURM_CONF``) and authenticate through munge.

Every run starts from the file: a mounted ConfigMap that changes in place is applied on the next run, no
restart. A run never stops at a failing command: it logs the command, its exit status and output and goes
on; what still differs is planned again next run. While slurmdbd does not answer the listings, a run
applies nothing and says it waits for slurmdbd.

Exit status (``--once``): 0 every command succeeded (drift and held deletions are reported, not errors);
1 a command failed; 2 the desired-state file cannot be read; 3 slurmdbd did not answer within ``--wait``.
With ``--interval`` the loop runs until SIGTERM or SIGINT, then exits 0.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slonk_infra.accounting.reconcile import Command, Reconciliation, reconcile
from slonk_infra.accounting.records import RecordError, State
from slonk_infra.accounting.sacctmgr import RUNNING_JOBS, parse_running, read_state, show_commands
from slonk_infra.accounting.wire import WireError, load_state

log = logging.getLogger("slonk_infra.accounting")

EXIT_OK = 0
EXIT_COMMAND_FAILED = 1
EXIT_BAD_DESIRED = 2
EXIT_NO_SLURMDBD = 3

DEFAULT_COMMAND_TIMEOUT = 60.0
"""Seconds one sacctmgr or squeue command may take; slurmdbd answers listings in well under a second."""


@dataclass(frozen=True)
class Result:
    """What one command printed."""

    argv: tuple[str, ...]
    returncode: int
    output: str
    """stdout then stderr, stripped."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


Runner = Callable[[Sequence[str], float], Result]
"""Runs an argv with a timeout in seconds; a timeout is a :class:`Result` with returncode 124."""


def run_command(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> Result:
    """Runs ``argv`` without a shell; a timeout or a missing program is a failed :class:`Result`."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return Result(tuple(argv), 124, f"timed out after {timeout:g}s")
    except OSError as e:
        return Result(tuple(argv), 127, f"cannot run {argv[0]}: {e}")
    return Result(tuple(argv), proc.returncode, (proc.stdout.strip() + "\n" + proc.stderr.strip()).strip())


@dataclass
class Outcome:
    """What one pass did."""

    status: str
    """``applied`` (every command ran), ``failed`` (some did not), ``unreadable`` (the desired file),
    ``waiting`` (slurmdbd did not answer)."""
    plan: Reconciliation | None = None
    failed: list[Result] = field(default_factory=list)
    detail: str = ""

    @property
    def exit_code(self) -> int:
        return {
            "applied": EXIT_OK,
            "failed": EXIT_COMMAND_FAILED,
            "unreadable": EXIT_BAD_DESIRED,
            "waiting": EXIT_NO_SLURMDBD,
        }[self.status]


def read_desired(path: Path) -> State:
    """The desired state in ``path`` (the ConfigMap key ``desired.json``)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise WireError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        return load_state(text)
    except WireError as e:
        raise WireError(f"{path}: {e}") from None


def read_current(cluster: str, run: Runner, timeout: float) -> State | str:
    """What slurmdbd holds, or why it could not be read (the first failing listing and its output)."""
    outputs: dict[str, str] = {}
    for name, argv in show_commands(cluster).items():
        res = run(argv, timeout)
        if not res.ok:
            return f"{' '.join(argv)} exited {res.returncode}: {res.output or '(no output)'}"
        outputs[name] = res.output
    try:
        return read_state(cluster, outputs)
    except RecordError as e:
        return f"sacctmgr printed what this reconciler cannot read: {e}"


def one_pass(path: Path, run: Runner, *, prune: bool, timeout: float = DEFAULT_COMMAND_TIMEOUT) -> Outcome:
    """Reads ``path`` and slurmdbd, logs the plan, runs it, logs drift, held deletions and failures."""
    try:
        desired = read_desired(path)
    except WireError as e:
        log.error("desired state unreadable, nothing applied: %s", e)
        return Outcome("unreadable", detail=str(e))
    current = read_current(desired.cluster, run, timeout)
    if isinstance(current, str):
        log.warning("waiting for slurmdbd: %s", current)
        return Outcome("waiting", detail=current)
    running: set[tuple[str, str]] = set()
    do_prune = prune
    if prune:
        jobs = run(RUNNING_JOBS, timeout)
        try:
            if not jobs.ok:
                raise RecordError(f"exited {jobs.returncode}: {jobs.output or '(no output)'}")
            running = parse_running(jobs.output)
        except RecordError as e:
            # Without the running jobs no deletion is known to be safe: this pass deletes nothing.
            log.warning("squeue failed, so this pass deletes nothing (running jobs unknown): %s", e)
            do_prune = False
    plan = reconcile(desired, current, running, prune=do_prune)
    if plan.commands:
        log.info("plan for cluster %s: %d command(s)", desired.cluster, len(plan.commands))
        for n, cmd in enumerate(plan.commands, 1):
            log.info("  %d. %s    # %s", n, cmd, cmd.reason)
    else:
        log.info("cluster %s: slurmdbd holds the declaration; nothing to do", desired.cluster)
    failed = [r for r in (_apply(n, cmd, run, timeout) for n, cmd in enumerate(plan.commands, 1)) if r is not None]
    for line in plan.drift:
        log.warning("drift: %s%s", line, "" if prune else " (kept; --prune deletes it)")
    for line in plan.held:
        log.warning("held: %s", line)
    if failed:
        log.error("%d of %d command(s) failed; they are planned again next run", len(failed), len(plan.commands))
        return Outcome("failed", plan, failed)
    if plan.commands:
        log.info("applied %d command(s)", len(plan.commands))
    return Outcome("applied", plan)


def _apply(n: int, cmd: Command, run: Runner, timeout: float) -> Result | None:
    res = run(cmd.argv, timeout)
    if res.ok:
        log.info("  %d. ok: %s", n, res.output.replace("\n", " | ") or "(no output)")
        return None
    log.error("  %d. FAILED (exit %d): %s: %s", n, res.returncode, cmd, res.output.replace("\n", " | "))
    return res


def wait_for_slurmdbd(
    path: Path, run: Runner, *, wait: float, timeout: float, sleep: Callable[[float], object]
) -> bool:
    """Whether slurmdbd answered the listings within ``wait`` seconds (logged each try)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            cluster = read_desired(path).cluster
        except WireError:
            return True  # the pass itself reports the file
        current = read_current(cluster, run, timeout)
        if not isinstance(current, str):
            return True
        if time.monotonic() >= deadline:
            log.error("slurmdbd did not answer within %gs: %s", wait, current)
            return False
        log.warning("waiting for slurmdbd: %s", current)
        sleep(min(5.0, max(0.0, deadline - time.monotonic())))


__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "EXIT_BAD_DESIRED",
    "EXIT_COMMAND_FAILED",
    "EXIT_NO_SLURMDBD",
    "EXIT_OK",
    "Outcome",
    "Result",
    "Runner",
    "one_pass",
    "read_current",
    "read_desired",
    "run_command",
    "wait_for_slurmdbd",
]
