"""slonk-infra: Slurm on Kubernetes (GKE, EKS or an existing cluster) as Pulumi components.

The public API:

- :class:`Cluster` — the whole system as one component; outputs ``login_address``,
  ``controller_host``, ``kubeconfig``, ``node_pools``, ``slurm_files``, ...
- :class:`ClusterArgs` — the declaration as typed dicts (generated from the pydantic model);
  :class:`ClusterDeclaration` — the pydantic model itself.
- :func:`build_plan` / :class:`ClusterPlan` — validation and resolution without any resource.
- :class:`SlurmCluster` and :func:`deploy_cloud` — the two layers, usable alone.
- :class:`DeclarationError` — what a bad declaration raises, listing every problem.

The names are imported on first use, so the pod-side parts of the package (health checks, the
operations controller) run in images that do not carry the Pulumi SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.lazy import lazy_getattr

if TYPE_CHECKING:
    from slonk_infra.clouds import build_plan, deploy_cloud
    from slonk_infra.cluster import Cluster
    from slonk_infra.declaration.args import ClusterArgs
    from slonk_infra.declaration.errors import DeclarationError
    from slonk_infra.declaration.model import ClusterDeclaration
    from slonk_infra.plan import ClusterPlan
    from slonk_infra.slurm_layer.slurm_cluster import SlurmCluster

_WHERE = {
    "Cluster": "slonk_infra.cluster",
    "ClusterArgs": "slonk_infra.declaration.args",
    "ClusterDeclaration": "slonk_infra.declaration.model",
    "ClusterPlan": "slonk_infra.plan",
    "DeclarationError": "slonk_infra.declaration.errors",
    "SlurmCluster": "slonk_infra.slurm_layer.slurm_cluster",
    "build_plan": "slonk_infra.clouds",
    "deploy_cloud": "slonk_infra.clouds",
}

__all__ = [
    "Cluster",
    "ClusterArgs",
    "ClusterDeclaration",
    "ClusterPlan",
    "DeclarationError",
    "SlurmCluster",
    "build_plan",
    "deploy_cloud",
]


__getattr__ = lazy_getattr(__name__, _WHERE)
