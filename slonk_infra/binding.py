"""The small interface between a cloud layer and the Kubernetes (Slurm) layer.

A cloud adapter creates compute and storage and hands the Slurm layer a :class:`CloudResult`:
a Kubernetes provider, the shared filesystems as PersistentVolume sources, and whether worker
pods are pinned one per node of their own pool. Node selectors and tolerations are not part of it:
they derive from the plan (every cloud labels a group's nodes ``slonk.dev/pool=<group>`` and
applies the group's taints), so the Slurm layer reads them from the plan and stays cloud-agnostic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

# The label the cloud layers put on their system nodes and the Slurm layer selects (spelled in vocab).
from slonk_infra.vocab import MARIADB_PORT
from slonk_infra.vocab import SYSTEM_ROLE as SYSTEM_ROLE
from slonk_infra.vocab import SYSTEM_ROLE_LABEL as SYSTEM_ROLE_LABEL


@dataclass(frozen=True)
class VolumeSource:
    """A cloud filesystem, as the PersistentVolume the Slurm layer binds its claim to.

    ``pv_source`` holds the PersistentVolume spec keys that say where the data is (``csi`` or
    ``nfs``, and ``mountOptions``), camelCase, values may be Outputs of the cloud resources.
    """

    name: str
    pv_source: Mapping[str, Any]
    depends_on: Sequence[pulumi.Resource] = ()


@dataclass(frozen=True)
class AccountingDatabase:
    """A cloud-managed MySQL server a cloud layer created for slurmdbd (Cloud SQL, RDS).

    The Slurm layer reads it as :class:`slonk_infra.kube.inputs.DatabaseConnection`.
    """

    host: pulumi.Input[str]
    """The server's private address (slurmdbd.conf StorageHost)."""
    password: pulumi.Input[str]
    """The password the cloud layer generated for ``user`` (a secret Output)."""
    port: int = MARIADB_PORT
    """The server's port (MySQL's 3306)."""
    user: str = "slurm"
    """The database user slurmdbd logs in as."""
    database: str = "slurm_acct_db"
    """The database slurmdbd keeps its tables in."""


@dataclass(frozen=True)
class CloudResult:
    """What a cloud layer gives the Slurm layer."""

    provider: pulumi.ProviderResource | None
    volumes: Mapping[str, VolumeSource] = field(default_factory=dict)
    pin_to_pools: bool = True
    topology_labels: tuple[str, ...] = ()
    node_pools: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    # Cloud name of each worker group's node pool / node group, by group name.
    node_pool_names: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # The kubeconfig of a Kubernetes cluster this layer created (exec-plugin auth, no credential in
    # it); None when the cluster already existed.
    kubeconfig: pulumi.Output[str] | None = None
    # Annotations of the operations controller's ServiceAccount that give it the cloud identity this
    # layer created for it (GKE Workload Identity: iam.gke.io/gcp-service-account). Empty where the
    # identity is bound another way (EKS Pod Identity binds by namespace and ServiceAccount name) or
    # where there is none (local).
    operations_account_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # The system node pool / node group the controller, login and slurmrestd pods select: what their
    # Pulumi awaits must start after (empty on local, where the nodes already exist).
    system_nodes: Sequence[pulumi.Resource] = ()
    # The cloud-managed database slurmdbd uses (slurm.accounting.database.kind: cloud: Cloud SQL, RDS),
    # with the password this layer generated for it; None for every other kind.
    accounting_database: AccountingDatabase | None = None
