"""The plan model: worker groups, partitions and the resolved cluster every renderer and component reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from slonk_infra.catalog import MachineType, load_catalog
from slonk_infra.catalog.slurm_versions import SlurmVersion
from slonk_infra.declaration.errors import Problem
from slonk_infra.declaration.model import ClusterDeclaration, Reservation, Taint
from slonk_infra.plan import naming
from slonk_infra.plan.capacity import NodeBudget, NodeShape, node_budget, worker_sidecars
from slonk_infra.vocab import GPU_RESOURCE, POOL_LABEL, TPU_RESOURCE, TPU_TOPOLOGY_LABEL


@dataclass(frozen=True)
class WorkerGroup:
    """A pool or one TPU slice: one node pool, one worker StatefulSet, one Slurm node set."""

    name: str
    """Group name: node pool, StatefulSet and Slurm node name prefix (see :mod:`slonk_infra.plan.naming`)."""
    kind: Literal["gpu", "tpu", "cpu"]
    """What the nodes carry."""
    base: str
    """The pool's name, or the TPU slice declaration's name this slice came from."""
    machine: MachineType
    """The catalog machine every node of the group is."""
    replicas: int
    """Nodes (and worker pods) running now."""
    slurm_nodes: int
    """Slurm node records kept (maxNodes): scaling up to this count changes no Slurm file."""
    features: tuple[str, ...]
    """Slurm node features, first-seen order, no repeats."""
    labels: Mapping[str, str]
    """Extra Kubernetes node labels from the declaration."""
    taints: tuple[Taint, ...]
    """Node taints: the accelerator's, then the declaration's."""
    spot: bool
    """Spot / preemptible capacity."""
    reservation: Reservation | None
    """Capacity reservation the nodes consume, if any."""
    compact_placement: bool
    """Whether the nodes are placed close together (compact placement / placement group)."""
    tpu_generation: str | None = None
    """TPU generation (v5p...), TPU slices only."""
    tpu_topology: str | None = None
    """TPU slice topology (2x2x4...), TPU slices only."""
    slice_index: int | None = None
    """Index of this slice within its declaration, TPU slices only."""
    storage_kinds: frozenset[str] = frozenset()
    """Kinds of the cluster's shared filesystems (their CSI node pods run on every node)."""

    @property
    def node_names(self) -> list[str]:
        """Slurm node names (= pod hostnames) of every node record the group keeps."""
        return naming.slurm_nodes(self.name, self.slurm_nodes)

    @property
    def hostlist(self) -> str:
        """Hostlist expression of the group's Slurm node records."""
        return naming.node_hostlist(self.name, self.slurm_nodes)

    @property
    def budget(self) -> NodeBudget:
        """How one node's allocatable CPU and memory divide between system pods, sidecars and slurmd."""
        return node_budget(self.machine, self.storage_kinds, worker_sidecars(self.machine))

    @property
    def shape(self) -> NodeShape:
        """CPU / memory Slurm may schedule on one node (and slurmd's container requests)."""
        return self.budget.shape

    @property
    def gres_name(self) -> str | None:
        """Slurm GRES name (gpu, tpu) or None for CPU nodes."""
        return {"gpu": "gpu", "tpu": "tpu", "cpu": None}[self.kind]

    @property
    def gres_type(self) -> str | None:
        """Slurm GRES type: the accelerator (h100) or the TPU generation (v5p)."""
        if self.kind == "tpu":
            return self.tpu_generation
        return self.machine.accelerator.type if self.machine.accelerator else None

    @property
    def gres_count(self) -> int:
        """Accelerators per node; equals the pod's nvidia.com/gpu or google.com/tpu limit."""
        return self.machine.accelerator.count if self.machine.accelerator else 0

    @property
    def gres(self) -> str | None:
        """Slurm ``Gres=`` value, e.g. ``gpu:h100:8``."""
        return f"{self.gres_name}:{self.gres_type}:{self.gres_count}" if self.gres_name else None

    @property
    def kube_resource(self) -> str | None:
        """Kubernetes extended resource the worker pod requests."""
        return {"gpu": GPU_RESOURCE, "tpu": TPU_RESOURCE, "cpu": None}[self.kind]

    @property
    def node_labels(self) -> dict[str, str]:
        """Labels put on the group's Kubernetes nodes (the pool label selects them)."""
        return {POOL_LABEL: self.name, **self.labels}

    @property
    def node_selector(self) -> dict[str, str]:
        """Selector that pins the group's worker pods to the group's nodes."""
        selector = {POOL_LABEL: self.name}
        if self.kind == "tpu" and self.machine.label and self.tpu_topology:
            # GKE requires TPU pods to select both the accelerator and the topology.
            selector[self.machine.label.key] = self.machine.label.value
            selector[TPU_TOPOLOGY_LABEL] = self.tpu_topology
        return selector

    @property
    def nvlink_domains(self) -> list[list[str]]:
        """Node names grouped by NVLink domain (one domain per VM unless the machine is rack-scale)."""
        size = self.machine.nvlink_domain
        names = self.node_names
        return [names[i : i + size] for i in range(0, len(names), size)]


@dataclass(frozen=True)
class Partition:
    """A resolved Slurm partition."""

    name: str
    """PartitionName."""
    groups: tuple[str, ...]
    """Member worker groups, in declaration order."""
    priority_tier: int
    """PriorityTier."""
    default: bool
    """Whether jobs that name no partition land here."""
    max_time: str
    """MaxTime."""
    preempt_mode: str | None
    """PreemptMode of the partition, None for the cluster's."""


@dataclass(frozen=True)
class ClusterPlan:
    """A validated declaration with everything resolved: the input of every renderer."""

    declaration: ClusterDeclaration
    """The validated declaration."""
    groups: tuple[WorkerGroup, ...]
    """Pools, then TPU slices (one group per slice)."""
    partitions: tuple[Partition, ...]
    """Slurm partitions, declared or the default set."""
    slurm_version: SlurmVersion
    """The image's Slurm release."""
    login_source_ranges: tuple[str, ...] | None
    """loadBalancerSourceRanges of the login Service: the declared ranges, else the target's default
    (private ranges where its load balancers could face the internet); None for no restriction."""
    warnings: tuple[Problem, ...] = ()
    """What deploys but is probably a mistake (a user without a key, a pool in no partition, ...), by field;
    the CLI prints them and ``--strict`` refuses them, ``Cluster`` logs them as Pulumi warnings."""
    login_service_annotations: Mapping[str, str] = field(default_factory=dict)
    """Annotations of the login Service from the target: where it is a LoadBalancer admitting only
    private ranges, the cloud's internal load balancer annotation (GKE, EKS); else none."""
    pulumi_inputs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The Pulumi Outputs the declaration was given (the GCP project, the AWS VPC, ...), by the stand-in
    string the validated declaration holds in their place (:mod:`slonk_infra.declaration.inputs`); empty
    for a plain declaration. Read them through :meth:`pulumi_input`."""

    def pulumi_input(self, value: str | None) -> Any:
        """What a resource input gets for a declaration value: the Output it stands in for, else the value.

        The cloud adapters pass every field that accepts an Output through this, so a resource receives the
        program's Output (a VPC id created in the same program) rather than the stand-in that was validated.
        """
        return self.pulumi_inputs.get(value, value) if value is not None else None

    @property
    def name(self) -> str:
        """Cluster name."""
        return self.declaration.name

    @property
    def namespace(self) -> str:
        """Kubernetes namespace of the Slurm objects."""
        return self.declaration.kubernetes.namespace

    @property
    def claim_storage_class(self) -> str | None:
        """StorageClass of the layer's single-writer claims (controller state, in-cluster NFS export).

        The declaration's ``controller.storageClass``, else the cloud's from the catalog
        (``storage.yaml``: GKE's standard-rwo, EKS's slonk-gp3 the adapter creates); None on a local
        cluster, whose default class serves the claim.
        """
        declared = self.declaration.controller.storage_class
        return declared or load_catalog().storage.block_classes[self.declaration.cloud].name

    def group(self, name: str) -> WorkerGroup:
        """The worker group called ``name``."""
        return next(g for g in self.groups if g.name == name)

    def summary(self) -> dict[str, int]:
        """Counts a person checks first: groups, nodes, GPUs, TPU chips, storage volumes."""
        return {
            "worker_groups": len(self.groups),
            "nodes": sum(g.replicas for g in self.groups),
            "slurm_node_records": sum(g.slurm_nodes for g in self.groups),
            "gpus": sum(g.replicas * g.gres_count for g in self.groups if g.kind == "gpu"),
            "tpu_chips": sum(g.replicas * g.gres_count for g in self.groups if g.kind == "tpu"),
            "tpu_slices": sum(1 for g in self.groups if g.kind == "tpu"),
            "storage_volumes": len(self.declaration.storage),
            "partitions": len(self.partitions),
        }
