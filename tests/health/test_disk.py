"""Scratch space and home reachability, probed in a child process that a hung filesystem cannot hang."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.health.checks import disk
from slonk_infra.health.config import HealthSpec
from slonk_infra.health.context import CheckContext
from slonk_infra.health.runner import run_check


def context(**values: Any) -> CheckContext:
    return CheckContext(spec=HealthSpec.model_validate({"disk": values}), mode="boot")


def test_scratch_with_room_passes_and_reports_figures(tmp_path: Path) -> None:
    result = run_check("disk-scratch", context(scratchPath=str(tmp_path), minFreeGiB=0, minFreePercent=0))
    assert result.ok, result
    assert result.figures["totalGiB"] > 0 and 0 <= result.figures["freePercent"] <= 100


@pytest.mark.parametrize("limit", [{"minFreeGiB": 1e9}, {"minFreePercent": 100}])
def test_scratch_short_of_space(tmp_path: Path, limit: dict[str, float]) -> None:
    result = run_check("disk-scratch", context(scratchPath=str(tmp_path), **limit))
    assert (result.ok, result.action) == (False, "restart-pod") and "free, below" in result.reason


def test_missing_scratch(tmp_path: Path) -> None:
    result = run_check("disk-scratch", context(scratchPath=str(tmp_path / "absent")))
    assert (result.ok, result.action) == (False, "restart-pod") and "No such file" in result.reason


def test_home_must_be_a_mount(tmp_path: Path) -> None:
    plain = run_check("disk-home", context(homePath=str(tmp_path)))
    assert (plain.ok, plain.action) == (False, "restart-pod") and "not a mounted filesystem" in plain.reason
    assert run_check("disk-home", context(homePath=str(tmp_path), homeMustBeMount=False)).ok
    assert run_check("disk-home", context(homePath="/")).ok  # the root is always a mount point


def test_missing_home(tmp_path: Path) -> None:
    result = run_check("disk-home", context(homePath=str(tmp_path / "absent")))
    assert (result.ok, result.action) == (False, "restart-pod")


def test_a_hung_filesystem_is_reported_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # A probe that never answers stands in for statvfs blocked on an unreachable NFS server.
    monkeypatch.setattr(disk, "PROBE_COMMAND", [sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.monotonic()
    home = run_check("disk-home", context(homePath="/", timeoutSeconds=0.5))
    scratch = run_check("disk-scratch", context(scratchPath="/", timeoutSeconds=0.5))
    assert time.monotonic() - started < 5
    assert (home.ok, home.action) == (False, "needs-person") and "did not answer in 0.5 s" in home.reason
    assert (scratch.ok, scratch.action) == (False, "needs-person")


def test_a_probe_that_dies_is_an_error_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk, "PROBE_COMMAND", [sys.executable, "-c", "raise SystemExit(3)"])
    result = run_check("disk-home", context(homePath="/"))
    assert (result.ok, result.action) == (False, "restart-pod") and "exited 3" in result.reason
