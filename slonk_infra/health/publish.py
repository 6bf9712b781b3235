"""Publishing a run's verdict where the operations controller reads it: the Slurm node's Comment.

The controller (:mod:`slonk_infra.ops`) lists every node in one slurmrestd call per tick, so a verdict
in the node's Comment reaches it with no Kubernetes access from the node and no extra API call. The
text is a compact form of :class:`~slonk_infra.health.result.HealthReport`: the failing results only,
each reason cut short, and the time of the run, so a verdict about an earlier pod is told apart.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence

from slonk_infra.health.budget import SCONTROL_TIMEOUT_S
from slonk_infra.health.result import HealthReport

# Slurm keeps a node comment whole, but sinfo/scontrol users read it; keep it to one short line.
MAX_REASON = 160
MAX_RESULTS = 8

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def compact_verdict(report: HealthReport, now: float | None = None) -> str:
    """One-line JSON verdict (schema slonk-health/v1) with the failing checks, the identity and the time."""
    failing = [r for r in report.results if not r.ok][:MAX_RESULTS]
    data = {
        "schema": "slonk-health/v1",
        "node": report.node,
        "ok": report.ok,
        "action": report.action,
        "fingerprint": {"kind": report.fingerprint.kind, "value": report.fingerprint.value},
        "results": [
            {"check": r.check, "ok": r.ok, "action": r.action, "reason": r.reason[:MAX_REASON]} for r in failing
        ],
        "time": int(now if now is not None else time.time()),
    }
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False)


def publish(node: str, verdict: str, scontrol: str = "scontrol", run: Runner = _run) -> str | None:
    """Set ``node``'s Comment to ``verdict``; returns why it failed, or None."""
    try:
        done = run([scontrol, "update", f"nodename={node}", f"comment={verdict}"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return f"scontrol update failed: {(done.stderr or done.stdout).strip()}"
    return None
