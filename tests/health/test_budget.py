"""The longest an interval health-check run may take, from its settings."""

from __future__ import annotations

import subprocess

import pytest

from slonk_infra.catalog.slurm_versions import HEALTH_CHECK_TIMEOUT_S
from slonk_infra.health import drain, publish
from slonk_infra.health.budget import (
    SCONTROL_TIMEOUT_S,
    checks_deadline_seconds,
    checks_seconds,
    interval_run_seconds,
    what_it_is_made_of,
)
from slonk_infra.health.config import HealthSpec


def test_the_default_run_fits_the_60_seconds_slurmd_gives_it() -> None:
    assert interval_run_seconds(HealthSpec()) == 50  # 2 + 5 + 1 + 2 * (5 + 1) + 3 * 10


def test_each_setting_that_lengthens_a_run_counts_and_is_named() -> None:
    slow = HealthSpec.model_validate({"gpu": {"xidWaitMs": 30000}, "disk": {"timeoutSeconds": 60}})
    assert interval_run_seconds(slow) == 2 + 5 + 30 + 2 * 61 + 30
    no_probes = HealthSpec.model_validate({"disk": {"scratchPath": None, "homePath": None}})
    assert interval_run_seconds(no_probes) == 38
    text = what_it_is_made_of(slow)
    assert "health.gpu.xidWaitMs 30000 ms" in text and "health.disk.timeoutSeconds 60 s" in text


def test_the_deadline_leaves_the_scontrol_calls_their_time_and_is_the_declaration_s_bound() -> None:
    deadline = checks_deadline_seconds(HEALTH_CHECK_TIMEOUT_S)
    assert deadline == 60 - 2 - 3 * SCONTROL_TIMEOUT_S == 28
    # The declaration check (interval_run_seconds <= 60) and the deadline are one bound: the slowest
    # settings it accepts give checks that end exactly at the deadline, one millisecond more is refused.
    edge = HealthSpec.model_validate({"gpu": {"xidWaitMs": 11000}, "disk": {"timeoutSeconds": 5}})
    assert checks_seconds(edge) == deadline and interval_run_seconds(edge) == HEALTH_CHECK_TIMEOUT_S
    over = HealthSpec.model_validate({"gpu": {"xidWaitMs": 11001}, "disk": {"timeoutSeconds": 5}})
    assert checks_seconds(over) > deadline and interval_run_seconds(over) > HEALTH_CHECK_TIMEOUT_S


def test_the_scontrol_calls_are_bounded_by_the_budget_s_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    def run(argv: list[str], **kwargs: object) -> object:
        seen.append(kwargs["timeout"])
        raise OSError("no scontrol here")

    monkeypatch.setattr(subprocess, "run", run)
    drain.drain("n-0", "slonk-health: x: y")
    publish.publish("n-0", "{}")
    assert seen == [SCONTROL_TIMEOUT_S, SCONTROL_TIMEOUT_S]


def test_a_limit_that_leaves_the_checks_no_time_is_refused() -> None:
    with pytest.raises(ValueError, match="a 35 s limit leaves the checks 3 s"):
        checks_deadline_seconds(35)
