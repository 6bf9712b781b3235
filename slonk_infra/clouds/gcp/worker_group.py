"""One GKE worker group as a component: its node pool (GPU VMs or one TPU slice), plus the workload
policy a multi-host tpu7x slice is placed by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from slonk_infra import tokens
from slonk_infra.clouds.common import cloud_effect
from slonk_infra.clouds.gcp.gpu_networks import NodeNetwork
from slonk_infra.plan import WorkerGroup, naming

# Boot disk of a machine the catalog marks hyperdisk_only: pd-balanced cannot attach to it (catalog
# storage.yaml quotes GKE: "For A3 Ultra node pools, you must set the disk type to hyperdisk-balanced").
# GKE would choose it by itself when none is given; pinned so the plan says what the pool boots from.
HYPERDISK_BOOT_DISK = "hyperdisk-balanced"
GPU_LABEL_KEY = "cloud.google.com/gke-accelerator"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# The pool's size, which the operations controller owns after creation (docs/clouds.md, "Pool size").
NODE_COUNT = "nodeCount"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True)
class GcpWorkerGroupArgs:
    """Inputs of one GKE worker group."""

    group: WorkerGroup
    """The planned group (machine or TPU slice, replicas, labels, taints, reservation, placement)."""
    cluster: pulumi.Input[str]
    """GKE cluster id (``projects/P/locations/L/clusters/C``)."""
    project: pulumi.Input[str]
    """GCP project."""
    region: str
    """Cluster region."""
    zone: str
    """Zone of the pool's nodes (GPU and TPU capacity is zonal)."""
    workload_policy: bool = False
    """Place the slice with a workload policy (multi-host slices of generations that need one)."""
    child_prefix: str = ""
    """Prefix of the children's logical names (default: the component's name)."""
    service_account: pulumi.Input[str] | None = None
    """Email of the nodes' IAM service account (None: the project's Compute Engine default)."""
    depends_on: Sequence[pulumi.Resource] = ()
    """What the node pool waits for (the service account's role bindings)."""
    reservation_name: pulumi.Input[str] | None = None
    """The reservation to consume when the program gave its name as a Pulumi Output (None: the planned
    group's ``reservation.name``)."""
    additional_networks: Sequence[NodeNetwork] = ()
    """The VPC and subnet of each NIC beyond the primary, in attachment order (GPUDirect machines)."""
    host_maintenance: bool = True
    """Apply the catalog's host maintenance interval for the machine (``gcp.periodicHostMaintenance``)."""
    operations_owns_size: bool = False
    """The operations controller sizes the pool after creation: Pulumi sets ``node_count`` once and then
    ignores it (GPU and CPU pools; a TPU slice keeps its fixed size)."""


class GcpWorkerGroup(pulumi.ComponentResource):
    """A GPU, CPU or TPU-slice worker group on GKE: one NodePool (+ a ResourcePolicy for tpu7x slices)."""

    node_pool: gcp.container.NodePool
    node_pool_name: pulumi.Output[str]

    def __init__(self, name: str, args: GcpWorkerGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.GCP_WORKER_GROUP, name, None, opts)
        self._args = args
        self._prefix = args.child_prefix or name
        self.node_pool = self._node_pool()
        self.node_pool_name = self.node_pool.name
        self.register_outputs({"nodePoolName": self.node_pool_name})

    def _node_pool(self) -> gcp.container.NodePool:
        group, args = self._args.group, self._args
        placement = self._tpu_placement(group) if group.kind == "tpu" else self._vm_placement(group)
        network = None
        if args.additional_networks:
            # The GPU NICs (and RDMA's host gVNIC), attached to the networks the cluster created for the
            # fabric, in the order the pods' interfaces annotation counts them (eth1, eth2, ...).
            network = gcp.container.NodePoolNetworkConfigArgs(
                additional_node_network_configs=[
                    gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                        network=n.network, subnetwork=n.subnetwork
                    )
                    for n in args.additional_networks
                ]
            )
        ignore = [NODE_COUNT] if args.operations_owns_size and group.kind != "tpu" else None
        return gcp.container.NodePool(
            f"{self._prefix}-pool-{group.name}",
            gcp.container.NodePoolArgs(
                cluster=args.cluster,
                name=naming.node_pool(group.name),
                project=self._args.project,
                location=self._args.region,
                node_locations=[args.zone],
                node_count=group.replicas,
                placement_policy=placement,
                network_config=network,
                management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
                # GPU capacity has no spare VM to surge into (a full reservation, a stocked-out
                # zone): upgrade by replacing one node at a time instead. TPU slices are upgraded
                # as a whole by GKE and keep its default.
                upgrade_settings=(
                    gcp.container.NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=0, max_unavailable=1)
                    if group.kind == "gpu"
                    else None
                ),
                node_config=self._node_config(group),
            ),
            # The pool keeps the group's name, so a replacement must remove the old pool first; for
            # reserved capacity that is also the only order that fits.
            opts=pulumi.ResourceOptions(
                parent=self, delete_before_replace=True, depends_on=list(args.depends_on), ignore_changes=ignore
            ),
        )

    def _node_config(self, group: WorkerGroup) -> gcp.container.NodePoolNodeConfigArgs:
        machine = group.machine
        accelerators = None
        if group.kind == "gpu":
            if machine.accelerator is None or machine.label is None or machine.label.key != GPU_LABEL_KEY:
                raise ValueError(f"{machine.name}: a GKE GPU machine needs a {GPU_LABEL_KEY} label in the catalog")
            # A3/A4 machines come with their GPUs, but the driver setting lives on this block.
            accelerators = [
                gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=machine.label.value,
                    count=machine.accelerator.count,
                    gpu_driver_installation_config=(
                        gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                            gpu_driver_version="LATEST"
                        )
                    ),
                )
            ]
        reservation = None
        if group.reservation is not None:
            name = self._args.reservation_name
            reservation = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key=RESERVATION_KEY,
                values=[name if name is not None else group.reservation.name],
            )
        return gcp.container.NodePoolNodeConfigArgs(
            machine_type=machine.name,
            labels=dict(group.node_labels),
            taints=[
                gcp.container.NodePoolNodeConfigTaintArgs(key=t.key, value=t.value, effect=cloud_effect(t))
                for t in group.taints
            ]
            or None,
            guest_accelerators=accelerators,
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True) if group.kind != "tpu" else None,
            spot=group.spot,
            reservation_affinity=reservation,
            disk_type=HYPERDISK_BOOT_DISK if machine.hyperdisk_only else None,
            # Images, container layers, /tmp and emptyDirs on the machine's Local SSDs instead of the boot
            # disk, where a CUDA image and a job's scratch fill it and DiskPressure evicts the worker.
            ephemeral_storage_local_ssd_config=(
                gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                    local_ssd_count=machine.local_ssd_ephemeral
                )
                if machine.local_ssd_ephemeral
                else None
            ),
            host_maintenance_policy=(
                gcp.container.NodePoolNodeConfigHostMaintenancePolicyArgs(
                    maintenance_interval=machine.host_maintenance_interval
                )
                if machine.host_maintenance_interval and self._args.host_maintenance
                else None
            ),
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            service_account=self._args.service_account,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        )

    def _vm_placement(self, group: WorkerGroup) -> gcp.container.NodePoolPlacementPolicyArgs | None:
        # A reservation fixes where its VMs are; asking for a placement the reservation was not
        # created with makes VM creation fail, so reserved groups take the reservation's placement.
        if group.compact_placement and group.reservation is None:
            return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
        return None

    def _tpu_placement(self, group: WorkerGroup) -> gcp.container.NodePoolPlacementPolicyArgs | None:
        # A single-host slice is one VM: nothing to place, and GKE infers its topology.
        if group.replicas <= 1:
            return None
        if self._args.workload_policy:
            # tpu7x slices are placed by a workload policy. The SDK requires a type next to
            # the policy name, and COMPACT is the only type there is.
            policy = gcp.compute.ResourcePolicy(
                f"{self._prefix}-workload-policy-{group.name}",
                gcp.compute.ResourcePolicyArgs(
                    project=self._args.project,
                    region=self._args.region,
                    workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                        type="HIGH_THROUGHPUT", accelerator_topology=group.tpu_topology
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            return gcp.container.NodePoolPlacementPolicyArgs(
                type="COMPACT", policy_name=policy.name, tpu_topology=group.tpu_topology
            )
        return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=group.tpu_topology)
