"""The longest an interval health-check run may take, from its settings."""

from __future__ import annotations

import subprocess

import pytest

from slonk_infra.health import drain, publish
from slonk_infra.health.budget import SCONTROL_TIMEOUT_S, interval_run_seconds, what_it_is_made_of
from slonk_infra.health.config import HealthSpec


def test_the_default_run_fits_the_60_seconds_slurmd_gives_it() -> None:
    assert interval_run_seconds(HealthSpec()) == 48  # 5 + 1 + 2 * (5 + 1) + 3 * 10


def test_each_setting_that_lengthens_a_run_counts_and_is_named() -> None:
    slow = HealthSpec.model_validate({"gpu": {"xidWaitMs": 30000}, "disk": {"timeoutSeconds": 60}})
    assert interval_run_seconds(slow) == 5 + 30 + 2 * 61 + 30
    no_probes = HealthSpec.model_validate({"disk": {"scratchPath": None, "homePath": None}})
    assert interval_run_seconds(no_probes) == 36
    text = what_it_is_made_of(slow)
    assert "health.gpu.xidWaitMs 30000 ms" in text and "health.disk.timeoutSeconds 60 s" in text


def test_the_scontrol_calls_are_bounded_by_the_budget_s_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    def run(argv: list[str], **kwargs: object) -> object:
        seen.append(kwargs["timeout"])
        raise OSError("no scontrol here")

    monkeypatch.setattr(subprocess, "run", run)
    drain.drain("n-0", "slonk-health: x: y")
    publish.publish("n-0", "{}")
    assert seen == [SCONTROL_TIMEOUT_S, SCONTROL_TIMEOUT_S]
