"""Scripts the Slurm pods run, shipped as ``.sh`` files beside this module: entrypoints, prolog, epilog,
health check, preStop drain.

They are the only glue between Kubernetes and Slurm. The node lifecycle they implement:

* Every worker's Slurm node record exists in slurm.conf from the start, in state FUTURE (hidden,
  never contacted). When the worker pod starts, its slurmd registers and Slurm moves the node to
  IDLE by itself: scaling up is a replica count change and nothing else.
* The preStop hook drains the node, waits for its jobs up to the grace period, requeues what is
  left and returns the node to FUTURE, so a scaled-down pool leaves no DOWN records behind.

What differs between pods comes in through environment variables the manifests set. The few fixed
settings the scripts share with slurm.conf and the manifests are written ``@NAME@`` in the files and
filled in from :data:`SETTINGS`, so they have one source.
"""

from __future__ import annotations

import re
from importlib import resources

from slonk_infra import vocab
from slonk_infra.catalog.slurm_versions import HEALTH_CHECK_TIMEOUT_S
from slonk_infra.health.budget import checks_deadline_seconds
from slonk_infra.plan import ClusterPlan, naming

# Installed at vocab.SCRIPTS_DIR in every Slurm pod, in this order in the scripts ConfigMap.
SCRIPTS = (
    "prolog.sh",
    "epilog.sh",
    "task-env.sh",
    "healthcheck.sh",
    "munged.sh",
    "slurmctld.sh",
    "push-config.sh",
    "state.sh",
    "slurmd.sh",
    "rejoin.sh",
    "drain.sh",
    "login.sh",
    "nfs-server.sh",
)
# Files beside the scripts that healthcheck.sh reads.
HEALTH_SPEC = vocab.HEALTH_SPEC_FILE
HEALTH_GROUPS = vocab.HEALTH_GROUPS_FILE
SETTINGS: dict[str, str] = {
    "CONF_DIR": vocab.CONF_DIR,
    "SLURMCTLD_PORT": str(vocab.SLURMCTLD_PORT),
    "TASK_ENV_FILE": vocab.TASK_ENV_FILE,
    "GPU_DRIVER_DIR": vocab.GPU_DRIVER_DIR,
    "USERS_DIR": vocab.USERS_DIR,
    "LOGIN_HOST_KEY": vocab.LOGIN_HOST_KEY,
    "SLURM_UID": str(vocab.SLURM_UID),
    "STATE_DIR": vocab.STATE_DIR,
    "SELF_CONF": vocab.SELF_CONF,
    "PINNED_CONF_DIR": vocab.PINNED_CONF_DIR,
    # The primary controller's host name (slurm.conf's first SlurmctldHost): what it alone does at start.
    "PRIMARY_CONTROLLER": naming.controller_pod(0),
    # When slonk-health gives up on a check that never returns: what slurmd's limit on HealthCheckProgram
    # leaves once the run has started and its scontrol calls have had their time.
    "HEALTH_DEADLINE_S": str(checks_deadline_seconds(HEALTH_CHECK_TIMEOUT_S)),
    "HEALTH_STATE_DIR": vocab.HEALTH_STATE_DIR,
}
PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


def source(name: str) -> str:
    """A script as shipped, placeholders included."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def fill(name: str, text: str, settings: dict[str, str]) -> str:
    """``text`` with every ``@NAME@`` replaced from ``settings``; an unknown name is an error."""

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in settings:
            raise KeyError(f"{name}: no setting for placeholder @{key}@; known: {', '.join(sorted(settings))}")
        return settings[key]

    return PLACEHOLDER.sub(value, text)


def render_scripts(plan: ClusterPlan) -> dict[str, str]:
    """Script name -> text (installed at /opt/slonk/scripts in every Slurm pod)."""
    scripts = {name: fill(name, source(name), SETTINGS) for name in SCRIPTS}
    # The health check's settings, read by healthcheck.sh: what slurmd runs gets no pod environment.
    scripts[HEALTH_SPEC] = plan.declaration.health.model_dump_json(by_alias=True, indent=1) + "\n"
    scripts[HEALTH_GROUPS] = health_groups(plan)
    return scripts


def health_groups(plan: ClusterPlan) -> str:
    """``<group> <gpus> <tpu chips>`` per worker group: what slonk-health expects on each node."""
    lines = [
        f"{g.name} {g.gres_count if g.kind == 'gpu' else 0} {g.gres_count if g.kind == 'tpu' else 0}"
        for g in plan.groups
    ]
    return "\n".join(lines) + "\n"
