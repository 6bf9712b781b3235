"""GKE adapter: a cluster (or an existing one), one node pool per worker group, Filestore volumes.

Per worker group it creates exactly one ``gcp.container.NodePool``; a multi-host slice of a TPU
generation that needs a workload policy (tpu7x) adds one ``gcp.compute.ResourcePolicy``. The rest
is constant: the cluster and its Kubernetes provider (or only the provider for an existing
cluster), the nodes' own IAM service account with its least-privilege role bindings (catalog
``platform.yaml``; never the project's broad Compute Engine default account), the system node
pool, and one Filestore instance per ``filestore`` storage entry. Node pools depend only on the
cluster and the role bindings, and Filestore on nothing here, so Pulumi creates them in parallel.
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
