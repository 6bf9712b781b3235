"""The Pulumi program: declaration -> plan -> cloud layer -> Slurm layer.

The same function runs under ``pulumi up`` (``__main__.py``) and in-process under the mock runtime
(``slonk-infra render``). The declaration is validated completely before any resource is declared.
"""

from __future__ import annotations

import pulumi

from slonk_infra.clouds import deploy_cloud
from slonk_infra.components.slurm_cluster import SlurmCluster
from slonk_infra.plan import ClusterPlan, build_plan
from slonk_infra.stacks import CONFIG_KEY


def plan_from_config() -> ClusterPlan:
    """Read and validate the stack's ``slonk-infra:cluster`` object (raises DeclarationError)."""
    raw = pulumi.Config().require_object(CONFIG_KEY.split(":", 1)[1])
    return build_plan(raw)


def main() -> SlurmCluster:
    """Declare the whole stack."""
    plan = plan_from_config()
    cloud = deploy_cloud(plan)
    cluster = SlurmCluster(plan.name, plan, cloud)
    pulumi.export("cluster", plan.name)
    pulumi.export("namespace", plan.namespace)
    pulumi.export("summary", plan.summary())
    pulumi.export("mungeKey", cluster.munge_key)
    return cluster
