"""A config change rolls the controller pods one at a time, each Ready before the next: the probes that
gate each step are short, so a planned roll takes about as long as slurmctld's own start."""

from __future__ import annotations

import re

import pytest

from slonk_infra.kube import controller
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.slurm.scripts import render_scripts
from tests.kube_support import container, files_for, plan_for


@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_roll_steps_are_probed_every_few_seconds_with_five_minutes_to_start(stack: str) -> None:
    plan = plan_for(stack)
    sts = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
    ctl = container(sts["spec"]["template"]["spec"], "slurmctld")
    startup, ready = ctl["startupProbe"], ctl["readinessProbe"]
    assert startup["periodSeconds"] <= 1 and ready["periodSeconds"] <= 2
    assert startup["periodSeconds"] * startup["failureThreshold"] == 300
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}


def test_first_start_wait_for_slurmdbd_ends_inside_the_startup_probe() -> None:
    """slurmctld.sh's wait for slurmdbd runs before slurmctld answers, so under the startup probe: it must end
    (and leave slurmctld a minute to start) before the probe's budget, or kubelet restarts it mid-wait."""
    plan = plan_for("local")
    script = render_scripts(plan)["slurmctld.sh"]
    found = re.search(r"deadline=\$\(\(\$\(date \+%s\) \+ (\d+)\)\)", script)
    assert found, "slurmctld.sh's wait for slurmdbd has no deadline"
    wait = int(found.group(1))
    ctl = container(
        controller.statefulsets(plan, files_for(plan), KubeInputs())[0]["spec"]["template"]["spec"], "slurmctld"
    )
    budget = ctl["startupProbe"]["periodSeconds"] * ctl["startupProbe"]["failureThreshold"]
    assert wait + 10 + 20 + 60 <= budget  # one more sleep and sacctmgr (its 20-s timeout), a minute to start
