"""What the Slurm layer's builders take from outside the plan: the cloud layer's part, and placeholders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
