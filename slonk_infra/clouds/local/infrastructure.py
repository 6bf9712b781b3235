"""Local adapter: an existing Kubernetes cluster (kind, k3d, minikube); no cloud resources.

It creates only the Kubernetes provider. Worker pods are not pinned one per node of their own
pool (a laptop cluster may have a single node) and there are no cloud volumes: ``nfs-server`` and
``nfs-export`` storage is the Kubernetes layer's job on every cloud.
"""

from __future__ import annotations

import pulumi

from slonk_infra import tokens
from slonk_infra.binding import CloudResult
from slonk_infra.clouds.common import CloudComponent, existing_cluster_provider
from slonk_infra.plan import ClusterPlan

TOKEN = tokens.LOCAL_INFRASTRUCTURE


class LocalInfrastructure(CloudComponent):
    """A Kubernetes provider for the declaration's kubeconfig / context; ``result`` is its :class:`CloudResult`."""

    result: CloudResult

    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, opts)
        decl = plan.declaration
        provider = existing_cluster_provider(self.child_name("k8s"), plan, self.child_opts())
        self.result = CloudResult(provider=provider, volumes={}, pin_to_pools=False, topology_labels=(), node_pools={})
        context = decl.kubernetes.context
        self.register_outputs({"context": plan.pulumi_input(context) if context is not None else ""})
