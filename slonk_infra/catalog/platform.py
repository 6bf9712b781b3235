"""Cluster-level facts (``data/platform.yaml``, ``data/tpus.yaml`` multihost_env).

Settings a cloud needs for what the Slurm layer renders to take effect (NetworkPolicy
enforcement, a least-privilege node identity), the StatefulSet pod-index label, and what JAX
reads on a multi-host TPU slice.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CloudPlatform(_Frozen):
    """One cloud's cluster-level facts."""

    network_policy: str = Field(description="Whether and how NetworkPolicies are enforced.")
    network_policy_source: str = Field(description="Where that comes from.")
    network_policy_addon: str | None = Field(default=None, description="EKS add-on that enforces them.")
    network_policy_configuration: dict[str, str] = Field(
        default_factory=dict, description="Add-on configuration values that turn enforcement on."
    )
    node_service_account_roles: tuple[str, ...] = Field(default=(), description="GKE: roles of the node identity.")
    node_service_account_source: str | None = Field(default=None, description="Where the roles come from.")


class KubernetesFacts(_Frozen):
    """Upstream Kubernetes facts the layer relies on."""

    pod_index_label: str = Field(description="Label the StatefulSet controller puts the pod ordinal in.")
    pod_index_label_min_minor: str = Field(description="Oldest minor with the label on by default.")
    pod_index_label_source: str = Field(description="Where that comes from.")


class Platform(_Frozen):
    """Everything in platform.yaml."""

    clouds: dict[str, CloudPlatform] = Field(description="cloud -> facts.")
    kubernetes: KubernetesFacts = Field(description="Upstream facts.")


class TpuMultihostEnv(_Frozen):
    """What a process on one host of a multi-host TPU slice reads to find the others."""

    worker_id: str = Field(description="Variable holding the host's index in the slice.")
    worker_hostnames: str = Field(description="Variable holding every host of the slice, comma-separated, index order.")
    coordinator_port: int = Field(gt=0, description="Port of the JAX coordinator on the first host.")
    forwarded: tuple[str, ...] = Field(
        description=(
            "Variables of the TPU host's container that every job task needs (libtpu reads them instead of "
            "the metadata server); a trailing * names every variable with that prefix."
        )
    )
    forwarded_source: str = Field(description="Where the forwarded list comes from.")
    source: str = Field(description="Where this comes from.")
