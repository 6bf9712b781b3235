"""Settings of the operations controller: :class:`OperationsSpec`, camelCase in files and declarations.

The model is self-contained (it imports nothing from the declaration), so the declaration can embed
it as one field (``operations:``) and the controller reads the same shape from its ConfigMap.
Every field has a default; an empty mapping is a working configuration.

Kubernetes names the defaults list, and where they come from:

* ``cloud.google.com/impending-node-termination`` (taint): GKE's graceful shutdown of a VM about to
  be stopped for host maintenance or spot preemption (GKE docs "Manage GKE node disruption for GPUs
  and TPUs"; the same key in GoogleCloudPlatform/k8s-node-termination-handler).
* ``cloud.google.com/maintenance-window-started`` (taint) and
  ``cloud.google.com/active-node-maintenance=ONGOING`` (label): GKE host maintenance in progress;
  ``cloud.google.com/scheduled-maintenance-time`` (label, Unix seconds): maintenance announced
  (GKE docs "Monitor maintenance events", GKE 1.31.1-gke.2008000 and later, GPU/TPU machines).
* ``aws-node-termination-handler/spot-itn``, ``.../scheduled-maintenance``,
  ``.../asg-lifecycle-termination``, ``.../rebalance-recommendation`` (taints): AWS Node
  Termination Handler (aws/aws-node-termination-handler, pkg/node/node.go).
* ``node.kubernetes.io/out-of-service`` (taint): Kubernetes non-graceful node shutdown.
* ``ToBeDeletedByClusterAutoscaler`` (taint): cluster-autoscaler scale-down; ``karpenter.sh/disrupted``
  (taint): Karpenter v1 disruption.
* Node conditions ``AcceleratedHardwareReady``, ``ContainerRuntimeReady``, ``KernelReady``,
  ``NetworkingReady``, ``StorageReady``: the EKS node monitoring agent (EKS docs "Detect node health
  issues and enable automatic node repair"); ``Ready``: the kubelet.

``node.kubernetes.io/unschedulable`` is deliberately not a termination taint: Kubernetes adds it to
every cordoned node, including the controller's own cordons; a cordon is read from
``spec.unschedulable`` and the ``slonk.dev/cordoned-by`` annotation instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from slonk_infra import vocab

DEFAULT_CONFIG_PATH = Path("/etc/slonk-ops/config.yaml")

TERMINATION_TAINTS = (
    "cloud.google.com/impending-node-termination",
    "aws-node-termination-handler/spot-itn",
    "aws-node-termination-handler/scheduled-maintenance",
    "aws-node-termination-handler/asg-lifecycle-termination",
    "aws-node-termination-handler/rebalance-recommendation",
    "node.kubernetes.io/out-of-service",
    "ToBeDeletedByClusterAutoscaler",
    "karpenter.sh/disrupted",
)
MAINTENANCE_TAINTS = ("cloud.google.com/maintenance-window-started",)
MAINTENANCE_LABELS = {"cloud.google.com/active-node-maintenance": "ONGOING"}
SCHEDULED_MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
FAILING_CONDITIONS = (
    "Ready",
    "AcceleratedHardwareReady",
    "ContainerRuntimeReady",
    "KernelReady",
    "NetworkingReady",
    "StorageReady",
)
# slonk-health drains with this prefix (slonk_infra.health.drain.DRAIN_REASON_PREFIX); the controller
# may replace such a drain with its own and lift it once a newer verdict passes.
HEALTH_REASON_PREFIX = "slonk-health:"
# Namespaces whose pods scrape the metrics port by default: GKE Managed Service for Prometheus runs its
# collectors in gmp-system (GKE docs "Managed collection"), and kube-prometheus installs Prometheus in
# monitoring (prometheus-operator/kube-prometheus manifests/setup/namespace.yaml). Sources: docs/operations.md.
METRICS_NAMESPACES = ("gmp-system", "monitoring")
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"

Seconds = Annotated[int, Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class SignalsSpec(_Model):
    """Which Kubernetes node states drain the Slurm node (besides a person's cordon and health verdicts)."""

    termination_taints: list[str] = Field(
        default_factory=lambda: list(TERMINATION_TAINTS),
        description="Taint keys meaning the machine is about to go away (GKE, EKS, autoscalers).",
    )
    maintenance_taints: list[str] = Field(
        default_factory=lambda: list(MAINTENANCE_TAINTS), description="Taint keys meaning host maintenance runs."
    )
    maintenance_labels: dict[str, str] = Field(
        default_factory=lambda: dict(MAINTENANCE_LABELS),
        description="Label key -> value meaning host maintenance runs ('' matches any value).",
    )
    scheduled_maintenance_label: str = Field(
        default=SCHEDULED_MAINTENANCE_LABEL,
        description="Label holding the Unix time of announced host maintenance ('' to ignore it).",
    )
    scheduled_maintenance_lead_seconds: int = Field(
        default=3600,
        ge=0,
        description="Drain this long before announced maintenance starts, so running jobs can end (0: never).",
    )
    failing_conditions: list[str] = Field(
        default_factory=lambda: list(FAILING_CONDITIONS),
        description="Node condition types that drain the Slurm node when their status is not True.",
    )


class RemediationSpec(_Model):
    """What the controller may do to a drained, idle node whose health verdict asks for an action."""

    enabled: bool = Field(default=True, description="Act on verdicts (false: only drain and report).")
    max_actions_per_window: int = Field(
        default=4, ge=1, description="Pod restarts plus machine replacements allowed per window, cluster-wide."
    )
    window_seconds: Seconds = Field(default=600, description="Length of the rate-limit window.")
    max_pool_fraction: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="Most of a pool under remediation at once (rounded down, but at least one node).",
    )
    repeat_window_seconds: Seconds = Field(
        default=7 * 24 * 3600,
        description="A machine (fingerprint) that fails again this soon after a remediation is kept out.",
    )
    timeout_seconds: Seconds = Field(
        default=1800, description="A remediation not finished after this long needs a person."
    )


class OperationsSpec(_Model):
    """The Slurm <-> Kubernetes state-sync and remediation controller (one Deployment)."""

    enabled: bool = Field(default=False, description="Deploy the controller.")
    image: str | None = Field(default=None, description="Controller image (default: the cluster's one image).")
    interval_seconds: float = Field(default=15.0, gt=0, description="Seconds between sync ticks.")
    slurmrestd_url: str | None = Field(
        default=None,
        description="slurmrestd address: http://host:port or unix:/path (default: the cluster's slurmrestd Service).",
    )
    jwt_key_file: str = Field(
        default="/etc/slonk-ops/jwt/jwt_hs256.key",
        description="HS256 key slurmctld checks tokens with (the slurm-jwt Secret, mounted read-only).",
    )
    slurm_user: str = Field(
        default="slurm",
        min_length=1,
        description="User the controller's tokens name; must be SlurmUser or root to change node states.",
    )
    token_lifetime_seconds: Seconds = Field(default=3600, description="Lifetime of each token the controller signs.")
    scontrol_fallback: bool = Field(
        default=True,
        description="Change node states with scontrol (token auth) when slurmrestd has no node update (22.05).",
    )
    reason_prefix: str = Field(
        default="slonk:",
        min_length=1,
        pattern=r"^\S+$",
        description="Prefix of every drain reason the controller writes; only such drains are ever lifted.",
    )
    owned_reason_prefixes: list[str] = Field(
        default_factory=lambda: [HEALTH_REASON_PREFIX],
        description="Other drain-reason prefixes the controller may take over (the health checker's).",
    )
    worker_selector: str = Field(
        default=f"{vocab.NAME_LABEL}={vocab.APP},{vocab.COMPONENT}={vocab.WORKER_COMPONENT}",
        description="Label selector of the worker pods (one per Slurm node, named like it).",
    )
    node_selector: str = Field(default="", description="Label selector of the Kubernetes nodes to list ('' all).")
    signals: SignalsSpec = Field(default_factory=SignalsSpec, description="Kubernetes states that drain.")
    remediation: RemediationSpec = Field(default_factory=RemediationSpec, description="Remediation limits.")
    state_dir: str = Field(
        default="/var/lib/slonk-ops",
        description="Volume for the controller's memory (state.json) and the job hardware record (jobs.jsonl).",
    )
    state_volume_gib: int = Field(default=1, ge=1, description="Size of the state volume.")
    metrics_port: int = Field(default=8000, ge=1, le=65535, description="Port of the Prometheus endpoint.")
    service_monitor: bool = Field(
        default=False, description="Declare a ServiceMonitor (needs the Prometheus operator's CRDs)."
    )
    scrape_interval: str = Field(default="30s", description="ServiceMonitor scrape interval.")
    cpu_request: str = Field(default="100m", description="CPU request of the controller container.")
    memory_request: str = Field(default="256Mi", description="Memory request of the controller container.")
    memory_limit: str = Field(default="1Gi", description="Memory limit of the controller container.")
    metrics_namespaces: list[Annotated[str, Field(pattern=DNS_LABEL)]] = Field(
        default_factory=lambda: list(METRICS_NAMESPACES),
        description="Namespaces whose pods may reach the metrics port through the namespace's default-deny "
        "NetworkPolicy (matched on kubernetes.io/metadata.name); [] admits none.",
    )
    cloud_actions: bool = Field(
        default=True,
        description="gcp/aws: the controller sizes the GPU/CPU worker pools' machines (grows them at once, "
        "removes only empty machines) and asks the cloud for a new machine on replace-machine verdicts; "
        "false: it only cordons and annotates, and Pulumi sizes the pools.",
    )
    report_faulty_hosts: bool = Field(
        default=False,
        description="gcp: for A3/A4 machines bound to a reservation, report a replace-machine verdict's host to "
        "Compute Engine as faulty (instances.reportHostAsFaulty) instead of recreating the VM. Off by default: "
        "the AI Hypercomputer guide gives GKE nodes their own procedure, the repair can take days on A3 High and "
        "Mega, and auto-repair recreating the node cancels a report in progress (not verified on GKE here).",
    )
    scale_in_grace_seconds: Seconds = Field(
        default=600,
        description="A machine younger than this is never removed (a node that just joined has no pod yet).",
    )
    max_removals_per_tick: int = Field(
        default=2, ge=1, description="Most machines removed from the worker pools in one tick, cluster-wide."
    )

    @model_validator(mode="after")
    def _prefixes(self) -> OperationsSpec:
        for p in self.owned_reason_prefixes:
            if not p.strip():
                raise ValueError("ownedReasonPrefixes: an empty prefix would claim every drain")
            if p.startswith(self.reason_prefix) or self.reason_prefix.startswith(p):
                raise ValueError(f"ownedReasonPrefixes: {p!r} overlaps reasonPrefix {self.reason_prefix!r}")
        return self

    @property
    def all_owned_prefixes(self) -> tuple[str, ...]:
        """The controller's own prefix first, then the ones it may take over."""
        return (self.reason_prefix, *self.owned_reason_prefixes)

    @property
    def owns_pool_sizes(self) -> bool:
        """The controller (not Pulumi) sizes the GPU/CPU worker pools after creation (gcp/aws)."""
        return self.enabled and self.cloud_actions


class CloudSection(_Model):
    """The ``cloud`` section of the controller's config.yaml, rendered from the plan (gcp/aws only).

    Not part of the declaration: :mod:`slonk_infra.kube.operations` writes it beside the
    :class:`OperationsSpec` fields, and the controller turns it into the cloud adapter's pools.
    """

    kind: Literal["gcp", "aws"] = Field(description="The cloud that runs the worker machines.")
    cluster: str = Field(min_length=1, description="GKE / EKS cluster name.")
    location: str = Field(min_length=1, description="GKE cluster location (region) or AWS region.")
    node_pools: dict[str, str] = Field(
        default_factory=dict,
        description="Worker group -> GKE node pool / EKS node group (GPU and CPU groups; TPU slices keep their size).",
    )
    capacity_blocks: dict[str, str] = Field(
        default_factory=dict, description="EKS worker group -> Capacity Block reservation id (grown once active)."
    )
    faulty_host_machine_types: list[str] = Field(
        default_factory=list,
        description="Machine types whose bad hosts are reported with instances.reportHostAsFaulty (GCP).",
    )


class ControllerConfig(_Model):
    """Everything config.yaml holds: the operations settings and, on gcp/aws, the cloud section."""

    spec: OperationsSpec = Field(description="The declaration's operations settings.")
    cloud: CloudSection | None = Field(default=None, description="The worker pools' cloud (None: local).")


class SpecError(ValueError):
    """A configuration file the controller cannot use; the message names each bad field."""


def describe(err: ValidationError, prefix: str = "") -> str:
    """One line per problem: ``remediation.maxPoolFraction: Input should be ... (got 2)``; ``prefix`` goes
    before each field path (a nested section)."""
    lines = []
    for e in err.errors(include_url=False):
        path = prefix + (".".join(str(p) for p in e["loc"]) or "<root>")
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        elif "input" in e and not isinstance(e["input"], dict | list):
            msg = f"{msg} (got {e['input']!r})"
        lines.append(f"{path}: {msg}")
    return "; ".join(lines)


def load_config(path: Path) -> ControllerConfig:
    """Reads config.yaml (or JSON): the :class:`OperationsSpec` fields at the top, an optional ``cloud``
    section beside them; clear errors naming the field, no tracebacks."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    data = dict(data)
    cloud = data.pop("cloud", None)
    try:
        spec = OperationsSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{path}: {describe(exc)}") from None
    try:
        section = None if cloud is None else CloudSection.model_validate(cloud)
    except ValidationError as exc:
        raise SpecError(f"{path}: {describe(exc, 'cloud.')}") from None
    return ControllerConfig(spec=spec, cloud=section)


def load_spec(path: Path) -> OperationsSpec:
    """Reads a YAML or JSON file into an :class:`OperationsSpec` (a ``cloud`` section is read and checked
    too: :func:`load_config` returns it)."""
    return load_config(path).spec


def default_slurmrestd_url(namespace: str) -> str:
    """The cluster's slurmrestd Service (built by slonk_infra.kube.restapi); the controller's default."""
    return f"http://{vocab.RESTAPI}.{namespace}.svc:{vocab.SLURMRESTD_PORT}"
