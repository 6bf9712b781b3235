"""GKE adapter: a cluster (or an existing one), one node pool per worker group, Filestore volumes.

Per worker group it creates exactly one ``gcp.container.NodePool``; a multi-host slice of a TPU
generation that needs a workload policy (tpu7x) adds one ``gcp.compute.ResourcePolicy``. The rest
is constant: the cluster and its Kubernetes provider (or only the provider for an existing
cluster), the system node pool, and one Filestore instance per ``filestore`` storage entry. Node
pools depend only on the cluster and Filestore on nothing here, so Pulumi creates them in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from slonk_infra import naming, tokens
from slonk_infra.binding import CloudResult, VolumeSource
from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.common import (
    SYSTEM_LABELS,
    SYSTEM_NODES,
    SYSTEM_POOL,
    CloudComponent,
    cloud_effect,
    cloud_storage,
    exec_kubeconfig,
    existing_cluster_provider,
)
from slonk_infra.declaration import GcpSpec, StorageSpec
from slonk_infra.plan import ClusterPlan, WorkerGroup

TOKEN = tokens.GCP_INFRASTRUCTURE
SYSTEM_MACHINE = "n2-standard-8"
# GKE's node labels for where a VM sits in the data centre: reservation block, sub-block
# (on A4X the NVL72 rack) and physical host; broadest first, as Slurm's topology wants them.
TOPOLOGY_LABELS = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
)
# TPU generations whose VMs boot only from Hyperdisk (GKE's default boot disk is pd-balanced).
HYPERDISK_ONLY_TPUS = frozenset({"tpu7x"})
GPU_LABEL_KEY = "cloud.google.com/gke-accelerator"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

FILESTORE_DEFAULT_TIER = "ZONAL"
# Tiers whose instance is regional; every other tier lives in one zone.
FILESTORE_REGIONAL_TIERS = frozenset({"REGIONAL", "ENTERPRISE"})
# Tiers served over NFSv4.1 here (the SDK allows it for these and HIGH_SCALE_SSD).
FILESTORE_NFS41_TIERS = frozenset({"ZONAL", "REGIONAL", "ENTERPRISE"})
FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"

GKE_AUTH_EXEC = {
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "command": "gke-gcloud-auth-plugin",
    "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
    "provideClusterInfo": True,
    "interactiveMode": "IfAvailable",
}


def filestore_share(volume: str) -> str:
    """Filestore file share name of a volume: letters, digits and underscores, at most 16 characters."""
    return volume.replace("-", "_")[:16]


def filestore_location(tier: str, region: str, zone: str | None) -> str:
    """Zone of a zonal Filestore tier, region of a regional one."""
    if tier in FILESTORE_REGIONAL_TIERS:
        return region
    if zone is None:
        raise ValueError(f"Filestore tier {tier} is zonal: set the declaration's zone")
    return zone


class GcpInfrastructure(CloudComponent):
    """GKE cluster, node pools and Filestore for one :class:`ClusterPlan`.

    ``result`` is the :class:`CloudResult` the Slurm layer consumes.
    """

    result: CloudResult

    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, opts)
        decl = plan.declaration
        if decl.cloud != "gcp" or decl.gcp is None or decl.region is None:
            raise ValueError(
                f"GcpInfrastructure needs a gcp declaration with region and gcp settings, got {decl.cloud}"
            )
        self.plan = plan
        self.gcp: GcpSpec = decl.gcp
        self.region: str = decl.region
        self.zone = decl.zone
        self.catalog = load_catalog()

        self.cluster: gcp.container.Cluster | None = None
        cluster_ref: pulumi.Input[str]
        provider: k8s.Provider
        kubeconfig: pulumi.Output[str] | None = None
        if decl.kubernetes.create:
            self.cluster = self._cluster()
            cluster_ref = self.cluster.id
            kubeconfig = self._kubeconfig(self.cluster)
            provider = k8s.Provider(
                self.child_name("k8s"),
                k8s.ProviderArgs(kubeconfig=kubeconfig),
                opts=self.child_opts(),
            )
        else:
            # An existing cluster is addressed by the declaration's name in its region.
            cluster_ref = f"projects/{self.gcp.project}/locations/{self.region}/clusters/{decl.name}"
            provider = existing_cluster_provider(self.child_name("k8s"), decl.kubernetes, self.child_opts())

        self.system_pool = self._system_pool(cluster_ref)
        self.node_pools: dict[str, gcp.container.NodePool] = {
            g.name: self._worker_pool(g, cluster_ref) for g in plan.groups
        }
        self.filestores: dict[str, gcp.filestore.Instance] = {}
        volumes = {vol.name: self._filestore(vol) for vol in cloud_storage(plan, ("filestore",))}

        self.result = CloudResult(
            provider=provider,
            volumes=volumes,
            pin_to_pools=True,
            topology_labels=TOPOLOGY_LABELS,
            node_pools=dict(self.node_pools),
            node_pool_names={g: p.name for g, p in self.node_pools.items()},
            kubeconfig=kubeconfig,
        )
        self.register_outputs(
            {
                "cluster": self.cluster.name if self.cluster else decl.name,
                "nodePools": {g: p.name for g, p in self.node_pools.items()},
                "filestores": {v: i.name for v, i in self.filestores.items()},
            }
        )

    # -- cluster ---------------------------------------------------------------------------------
    def _cluster(self) -> gcp.container.Cluster:
        decl = self.plan.declaration
        gpu_nics = any(g.machine.gpu_nics > 0 for g in self.plan.groups)
        return gcp.container.Cluster(
            self.child_name("cluster"),
            gcp.container.ClusterArgs(
                name=decl.name,
                project=self.gcp.project,
                location=self.region,
                node_locations=[self.zone] if self.zone else None,
                network=self.gcp.network,
                subnetwork=self.gcp.subnetwork,
                # Node pools are separate resources; the default pool exists only because the API
                # requires one at creation.
                remove_default_node_pool=True,
                initial_node_count=1,
                deletion_protection=True,
                min_master_version=decl.kubernetes.version,
                release_channel=gcp.container.ClusterReleaseChannelArgs(channel=self.gcp.release_channel),
                workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                    workload_pool=f"{self.gcp.project}.svc.id.goog"
                ),
                datapath_provider="ADVANCED_DATAPATH",
                # GPU NICs beyond the first are extra VPC networks attached to the node, which GKE
                # only allows on a multi-network cluster.
                enable_multi_networking=True if gpu_nics else None,
                networking_mode="VPC_NATIVE",
                ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(),
                addons_config=gcp.container.ClusterAddonsConfigArgs(
                    gcp_filestore_csi_driver_config=gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(
                        enabled=True
                    ),
                    gce_persistent_disk_csi_driver_config=(
                        gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs(enabled=True)
                    ),
                ),
            ),
            opts=self.child_opts(),
        )

    def _kubeconfig(self, cluster: gcp.container.Cluster) -> pulumi.Output[str]:
        def render(args: list[Any]) -> str:
            name, endpoint, auth = args
            ca = _field(auth, "cluster_ca_certificate", "clusterCaCertificate")
            return exec_kubeconfig(
                f"gke_{self.gcp.project}_{self.region}_{name}", f"https://{endpoint}", ca, GKE_AUTH_EXEC
            )

        return pulumi.Output.all(cluster.name, cluster.endpoint, cluster.master_auth).apply(render)

    # -- node pools ------------------------------------------------------------------------------
    def _pool_zone(self) -> list[str]:
        if self.zone is None:
            raise ValueError("node pools need the declaration's zone (GPU and TPU capacity is zonal)")
        return [self.zone]

    def _system_pool(self, cluster: pulumi.Input[str]) -> gcp.container.NodePool:
        return gcp.container.NodePool(
            self.child_name("system"),
            gcp.container.NodePoolArgs(
                cluster=cluster,
                name=SYSTEM_POOL,
                project=self.gcp.project,
                location=self.region,
                node_locations=self._pool_zone(),
                node_count=SYSTEM_NODES,
                management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=SYSTEM_MACHINE,
                    labels=dict(SYSTEM_LABELS),
                    gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA"
                    ),
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ),
            ),
            opts=self.child_opts(delete_before_replace=True),
        )

    def _worker_pool(self, group: WorkerGroup, cluster: pulumi.Input[str]) -> gcp.container.NodePool:
        placement = self._tpu_placement(group) if group.kind == "tpu" else self._vm_placement(group)
        network = None
        if group.kind == "gpu" and group.machine.gpu_nics > 0:
            # GKE creates and attaches the GPU NIC networks itself for the machine's profile.
            network = gcp.container.NodePoolNetworkConfigArgs(accelerator_network_profile="auto")
        return gcp.container.NodePool(
            self.child_name("pool", group.name),
            gcp.container.NodePoolArgs(
                cluster=cluster,
                name=naming.node_pool(group.name),
                project=self.gcp.project,
                location=self.region,
                node_locations=self._pool_zone(),
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
            opts=self.child_opts(delete_before_replace=True),
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
            reservation = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key=RESERVATION_KEY,
                values=[group.reservation.name],
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
            disk_type="hyperdisk-balanced" if group.tpu_generation in HYPERDISK_ONLY_TPUS else None,
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        )

    def _vm_placement(self, group: WorkerGroup) -> gcp.container.NodePoolPlacementPolicyArgs | None:
        # A reservation fixes where its VMs are; asking for a placement the reservation was not
        # created with makes VM creation fail, so reserved groups take the reservation's placement.
        if group.compact_placement and group.reservation is None:
            return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
        return None

    def _needs_workload_policy(self, group: WorkerGroup) -> bool:
        gen = self.catalog.tpus.get(group.tpu_generation or "")
        return gen is not None and gen.workload_policy and group.replicas > 1

    def _tpu_placement(self, group: WorkerGroup) -> gcp.container.NodePoolPlacementPolicyArgs | None:
        # A single-host slice is one VM: nothing to place, and GKE infers its topology.
        if group.replicas <= 1:
            return None
        if self._needs_workload_policy(group):
            # tpu7x slices are placed by a workload policy. The SDK requires a type next to
            # the policy name, and COMPACT is the only type there is.
            policy = gcp.compute.ResourcePolicy(
                self.child_name("workload-policy", group.name),
                gcp.compute.ResourcePolicyArgs(
                    project=self.gcp.project,
                    region=self.region,
                    workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                        type="HIGH_THROUGHPUT", accelerator_topology=group.tpu_topology
                    ),
                ),
                opts=self.child_opts(),
            )
            return gcp.container.NodePoolPlacementPolicyArgs(
                type="COMPACT", policy_name=policy.name, tpu_topology=group.tpu_topology
            )
        return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=group.tpu_topology)

    # -- storage ---------------------------------------------------------------------------------
    def _filestore(self, vol: StorageSpec) -> VolumeSource:
        tier = (vol.tier or FILESTORE_DEFAULT_TIER).upper()
        location = filestore_location(tier, self.region, self.zone)
        share = filestore_share(vol.name)
        nfs41 = tier in FILESTORE_NFS41_TIERS
        instance = gcp.filestore.Instance(
            self.child_name("filestore", vol.name),
            gcp.filestore.InstanceArgs(
                name=f"{self.plan.declaration.name}-{vol.name}",
                project=self.gcp.project,
                location=location,
                tier=tier,
                protocol="NFS_V4_1" if nfs41 else None,
                file_shares=gcp.filestore.InstanceFileSharesArgs(name=share, capacity_gb=vol.capacity_gib),
                networks=[gcp.filestore.InstanceNetworkArgs(network=self.gcp.network, modes=["MODE_IPV4"])],
                deletion_protection_enabled=True,
                deletion_protection_reason="Shared Slurm filesystem; managed by slonk-infra",
            ),
            opts=self.stateful_opts(),
        )
        self.filestores[vol.name] = instance
        attributes: dict[str, pulumi.Input[str]] = {
            "ip": instance.networks.apply(_first_ip),
            "volume": share,
        }
        if nfs41:
            # The CSI driver mounts NFSv3 unless the volume says otherwise.
            attributes["fileProtocol"] = "NFS_V4_1"
        pv_source = {
            "csi": {
                "driver": FILESTORE_CSI_DRIVER,
                "volumeHandle": pulumi.Output.concat("modeInstance/", location, "/", instance.name, "/", share),
                "volumeAttributes": attributes,
            }
        }
        return VolumeSource(name=vol.name, pv_source=pv_source, depends_on=(instance,))


def _field(value: Any, name: str, wire: str) -> Any:
    """A field of an SDK output object, or of the plain dict a mock or older SDK hands back."""
    if hasattr(type(value), name):
        return getattr(value, name)
    return value.get(name, value.get(wire))


def _first_ip(networks: Sequence[Any] | None) -> str:
    """First IPv4 address of a Filestore instance (its only one, with one network)."""
    if not networks:
        raise ValueError("Filestore instance has no network")
    addresses = _field(networks[0], "ip_addresses", "ipAddresses")
    if not addresses:
        raise ValueError("Filestore instance has no IP address")
    return str(addresses[0])
