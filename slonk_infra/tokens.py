"""Every component type token of the library, in one place.

A token is ``<package>:<module>:<Type>``; it is part of every child's URN, so changing one here
changes the URNs of everything under that component (a ``pulumi up`` would then plan to replace
them unless ``aliases`` are given). The URN tree is documented in ``docs/components.md``.
"""

from __future__ import annotations

PACKAGE = "slonk-infra"

# The top-level component. ``index`` is the module Pulumi's component provider gives a class it
# hosts, so the same token serves Python users and TypeScript / Go / YAML users of the package.
CLUSTER = f"{PACKAGE}:index:Cluster"

# The Slurm (Kubernetes) layer.
SLURM_CLUSTER = f"{PACKAGE}:slurm:SlurmCluster"

# Cloud layers, one per target, and their per-worker-group and storage children.
GCP_INFRASTRUCTURE = f"{PACKAGE}:gcp:Infrastructure"
GCP_WORKER_GROUP = f"{PACKAGE}:gcp:WorkerGroup"
GCP_SHARED_STORAGE = f"{PACKAGE}:gcp:SharedStorage"
AWS_INFRASTRUCTURE = f"{PACKAGE}:aws:Infrastructure"
AWS_WORKER_GROUP = f"{PACKAGE}:aws:WorkerGroup"
AWS_SHARED_STORAGE = f"{PACKAGE}:aws:SharedStorage"
LOCAL_INFRASTRUCTURE = f"{PACKAGE}:local:Infrastructure"

ALL = (
    CLUSTER,
    SLURM_CLUSTER,
    GCP_INFRASTRUCTURE,
    GCP_WORKER_GROUP,
    GCP_SHARED_STORAGE,
    AWS_INFRASTRUCTURE,
    AWS_WORKER_GROUP,
    AWS_SHARED_STORAGE,
    LOCAL_INFRASTRUCTURE,
)
