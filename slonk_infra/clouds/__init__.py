"""Cloud layer: one adapter per target gives the Slurm layer the same :class:`CloudResult`.

``deploy_cloud(plan)`` picks the adapter from ``plan.declaration.cloud`` through the registry
(:mod:`slonk_infra.clouds.registry`); each adapter also owns its declaration rules
(:mod:`slonk_infra.clouds.rules`):

- ``gcp``: :class:`~slonk_infra.clouds.gcp.GcpInfrastructure` (GKE, node pools, Filestore)
- ``aws``: :class:`~slonk_infra.clouds.aws.AwsInfrastructure` (EKS, node groups with EFA, EFS, FSx)
- ``local``: :class:`~slonk_infra.clouds.local.LocalInfrastructure` (an existing cluster; nothing created)

Each adapter is a ``ComponentResource`` whose resource count grows with the number of worker
groups and storage entries, never with the number of nodes.
"""

from __future__ import annotations

import pulumi

from slonk_infra.clouds.common import CloudComponent
from slonk_infra.clouds.registry import rules_for
from slonk_infra.plan import ClusterPlan

__all__ = ["CloudComponent", "deploy_cloud"]


def deploy_cloud(
    plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None, name: str | None = None
) -> CloudComponent:
    """Create the cloud side of ``plan`` as one component (named ``name``, default the cluster's name).

    Its ``result`` (a :class:`~slonk_infra.binding.CloudResult`) is what the Slurm layer consumes.
    """
    return rules_for(plan.declaration.cloud).deploy(name or plan.name, plan, opts)
