"""The scenarios: a researcher's day and an operator's day on the running pods.

Each scenario is a function of a :class:`Cluster` that raises AssertionError (or TimeoutError) on
failure and returns a one-line detail; they run in order on one cluster per declaration, each leaving
the cluster as it found it (all started nodes IDLE).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.e2e.cluster import Cluster

IDLE_TIMEOUT = 180.0


@dataclass(frozen=True)
class Scenario:
    """A numbered scenario."""

    number: int
    title: str
    run: Callable[[Cluster], str]


def all_idle(cluster: Cluster, timeout: float = IDLE_TIMEOUT) -> dict[str, str]:
    """Wait until every running worker is idle; returns the states."""
    return cluster.wait_states({n: "idle" for n in cluster.workers()}, timeout)


def cluster_up(cluster: Cluster) -> str:
    """1. Every pod starts from the rendered manifests; started nodes IDLE, the others FUTURE."""
    t0 = time.monotonic()
    started_s = cluster.up()
    states = all_idle(cluster)
    idle_s = time.monotonic() - t0
    started = set(cluster.workers())
    records = set(states)
    future = records - started
    wrong = {n: s for n, s in states.items() if n in future and s != "future"}
    if wrong:
        raise AssertionError(f"nodes without a pod should be FUTURE: {wrong}")
    missing = started - records
    if missing:
        raise AssertionError(f"pods with no Slurm node record: {sorted(missing)}")
    return (
        f"{len(cluster.pods)} pods started in {started_s:.1f}s; {len(started)} nodes IDLE, "
        f"{len(future)} FUTURE; start to all IDLE {idle_s:.1f}s"
    )


SCENARIOS = [
    Scenario(1, "cluster up", cluster_up),
]
