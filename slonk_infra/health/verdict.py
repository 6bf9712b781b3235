"""From results to one verdict: the worst action, the exit code, the drain reason, the lines for people."""

from __future__ import annotations

from slonk_infra.health.drain import drain_reason
from slonk_infra.health.result import EXIT_CODES, Action, CheckResult, HealthReport, severity, worst


def overall(results: list[CheckResult]) -> tuple[bool, Action, int]:
    """(all ok, worst action, exit code)."""
    action = worst([r.action for r in results])
    return all(r.ok for r in results), action, EXIT_CODES[action]


def reason_for_drain(results: list[CheckResult]) -> str | None:
    """The drain reason: the first result with the worst action, or None when nothing needs one."""
    action = worst([r.action for r in results])
    if action == "none":
        return None
    first = next(r for r in results if severity(r.action) == severity(action))
    return drain_reason(first.check, first.reason)


def human_lines(report: HealthReport) -> list[str]:
    """One line per failing check (for stderr and slurmd's log)."""
    lines = [f"slonk-health {report.mode}: {r.check}: {r.action}: {r.reason}" for r in report.results if not r.ok]
    if report.error:
        lines.append(f"slonk-health {report.mode}: {report.error}")
    if report.drain and report.drain.requested and not report.drain.done and report.drain.note:
        lines.append(f"slonk-health {report.mode}: node {report.drain.node} not drained: {report.drain.note}")
    return lines
