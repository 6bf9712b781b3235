"""How long one health-check run may take, from its settings: what Slurm must allow it.

slurmd stops a HealthCheckProgram run after 60 s (SIGTERM, then SIGKILL 10 ms later;
slonk_infra/catalog/slurm_versions.py), and a stopped run drains nothing. So a run has a deadline for its
checks (:func:`checks_deadline_seconds`): past it, slonk-health concludes with the checks done by then
(slonk_infra/health/isolate.py) and still has the time its ``scontrol`` calls need to drain and publish.
The slowest run the settings allow must fit before that deadline: the start, the XID listening window
and each filesystem probe (its timeout plus the second the probe's child gets to exit).
"""

from __future__ import annotations

import math

from slonk_infra.health.config import HealthSpec

SCONTROL_TIMEOUT_S = 10
"""How long slonk-health waits for each ``scontrol`` call (a small RPC slurmctld answers in milliseconds;
a controller that does not answer within this is restarting or failing over)."""
SCONTROL_CALLS = 3
"""A failing run's calls: show the node and drain it, then publish the verdict in its Comment."""
LAUNCH_S = 2
"""The interpreter's start and imports, before the run's own clock (and so its deadline) starts; slurmd's
60 s count from its fork. (0.35-0.49 s for a whole prolog run on an H100 node.)"""
START_S = 5
"""Reading the spec, opening NVML and the checks that answer at once."""
PROBE_EXIT_S = 1
"""The second a hung filesystem probe's child gets to exit after its timeout (checks/disk.py)."""


def _probes(spec: HealthSpec) -> int:
    """How many filesystems an interval run probes (scratch and home, where set)."""
    return len([p for p in (spec.disk.scratch_path, spec.disk.home_path) if p])


def checks_seconds(spec: HealthSpec) -> float:
    """The longest the checks of a run may take with ``spec``, from the run's own start."""
    return START_S + spec.gpu.xid_wait_ms / 1000 + _probes(spec) * (spec.disk.timeout_seconds + PROBE_EXIT_S)


def interval_run_seconds(spec: HealthSpec) -> int:
    """The longest an interval run may take with ``spec``, in whole seconds, from slurmd's fork."""
    return math.ceil(LAUNCH_S + checks_seconds(spec) + SCONTROL_CALLS * SCONTROL_TIMEOUT_S)


def checks_deadline_seconds(limit_s: int) -> int:
    """When a run whose program slurmd stops after ``limit_s`` must give up on its checks (from the run's own
    start): what is left once the interpreter has started and the ``scontrol`` calls have had their time.
    A run the settings allow never reaches it: :func:`interval_run_seconds` <= ``limit_s`` is the same bound."""
    deadline = limit_s - LAUNCH_S - SCONTROL_CALLS * SCONTROL_TIMEOUT_S
    if deadline <= START_S:
        raise ValueError(f"a {limit_s} s limit leaves the checks {deadline} s after the launch and the scontrol calls")
    return deadline


def what_it_is_made_of(spec: HealthSpec) -> str:
    """The budget's parts, named by the declaration fields that set them."""
    return (
        f"launch {LAUNCH_S} s, start {START_S} s, health.gpu.xidWaitMs {spec.gpu.xid_wait_ms} ms, {_probes(spec)} filesystem probe(s) of "
        f"health.disk.timeoutSeconds {spec.disk.timeout_seconds:g} s + {PROBE_EXIT_S} s, "
        f"{SCONTROL_CALLS} scontrol calls of {SCONTROL_TIMEOUT_S} s"
    )
