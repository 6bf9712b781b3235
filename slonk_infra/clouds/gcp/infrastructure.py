"""GKE adapter: a cluster (or an existing one), one node pool per worker group, Filestore volumes.

Per worker group it creates exactly one ``gcp.container.NodePool``; a multi-host slice of a TPU
generation that needs a workload policy (tpu7x) adds one ``gcp.compute.ResourcePolicy``. The rest
is constant: the cluster and its Kubernetes provider (or only the provider for an existing
cluster), the nodes' own IAM service account with its least-privilege role bindings (catalog
``platform.yaml``; never the project's broad Compute Engine default account), the system node
pool, and one Filestore instance per ``filestore`` storage entry. Per GPU fabric in the plan
(GPUDirect-TCPXO, -RDMA) come its NIC networks and their GKE objects (:mod:`.gpu_networks`) and its
host installer DaemonSets (:mod:`.gpu_installers`); with ``operations.enabled``, the controller's
Google identity (:mod:`.operations`). Node pools depend only on the cluster, the role bindings and
their NIC networks, and Filestore on nothing here, so Pulumi creates them in parallel.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from slonk_infra import tokens
from slonk_infra.binding import CloudResult
from slonk_infra.catalog import load_catalog
from slonk_infra.clouds.common import (
    SYSTEM_LABELS,
    SYSTEM_POOL,
    CloudComponent,
    cloud_storage,
    concat,
    exec_kubeconfig,
    existing_cluster_provider,
)
from slonk_infra.clouds.gcp.accounting_db import CloudSqlDatabase, cloud_sql_database
from slonk_infra.clouds.gcp.gpu_installers import create_installers
from slonk_infra.clouds.gcp.gpu_networks import GpuNetworks, NodeNetwork, cluster_nics, machine_nics
from slonk_infra.clouds.gcp.operations import OperationsIdentity, operations_identity
from slonk_infra.clouds.gcp.storage import GcpSharedStorage, GcpSharedStorageArgs, field_of
from slonk_infra.clouds.gcp.worker_group import CLOUD_PLATFORM_SCOPE, GcpWorkerGroup, GcpWorkerGroupArgs
from slonk_infra.declaration.model import GcpClusterDeclaration, GcpSpec
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
# The recurring maintenance window's first day (a Saturday); GKE repeats it by the RRULE, so only the
# time of day and the length matter. A fixed date keeps the rendered input stable between deploys.
MAINTENANCE_ANCHOR = "2026-01-03"
# The upgrade hold: GKE maintenance exclusion scope and end (until the minor's end of support), as Cluster
# Toolkit's A4/A4X GKE blueprints set it (examples/gke-a4/gke-a4.yaml, maintenance_exclusions).
HOLD_NAME = "slonk-hold-node-upgrades"
HOLD_SCOPE = "NO_MINOR_OR_NODE_UPGRADES"
HOLD_END = "UNTIL_END_OF_SUPPORT"
HOLD_SINCE = "2026-01-01T00:00:00Z"
GKE_AUTH_EXEC = {
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "command": "gke-gcloud-auth-plugin",
    "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
    "provideClusterInfo": True,
    "interactiveMode": "IfAvailable",
}


def node_account_id(cluster: str) -> str:
    """IAM account id of the cluster's nodes: 6-30 characters, letters, digits and dashes."""
    return f"{cluster[:24].rstrip('-')}-nodes"


class GcpInfrastructure(CloudComponent):
    """GKE cluster, node pools and Filestore for one :class:`ClusterPlan`.

    ``result`` is the :class:`CloudResult` the Slurm layer consumes.
    """

    result: CloudResult

    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, opts)
        decl = plan.declaration
        # build_plan made the declaration a GcpClusterDeclaration, and the gcp target's rules require
        # region and zone; a plan for another target fails here.
        assert isinstance(decl, GcpClusterDeclaration) and decl.region and decl.zone, f"not a gcp plan: {decl.cloud}"
        self.plan = plan
        self.gcp: GcpSpec = decl.gcp
        # What resources receive: the program's Output where the declaration was given one.
        self.project: pulumi.Input[str] = plan.pulumi_input(self.gcp.project)
        self.network: pulumi.Input[str] = plan.pulumi_input(self.gcp.network)
        self.region: str = decl.region
        self.zone: str = decl.zone
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
            cluster_ref = concat("projects/", self.project, f"/locations/{self.region}/clusters/{decl.name}")
            provider = existing_cluster_provider(self.child_name("k8s"), plan, self.child_opts())

        self.node_account, self.node_roles = self._node_identity()
        self.system_pool = self._system_pool(cluster_ref)
        zone = self._pool_zone()[0]
        # GPU NIC networks (GPUDirect-TCPXO/RDMA): the VPCs and subnets now, their GKE objects below.
        nics = cluster_nics(plan, self.catalog, self.gcp.gpu_network_range, zone)
        self.gpu_networks = GpuNetworks(
            self._name, decl.name, nics, self.project, self.region, self.gcp.gpu_network_range, self.child_opts()
        )
        operations = decl.operations.owns_pool_sizes
        self.worker_groups: dict[str, GcpWorkerGroup] = {
            g.name: GcpWorkerGroup(
                self.child_name("group", g.name),
                GcpWorkerGroupArgs(
                    group=g,
                    cluster=cluster_ref,
                    project=self.project,
                    region=self.region,
                    zone=zone,
                    workload_policy=self._needs_workload_policy(g),
                    child_prefix=self._name,
                    service_account=self.node_account.email,
                    depends_on=self.node_roles,
                    reservation_name=plan.pulumi_input(g.reservation.name) if g.reservation else None,
                    additional_networks=self._node_networks(g),
                    operations_owns_size=operations,
                    host_maintenance=self.gcp.periodic_host_maintenance,
                ),
                self.child_opts(),
            )
            for g in plan.groups
        }
        self.node_pools: dict[str, gcp.container.NodePool] = {n: w.node_pool for n, w in self.worker_groups.items()}
        self.storage: dict[str, GcpSharedStorage] = {
            vol.name: GcpSharedStorage(
                self.child_name("storage", vol.name),
                GcpSharedStorageArgs(
                    volume=vol,
                    cluster_name=decl.name,
                    project=self.project,
                    region=self.region,
                    zone=self.zone,
                    network=self.network,
                    child_prefix=self._name,
                ),
                self.child_opts(),
            )
            for vol in cloud_storage(plan)
        }
        self.filestores: dict[str, gcp.filestore.Instance] = {n: c.instance for n, c in self.storage.items()}
        volumes = {n: c.source for n, c in self.storage.items()}

        # The host side of GPUDirect, through the cluster's own Kubernetes provider.
        self.gpu_network_objects = self.gpu_networks.kubernetes_objects(provider, self)
        self.installers = create_installers(self._name, plan, self.catalog, provider, self)
        self.operations: OperationsIdentity | None = None
        if operations:
            # The workload identity pool (<project>.svc.id.goog) exists only once a cluster with Workload
            # Identity does: on a new project a binding made alongside the cluster is refused ("Identity
            # Pool does not exist"), so the identity waits for the cluster this program creates.
            self.operations = operations_identity(
                self._name,
                decl.name,
                self.project,
                decl.kubernetes.namespace,
                self.child_opts(depends_on=[self.cluster] if self.cluster else []),
            )

        # slurmdbd's database with slurm.accounting.database.kind: cloud (:mod:`.accounting_db`).
        accounting = decl.slurm.accounting
        self.accounting_db: CloudSqlDatabase | None = None
        if accounting is not None and accounting.database.kind == "cloud":
            self.accounting_db = cloud_sql_database(
                self,
                decl.name,
                accounting.database,
                project=self.project,
                network=self.network,
                region=self.region,
                zone=self.zone,
            )

        self.result = CloudResult(
            provider=provider,
            volumes=volumes,
            pin_to_pools=True,
            topology_labels=TOPOLOGY_LABELS,
            node_pools=dict(self.node_pools),
            node_pool_names={g: p.name for g, p in self.node_pools.items()},
            kubeconfig=kubeconfig,
            operations_account_annotations=self.operations.annotations if self.operations else {},
            system_nodes=(self.system_pool,),
            accounting_database=self.accounting_db.connection if self.accounting_db else None,
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
                project=self.project,
                location=self.region,
                node_locations=[self.zone] if self.zone else None,
                network=self.network,
                subnetwork=self.plan.pulumi_input(self.gcp.subnetwork),
                # Node pools are separate resources; the default pool exists only because the API
                # requires one at creation.
                remove_default_node_pool=True,
                initial_node_count=1,
                deletion_protection=True,
                min_master_version=decl.kubernetes.version,
                release_channel=gcp.container.ClusterReleaseChannelArgs(channel=self.gcp.release_channel),
                workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                    workload_pool=concat(self.project, ".svc.id.goog")
                ),
                datapath_provider="ADVANCED_DATAPATH",
                # GPU NICs beyond the first are extra VPC networks attached to the node, which GKE
                # only allows on a multi-network cluster.
                enable_multi_networking=True if gpu_nics else None,
                networking_mode="VPC_NATIVE",
                ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(),
                master_authorized_networks_config=self._authorized_networks(),
                maintenance_policy=self._maintenance_policy(),
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

    def _authorized_networks(self) -> gcp.container.ClusterMasterAuthorizedNetworksConfigArgs | None:
        """Who may reach the control plane's public endpoint: ``kubernetes.authorizedNetworks`` (None: anyone)."""
        cidrs = self.plan.declaration.kubernetes.authorized_networks
        if cidrs is None:
            return None
        return gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
            cidr_blocks=[
                gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=cidr, display_name=f"kubernetes.authorizedNetworks[{i}]"
                )
                for i, cidr in enumerate(cidrs)
            ]
        )

    def _maintenance_policy(self) -> gcp.container.ClusterMaintenancePolicyArgs:
        """The weekly window ``gcp.maintenance`` names and, by default, a hold on minor and node upgrades.

        Node pools on a release channel cannot turn auto-upgrade off, so the hold is a maintenance
        exclusion: no node (GPU, TPU or system) is upgraded under a running job, while the control plane
        still takes patch upgrades inside the window.
        """
        m = self.gcp.maintenance
        hour, minute = (int(x) for x in m.window_start.split(":"))
        start = f"{MAINTENANCE_ANCHOR}T{m.window_start}:00Z"
        end_minutes = hour * 60 + minute + m.window_hours * 60
        day = 3 + end_minutes // (24 * 60)  # the anchor is the 3rd; a window may end the next day
        end = f"{MAINTENANCE_ANCHOR[:-2]}{day:02d}T{end_minutes % 1440 // 60:02d}:{end_minutes % 60:02d}:00Z"
        days = ",".join(dict.fromkeys(m.days))
        exclusions = None
        if m.hold_node_upgrades:
            exclusions = [
                gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                    exclusion_name=HOLD_NAME,
                    start_time=HOLD_SINCE,
                    exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope=HOLD_SCOPE, end_time_behavior=HOLD_END
                    ),
                )
            ]
        return gcp.container.ClusterMaintenancePolicyArgs(
            recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                start_time=start, end_time=end, recurrence=f"FREQ=WEEKLY;BYDAY={days}"
            ),
            maintenance_exclusions=exclusions,
        )

    def _kubeconfig(self, cluster: gcp.container.Cluster) -> pulumi.Output[str]:
        def render(args: list[Any]) -> str:
            name, endpoint, auth, project = args
            ca = field_of(auth, "cluster_ca_certificate", "clusterCaCertificate")
            return exec_kubeconfig(f"gke_{project}_{self.region}_{name}", f"https://{endpoint}", ca, GKE_AUTH_EXEC)

        return pulumi.Output.all(cluster.name, cluster.endpoint, cluster.master_auth, self.project).apply(render)

    # -- node identity ---------------------------------------------------------------------------
    def _node_identity(self) -> tuple[gcp.serviceaccount.Account, list[pulumi.Resource]]:
        """The nodes' IAM service account and its project role bindings (logging, monitoring, image pulls)."""
        platform = self.catalog.platform.clouds["gcp"]
        account = gcp.serviceaccount.Account(
            self.child_name("nodes"),
            gcp.serviceaccount.AccountArgs(
                account_id=node_account_id(self.plan.declaration.name),
                project=self.project,
                display_name=f"slonk-infra {self.plan.name} nodes",
            ),
            opts=self.child_opts(),
        )
        bindings: list[pulumi.Resource] = [
            gcp.projects.IAMMember(
                self.child_name("nodes", role.rsplit("/", 1)[-1]),
                gcp.projects.IAMMemberArgs(project=self.project, role=role, member=account.member),
                opts=self.child_opts(),
            )
            for role in platform.node_service_account_roles
        ]
        return account, bindings

    # -- node pools ------------------------------------------------------------------------------
    def _pool_zone(self) -> list[str]:
        return [self.zone]

    def _node_networks(self, group: WorkerGroup) -> list[NodeNetwork]:
        """The networks of the group's NICs beyond the primary (GPUDirect machines), in attachment order."""
        fabric = self.catalog.fabric_of(group.machine) if group.kind == "gpu" else None
        nics = self.gpu_networks.nics.get(fabric.name, []) if fabric is not None else []
        return [self.gpu_networks.nodes[n.network] for n in machine_nics(group.machine, nics, self.catalog)]

    def _needs_workload_policy(self, group: WorkerGroup) -> bool:
        gen = self.catalog.tpus.get(group.tpu_generation or "")
        return gen is not None and gen.workload_policy and group.replicas > 1

    def _system_pool(self, cluster: pulumi.Input[str]) -> gcp.container.NodePool:
        return gcp.container.NodePool(
            self.child_name("system"),
            gcp.container.NodePoolArgs(
                cluster=cluster,
                name=SYSTEM_POOL,
                project=self.project,
                location=self.region,
                node_locations=self._pool_zone(),
                node_count=self.plan.declaration.kubernetes.system_nodes,
                management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=SYSTEM_MACHINE,
                    labels=dict(SYSTEM_LABELS),
                    gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA"
                    ),
                    service_account=self.node_account.email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ),
            ),
            opts=self.child_opts(delete_before_replace=True, depends_on=self.node_roles),
        )
