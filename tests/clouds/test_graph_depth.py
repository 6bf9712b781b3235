"""The resource dependency graph of each stack stays shallow: node pools and storage are created in parallel."""

from __future__ import annotations

from functools import cache

import pytest

from slonk_infra.declaration.stacks import load_stack_config
from slonk_infra.offline.render import run_program
from slonk_infra.offline.runner import Registration

# Longest chain over the dependencies the engine receives (depends_on and outputs used as inputs; not
# parent links), as measured: local provider -> namespace -> object, and with its own slurmdbd
# namespace -> the ConfigMaps a config-hashed workload mounts (created at once, nothing awaited) ->
# slurmdbd's Deployment -> slurmctld; on GCP the nodes' service account ->
# its role binding -> system node pool -> an awaited object (controller, login: their waits start once
# the nodes they select exist) -> with its own slurmdbd, slurmctld after slurmdbd's Deployment (Slurm's
# upgrade order); on AWS the IAM role -> EKS cluster -> system node group -> add-ons / provider ->
# namespace -> object. A new chain fails this test.
MAX_DEPTH = {"local": 4, "gcp": 5, "aws": 6}


def depth(registrations: list[Registration]) -> int:
    deps = {r.urn: [d for d in r.dependencies if d] for r in registrations}

    @cache
    def longest(urn: str) -> int:
        return 1 + max((longest(d) for d in deps.get(urn, []) if d in deps), default=0)

    return max(longest(u) for u in deps)


@pytest.mark.parametrize("stack", sorted(MAX_DEPTH))
def test_dependency_graph_is_shallow(stack: str) -> None:
    run = run_program(stack, load_stack_config(stack))
    d = depth(run.registrations)
    print(f"{stack}: dependency depth {d} over {len(run.registrations)} registrations")
    assert d <= MAX_DEPTH[stack]
    pools = [r for r in run.registrations if r.type.endswith(("nodePool:NodePool", "nodeGroup:NodeGroup"))]
    storage = {r.urn for r in run.registrations if r.type.startswith(("gcp:filestore", "aws:efs", "aws:fsx"))}
    for pool in pools:
        assert not storage & set(pool.dependencies), f"{pool.name} waits for storage"
