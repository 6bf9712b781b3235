"""The Pulumi program of this project: one :class:`slonk_infra.Cluster` from the stack's declaration.

The same function runs under ``pulumi up`` (``__main__.py``) and in-process under the mock runtime
(``slonk-infra render``). The declaration is validated completely before any resource is declared.
"""

from __future__ import annotations

import pulumi

from slonk_infra.clouds import build_plan
from slonk_infra.cluster import Cluster
from slonk_infra.declaration.stacks import CONFIG_KEY
from slonk_infra.plan import ClusterPlan


def plan_from_config() -> ClusterPlan:
    """Read and validate the stack's ``slonk-infra:cluster`` object (raises DeclarationError)."""
    raw = pulumi.Config().require_object(CONFIG_KEY.split(":", 1)[1])
    return build_plan(raw)


def main() -> Cluster:
    """Declare the whole stack and export what a user needs, login address first (never the munge key)."""
    plan = plan_from_config()
    cluster = Cluster(plan.name, plan)
    pulumi.export("loginAddress", cluster.login_address)
    pulumi.export("cluster", cluster.cluster_name)
    pulumi.export("namespace", cluster.namespace)
    pulumi.export("controllerHost", cluster.controller_host)
    pulumi.export("nodePools", cluster.node_pools)
    if plan.declaration.kubernetes.create:
        pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export("summary", plan.summary())
    return cluster
