"""Resolve a declaration against the catalog into a plan every renderer and component reads.

:func:`build_plan` is the one gate: it validates the raw stack config and returns a
:class:`ClusterPlan`, or raises :class:`~slonk_infra.declaration.errors.DeclarationError` listing every problem
with its field path. Nothing downstream re-derives a name, a count or a machine figure.

* :mod:`~slonk_infra.plan.capacity`: what a node gives Slurm after Kubernetes' share, per the
  cloud's documented node model and the system pods every node runs (RealMemory, CoreSpecCount,
  DefMemPerCPU, the worker pod's requests);
* :mod:`~slonk_infra.plan.model`: worker groups, partitions, the cluster plan;
* :mod:`~slonk_infra.plan.resolve`: declaration + catalog -> plan;
* :mod:`~slonk_infra.plan.checks`: the problems collected on the way;
* :mod:`~slonk_infra.plan.target`: what the plan needs of a deployment target, which its caller passes in
  (:func:`slonk_infra.clouds.build_plan` passes every registered target).
"""

from slonk_infra.plan.capacity import (
    MUNGED,
    NodeBudget,
    NodeShape,
    Request,
    def_mem_per_cpu,
    fits,
    node_budget,
    node_shape,
    worker_sidecars,
)
from slonk_infra.plan.checks import Problems
from slonk_infra.plan.model import ClusterPlan, Partition, WorkerGroup
from slonk_infra.plan.resolve import GPU_TAINT, PRIVATE_RANGES, TPU_TAINT, build_plan, default_partitions
from slonk_infra.plan.target import Target, Targets

__all__ = [
    "GPU_TAINT",
    "MUNGED",
    "PRIVATE_RANGES",
    "TPU_TAINT",
    "ClusterPlan",
    "NodeBudget",
    "NodeShape",
    "Partition",
    "Problems",
    "Request",
    "Target",
    "Targets",
    "WorkerGroup",
    "build_plan",
    "def_mem_per_cpu",
    "default_partitions",
    "fits",
    "node_budget",
    "node_shape",
    "worker_sidecars",
]
