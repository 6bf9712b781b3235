"""Suite-wide rules: under CI=true a skipped test fails the run (a missing tool must never pass silently)."""

from __future__ import annotations

import os

import pytest

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI") == "true" and _skipped:
        print(f"\nCI=true: {len(_skipped)} skipped test(s) count as failures: {', '.join(_skipped[:10])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
