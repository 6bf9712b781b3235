"""A config change rolls the controller pods one at a time, each Ready before the next: the probes that
gate each step are short, so a planned roll takes about as long as slurmctld's own start."""

from __future__ import annotations

import pytest

from slonk_infra.kube import controller
from slonk_infra.kube.inputs import KubeInputs
from tests.kube_support import container, files_for, plan_for


@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_roll_steps_are_probed_every_few_seconds_with_five_minutes_to_start(stack: str) -> None:
    plan = plan_for(stack)
    sts = controller.statefulset(plan, files_for(plan), KubeInputs())
    ctl = container(sts["spec"]["template"]["spec"], "slurmctld")
    startup, ready = ctl["startupProbe"], ctl["readinessProbe"]
    assert startup["periodSeconds"] <= 1 and ready["periodSeconds"] <= 2
    assert startup["periodSeconds"] * startup["failureThreshold"] == 300
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
