"""How long one interval run of the health check may take, from its settings: what Slurm must allow it.

slurmd stops a HealthCheckProgram run after 60 s (SIGTERM, then SIGKILL 10 ms later;
slonk_infra/catalog/slurm_versions.py), and a stopped run drains nothing: slonk-health drains and
publishes only once every check has answered. So the slowest run the settings allow must fit in it: the
XID listening window, each filesystem probe (its timeout plus the second the probe's child gets to exit)
and the ``scontrol`` calls that drain the node and publish the verdict, each bounded by
:data:`SCONTROL_TIMEOUT_S`.
"""

from __future__ import annotations

import math

from slonk_infra.health.config import HealthSpec

SCONTROL_TIMEOUT_S = 10
"""How long slonk-health waits for each ``scontrol`` call (a small RPC slurmctld answers in milliseconds;
a controller that does not answer within this is restarting or failing over)."""
SCONTROL_CALLS = 3
"""A failing run's calls: show the node and drain it, then publish the verdict in its Comment."""
START_S = 5
"""Interpreter start, reading the spec, opening NVML and the checks that answer at once."""
PROBE_EXIT_S = 1
"""The second a hung filesystem probe's child gets to exit after its timeout (checks/disk.py)."""


def _probes(spec: HealthSpec) -> int:
    """How many filesystems an interval run probes (scratch and home, where set)."""
    return len([p for p in (spec.disk.scratch_path, spec.disk.home_path) if p])


def interval_run_seconds(spec: HealthSpec) -> int:
    """The longest an interval run may take with ``spec``, in whole seconds."""
    total = (
        START_S
        + spec.gpu.xid_wait_ms / 1000
        + _probes(spec) * (spec.disk.timeout_seconds + PROBE_EXIT_S)
        + SCONTROL_CALLS * SCONTROL_TIMEOUT_S
    )
    return math.ceil(total)


def what_it_is_made_of(spec: HealthSpec) -> str:
    """The budget's parts, named by the declaration fields that set them."""
    return (
        f"start {START_S} s, health.gpu.xidWaitMs {spec.gpu.xid_wait_ms} ms, {_probes(spec)} filesystem probe(s) of "
        f"health.disk.timeoutSeconds {spec.disk.timeout_seconds:g} s + {PROBE_EXIT_S} s, "
        f"{SCONTROL_CALLS} scontrol calls of {SCONTROL_TIMEOUT_S} s"
    )
