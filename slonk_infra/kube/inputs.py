"""What the Slurm layer's builders take from outside the plan: the cloud layer's part, and placeholders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from slonk_infra import vocab


class ClusterIPOf(str):
    """Placeholder for the ClusterIP of a Service of this layer (an in-cluster NFS server's address).

    Kubelet mounts NFS on the node, where cluster DNS names do not resolve, so the PersistentVolume
    needs the Service's IP. As text it is a marked placeholder; the Pulumi component replaces it with
    the Service's output.
    """

    service: str

    def __new__(cls, service: str) -> ClusterIPOf:
        obj = super().__new__(cls, f"<known after deploy: ClusterIP of Service {service}>")
        obj.service = service
        return obj


@dataclass(frozen=True)
class DatabaseConnection:
    """The MySQL-compatible server slurmdbd keeps its records in, and how slurmdbd logs in to it.

    A cloud layer hands one over for ``slurm.accounting.database.kind: cloud`` (Cloud SQL, RDS: the
    instance's private address and the password it generated); for ``in-cluster`` the Slurm layer makes
    its own (the namespace's MariaDB Service). Values may be Pulumi Outputs; nothing here inspects them.
    """

    host: Any
    """The server's address or DNS name (slurmdbd.conf StorageHost)."""
    password: Any = "<database-password>"
    """The password of ``user``, plain text (a secret Output); it goes only into a Secret."""
    port: int = vocab.MARIADB_PORT
    """The server's port (StoragePort; MySQL's 3306)."""
    user: str = "slurm"
    """The database user slurmdbd logs in as (StorageUser)."""
    database: str = "slurm_acct_db"
    """The database slurmdbd keeps its tables in (StorageLoc; slurmdbd.conf(5)'s default name)."""


@dataclass(frozen=True)
class KubeInputs:
    """What the Slurm layer needs from outside the plan.

    Values may be Pulumi Outputs; the builders place them and never inspect them.
    """

    munge_key_b64: Any = "<munge-key>"
    """The munge key, base64, for the munge Secret."""
    jwt_key_b64: Any = "<jwt-key>"
    """slurmctld's JWT signing key, base64, for the JWT Secret (with slurmrestd only)."""
    login_host_key_b64: Any = "<login-host-key>"
    """The login pods' SSH host key (OpenSSH private key), base64, for the login-host-keys Secret."""
    pin_to_pools: bool = True
    """Whether worker pods select their group's nodes and take one node each (False on local clusters)."""
    volume_sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Storage name -> PersistentVolume source keys (csi / nfs, mountOptions); managed filesystems only."""
    system_selector: Mapping[str, str] = field(default_factory=dict)
    """Node selector of the controller and login pods (the cloud's system pool)."""
    topology_labels: tuple[str, ...] = ()
    """Node labels carrying the cloud's physical topology (GKE block/subblock/host, EKS network layers)."""
    operations_account_annotations: Mapping[str, Any] = field(default_factory=dict)
    """Annotations of the operations controller's ServiceAccount that bind it to its cloud identity
    (GKE Workload Identity); empty on EKS (Pod Identity binds by name) and on local."""
    cloud_database: DatabaseConnection | None = None
    """The cloud-managed database of ``slurm.accounting.database.kind: cloud`` (Cloud SQL, RDS); None otherwise."""
    database_password: Any = "<database-password>"
    """The generated password of the in-cluster database (``kind: in-cluster``), plain text."""


class CloudVolume(Protocol):
    """A shared filesystem as a cloud layer hands it over (:class:`slonk_infra.binding.VolumeSource`)."""

    @property
    def pv_source(self) -> Mapping[str, Any]:
        """PersistentVolume spec keys saying where the data is (``csi`` or ``nfs``, ``mountOptions``)."""
        ...


class CloudDatabase(Protocol):
    """A cloud-managed accounting database as a cloud layer hands it over
    (:class:`slonk_infra.binding.AccountingDatabase`)."""

    @property
    def host(self) -> Any:
        """The server's private address."""
        ...

    @property
    def password(self) -> Any:
        """The generated password of ``user``."""
        ...

    @property
    def port(self) -> int:
        """The server's port."""
        ...

    @property
    def user(self) -> str:
        """The database user slurmdbd logs in as."""
        ...

    @property
    def database(self) -> str:
        """The database slurmdbd keeps its tables in."""
        ...


class CloudFacts(Protocol):
    """What the Slurm layer reads of a cloud layer's result (:class:`slonk_infra.binding.CloudResult`).

    A protocol rather than the class itself, so this layer stays free of the Pulumi-bound binding module.
    """

    @property
    def pin_to_pools(self) -> bool:
        """Whether worker pods are pinned one per node of their own pool."""
        ...

    @property
    def volumes(self) -> Mapping[str, CloudVolume]:
        """The cloud's shared filesystems, by storage name."""
        ...

    @property
    def topology_labels(self) -> tuple[str, ...]:
        """Node labels carrying the cloud's physical topology."""
        ...

    @property
    def operations_account_annotations(self) -> Mapping[str, Any]:
        """Annotations binding the operations controller's ServiceAccount to its cloud identity."""
        ...

    @property
    def accounting_database(self) -> CloudDatabase | None:
        """The cloud-managed accounting database this layer created (``kind: cloud``); None otherwise."""
        ...


@dataclass(frozen=True)
class ClusterKeys:
    """The cluster's generated secrets, base64; values may be Pulumi Outputs."""

    munge_key_b64: Any
    """The munge key."""
    login_host_key_b64: Any
    """The login pods' SSH host key (OpenSSH private key)."""
    jwt_key_b64: Any = None
    """slurmctld's JWT signing key; None without slurmrestd."""
    database_password: Any = None
    """The in-cluster accounting database's password, plain text; None unless ``kind: in-cluster``."""


def _database(db: CloudDatabase | None) -> DatabaseConnection | None:
    if db is None:
        return None
    return DatabaseConnection(host=db.host, password=db.password, port=db.port, user=db.user, database=db.database)


def from_cloud(cloud: CloudFacts, keys: ClusterKeys) -> KubeInputs:
    """The inputs of :func:`slonk_infra.kube.manifests.build_manifests` for a cloud layer's result and the
    cluster's keys: what the SlurmCluster component hands the builders, and the container tier with it."""
    return KubeInputs(
        munge_key_b64=keys.munge_key_b64,
        login_host_key_b64=keys.login_host_key_b64,
        jwt_key_b64=keys.jwt_key_b64,
        pin_to_pools=cloud.pin_to_pools,
        volume_sources={name: {**vol.pv_source} for name, vol in cloud.volumes.items()},
        # Where workers are pinned to their pools, the cloud also has a system pool for the control pods.
        system_selector={vocab.SYSTEM_ROLE_LABEL: vocab.SYSTEM_ROLE} if cloud.pin_to_pools else {},
        topology_labels=tuple(cloud.topology_labels),
        operations_account_annotations=dict(cloud.operations_account_annotations),
        cloud_database=_database(cloud.accounting_database),
        **({"database_password": keys.database_password} if keys.database_password is not None else {}),
    )
