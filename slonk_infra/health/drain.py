"""Draining the Slurm node from a failing health check, without overwriting someone else's drain.

Slurm ignores HealthCheckProgram's exit code: the program must drain its node itself. The reason
starts with :data:`DRAIN_REASON_PREFIX`, so other code (the state-sync controller) can tell drains set
by health checks from drains set by people, and resume only its own.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence

from slonk_infra.health.budget import SCONTROL_TIMEOUT_S
from slonk_infra.health.result import DrainOutcome

DRAIN_REASON_PREFIX = "slonk-health:"
MAX_REASON = 200  # sinfo -R shows reasons on one line; long NVML messages are cut

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def drain_reason(check: str, reason: str) -> str:
    """``slonk-health: <check>: <reason>``, cut to MAX_REASON characters."""
    text = f"{DRAIN_REASON_PREFIX} {check}: {reason}".replace("\n", " ")
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False)


def current_drain(node: str, scontrol: str, run: Runner) -> tuple[bool, str | None]:
    """(whether ``node`` is drained or draining, its reason without the ``[user@time]`` suffix)."""
    shown = run([scontrol, "show", "node", node])
    if shown.returncode != 0:
        raise RuntimeError(f"scontrol show node {node} failed: {(shown.stderr or shown.stdout).strip()}")
    state = re.search(r"\bState=(\S+)", shown.stdout)
    reason = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*\])?\s*$", shown.stdout, re.MULTILINE)
    drained = state is not None and "DRAIN" in state.group(1).upper()
    return drained, reason.group(1) if reason else None


def drain(node: str, reason: str, scontrol: str = "scontrol", run: Runner = _run) -> DrainOutcome:
    """Drain ``node`` with ``reason`` unless it is already drained for a reason that is not ours."""
    outcome = DrainOutcome(requested=True, node=node, reason=reason)
    try:
        drained, existing = current_drain(node, scontrol, run)
        if drained and existing and not existing.startswith(DRAIN_REASON_PREFIX):
            return outcome.model_copy(update={"note": f"already drained by someone else: {existing}"})
        done = run([scontrol, "update", f"nodename={node}", "state=drain", f"reason={reason}"])
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        return outcome.model_copy(update={"note": str(exc)})
    if done.returncode != 0:
        return outcome.model_copy(update={"note": f"scontrol update failed: {(done.stderr or done.stdout).strip()}"})
    return outcome.model_copy(update={"done": True})
