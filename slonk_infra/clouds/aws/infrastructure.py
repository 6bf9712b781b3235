"""EKS adapter: a cluster (or an existing one), one worker-group component per worker group, EFS and FSx.

Per worker group, one :class:`~slonk_infra.clouds.aws.worker_group.AwsWorkerGroup`:

- CPU group: one ``aws.eks.NodeGroup``.
- GPU group: one ``aws.ec2.LaunchTemplate`` and one ``aws.eks.NodeGroup``, plus one
  ``aws.ec2.PlacementGroup`` when the group wants compact placement and consumes no reservation.

Everything else is constant for a declaration: IAM roles, the cluster, access entries per admin,
add-ons (the EBS CSI driver with its Pod Identity role among them, the node monitoring agent with GPU
groups), the device-plugin Helm releases, the block StorageClass, the system node group, one EFA security
group, one storage security group, per storage entry one
:class:`~slonk_infra.clouds.aws.storage.AwsSharedStorage` (a filesystem, plus one EFS mount target
per subnet), the operations controller's role, policy and Pod Identity association when operations are
enabled, and one load-balancer role tag per declared subnet when the login Service is a LoadBalancer.
Node groups, filesystems and add-ons depend only on the cluster and IAM, so they are created in
parallel.

GPU groups and FSx go to the declared subnet in ``zone`` (:mod:`slonk_infra.clouds.aws.subnets`, a
deploy-time lookup), or the first subnet when no zone is declared.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from slonk_infra import tokens
from slonk_infra.binding import CloudResult
from slonk_infra.clouds.aws import addons, operations, subnets
from slonk_infra.clouds.aws.accounting_db import RdsDatabase, rds_database
from slonk_infra.clouds.aws.storage import AwsSharedStorage, AwsSharedStorageArgs
from slonk_infra.clouds.aws.target import provider_region_problems
from slonk_infra.clouds.aws.worker_group import (
    CPU_AMI,
    CPU_DISK_GIB,
    AwsWorkerGroup,
    AwsWorkerGroupArgs,
    efa_interfaces,
)
from slonk_infra.clouds.common import (
    SYSTEM_LABELS,
    SYSTEM_POOL,
    CloudComponent,
    cloud_storage,
    exec_kubeconfig,
    existing_cluster_provider,
)
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.model import AwsClusterDeclaration, AwsSpec, StorageSpec
from slonk_infra.plan import ClusterPlan

TOKEN = tokens.AWS_INFRASTRUCTURE
SYSTEM_INSTANCE = "m7i.2xlarge"
# EC2 instance topology, broadest layer first, as EKS labels the nodes of supported instance types.
TOPOLOGY_LABELS = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
)
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
CLUSTER_ROLE_POLICIES = ("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",)
NODE_ROLE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
)


def aws_declaration(plan: ClusterPlan) -> AwsClusterDeclaration:
    """The plan's declaration, refused before anything registers when the stack's ``aws:region`` says
    another region (:func:`~slonk_infra.clouds.aws.target.provider_region_problems`)."""
    decl = plan.declaration
    # build_plan made the declaration an AwsClusterDeclaration, and the aws target's rules require a
    # region; a plan for another target fails here.
    assert isinstance(decl, AwsClusterDeclaration) and decl.region, f"not an aws plan: {decl.cloud}"
    problems = provider_region_problems(decl, {"aws:region": pulumi.Config("aws").get("region")})
    if problems:
        raise DeclarationError(problems)
    return decl


def _principal_slug(arn: str) -> str:
    tail = re.sub(r"[^a-z0-9-]+", "-", arn.rsplit("/", 1)[-1].lower()).strip("-")[:24] or "principal"
    return f"{tail}-{hashlib.sha256(arn.encode()).hexdigest()[:6]}"


def _assume_role(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": service}, "Action": ["sts:AssumeRole", "sts:TagSession"]}
            ],
        }
    )


class AwsInfrastructure(CloudComponent):
    """EKS cluster, node groups, EFA networking, EFS and FSx for one :class:`ClusterPlan`.

    ``result`` is the :class:`CloudResult` the Slurm layer consumes.
    """

    result: CloudResult

    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        decl = aws_declaration(plan)
        super().__init__(TOKEN, name, opts)
        self.plan = plan
        self.aws: AwsSpec = decl.aws
        self.region: str = decl.region or ""  # aws_declaration asserted it is set
        # What resources receive: the program's Outputs where the declaration was given them.
        self.vpc_id: pulumi.Input[str] = plan.pulumi_input(self.aws.vpc_id)
        self.subnets: list[pulumi.Input[str]] = [plan.pulumi_input(s) for s in self.aws.subnet_ids]
        self.gpu_groups = [g for g in plan.groups if g.kind == "gpu"]
        self.efa_groups = [g for g in self.gpu_groups if efa_interfaces(g) > 0]
        storage = cloud_storage(plan)
        self.operations = decl.operations.owns_pool_sizes
        # The subnet of GPU groups and FSx: the declared zone's, asked of EC2 (None: the first subnet).
        self.zone_subnet: pulumi.Output[str] | None = None
        if decl.zone and (self.gpu_groups or any(v.kind == "fsx-lustre" for v in storage)):
            self.zone_subnet = subnets.zone_subnet(decl.zone, self.subnets, pulumi.InvokeOutputOptions(parent=self))

        node_role_arn, node_role_deps = self._node_role()
        self.cluster: aws.eks.Cluster | None = None
        cluster_name: pulumi.Input[str]
        cluster_sg: pulumi.Input[str]
        provider: k8s.Provider
        kubeconfig: pulumi.Output[str] | None = None
        if decl.kubernetes.create:
            self.cluster = self._cluster()
            cluster_name = self.cluster.name
            cluster_sg = self.cluster.vpc_config.apply(lambda v: str(v.cluster_security_group_id))
            admins = self._admins(self.cluster)
            kubeconfig = self._kubeconfig(self.cluster)
            provider = k8s.Provider(
                self.child_name("k8s"),
                k8s.ProviderArgs(kubeconfig=kubeconfig),
                # The provider's identity is authorised through these entries, not at creation.
                opts=self.child_opts(depends_on=admins),
            )
        else:
            cluster_name = decl.name
            existing = aws.eks.get_cluster_output(name=decl.name, opts=pulumi.InvokeOutputOptions(parent=self))
            cluster_sg = existing.vpc_config.apply(lambda v: str(v.cluster_security_group_id))
            provider = existing_cluster_provider(self.child_name("k8s"), plan, self.child_opts())

        efa_sg = self._efa_security_group() if self.efa_groups else None
        self.system_group = self._system_group(
            cluster_name, node_role_arn, self.child_opts(delete_before_replace=True, depends_on=node_role_deps)
        )
        self.worker_groups: dict[str, AwsWorkerGroup] = {
            g.name: AwsWorkerGroup(
                self.child_name("group", g.name),
                AwsWorkerGroupArgs(
                    group=g,
                    cluster_name=cluster_name,
                    node_role_arn=node_role_arn,
                    subnet_ids=self.subnets,
                    zone_subnet_id=self.zone_subnet,
                    operations=self.operations,
                    cluster_security_group=cluster_sg,
                    efa_security_group=efa_sg.id if efa_sg is not None else None,
                    tag_prefix=self.plan.name,
                    child_prefix=self._name,
                    depends_on=node_role_deps,
                    reservation_name=plan.pulumi_input(g.reservation.name) if g.reservation else None,
                ),
                self.child_opts(),
            )
            for g in plan.groups
        }
        self.node_groups: dict[str, aws.eks.NodeGroup] = {n: w.node_group for n, w in self.worker_groups.items()}
        self.launch_templates: dict[str, aws.ec2.LaunchTemplate] = {
            n: w.launch_template for n, w in self.worker_groups.items() if w.launch_template is not None
        }
        self.placement_groups: dict[str, aws.ec2.PlacementGroup] = {
            n: w.placement_group for n, w in self.worker_groups.items() if w.placement_group is not None
        }
        installed = self._addons(self.cluster, storage, provider) if self.cluster is not None else []
        # On an existing cluster the class still needs the EBS CSI driver, which that cluster owns.
        self.storage_class = addons.block_storage_class(self, provider, installed)

        self.storage = self._shared_storage(storage)
        self.filesystems: dict[str, pulumi.CustomResource] = {n: c.filesystem for n, c in self.storage.items()}
        volumes = {n: c.source for n, c in self.storage.items()}

        self.operations_role = self._operations_identity(cluster_name) if self.operations else None
        self.subnet_tags = self._subnet_tags() if decl.login.service_type == "LoadBalancer" else []

        self.accounting_db = self._accounting_database(cluster_sg)

        self.result = CloudResult(
            provider=provider,
            volumes=volumes,
            pin_to_pools=True,
            topology_labels=TOPOLOGY_LABELS,
            node_pools=dict(self.node_groups),
            node_pool_names={g: ng.node_group_name for g, ng in self.node_groups.items()},
            kubeconfig=kubeconfig,
            system_nodes=(self.system_group,),
            accounting_database=self.accounting_db.connection if self.accounting_db else None,
        )
        self.register_outputs(
            {
                "cluster": cluster_name,
                "nodeGroups": {g: ng.node_group_name for g, ng in self.node_groups.items()},
                "filesystems": {v: fs.id for v, fs in self.filesystems.items()},
            }
        )

    def _accounting_database(self, cluster_sg: pulumi.Input[str]) -> RdsDatabase | None:
        """slurmdbd's RDS database with ``slurm.accounting.database.kind: cloud`` (:mod:`.accounting_db`)."""
        decl = self.plan.declaration
        accounting = decl.slurm.accounting
        if accounting is None or accounting.database.kind != "cloud":
            return None
        return rds_database(
            self,
            decl.name,
            accounting.database,
            vpc_id=self.vpc_id,
            subnets=self.subnets,
            cluster_security_group=cluster_sg,
        )

    # -- IAM and cluster -------------------------------------------------------------------------
    def _role(self, label: str, service: str, policies: Sequence[str]) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        role = aws.iam.Role(
            self.child_name(label),
            aws.iam.RoleArgs(
                assume_role_policy=_assume_role(service),
                description=f"slonk-infra {self.plan.name}: {label}",
            ),
            opts=self.child_opts(),
        )
        attachments: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                self.child_name(label, policy.rsplit("/", 1)[-1]),
                aws.iam.RolePolicyAttachmentArgs(role=role.name, policy_arn=policy),
                opts=self.child_opts(),
            )
            for policy in policies
        ]
        return role, attachments

    def _node_role(self) -> tuple[pulumi.Input[str], list[pulumi.Resource]]:
        if self.aws.node_role_arn:
            return self.plan.pulumi_input(self.aws.node_role_arn), []
        role, attachments = self._role("node-role", "ec2.amazonaws.com", NODE_ROLE_POLICIES)
        # Nodes that boot before their role may pull images and join never become Ready.
        return role.arn, attachments

    def _cluster(self) -> aws.eks.Cluster:
        decl = self.plan.declaration
        role, attachments = self._role("cluster-role", "eks.amazonaws.com", CLUSTER_ROLE_POLICIES)
        return aws.eks.Cluster(
            self.child_name("cluster"),
            aws.eks.ClusterArgs(
                name=decl.name,
                role_arn=role.arn,
                version=decl.kubernetes.version,
                # Nodes and pods reach the API server inside the VPC; the public endpoint admits only the
                # declared networks (None: EKS's default, the whole internet; the plan requires the field
                # when the cluster is created).
                vpc_config=aws.eks.ClusterVpcConfigArgs(
                    subnet_ids=self.subnets,
                    endpoint_private_access=True,
                    endpoint_public_access=True,
                    public_access_cidrs=(
                        list(decl.kubernetes.authorized_networks)
                        if decl.kubernetes.authorized_networks is not None
                        else None
                    ),
                ),
                access_config=aws.eks.ClusterAccessConfigArgs(
                    authentication_mode="API", bootstrap_cluster_creator_admin_permissions=False
                ),
                deletion_protection=True,
            ),
            opts=self.child_opts(depends_on=attachments),
        )

    def _admins(self, cluster: aws.eks.Cluster) -> list[pulumi.Resource]:
        # An empty admin list is one of the plan's warnings (slonk_infra.plan.lint), logged by Cluster.
        done: list[pulumi.Resource] = []
        for arn in self.aws.admin_role_arns:
            slug = _principal_slug(arn)
            entry = aws.eks.AccessEntry(
                self.child_name("admin", slug),
                aws.eks.AccessEntryArgs(cluster_name=cluster.name, principal_arn=arn, type="STANDARD"),
                opts=self.child_opts(),
            )
            done.append(
                aws.eks.AccessPolicyAssociation(
                    self.child_name("admin", slug),
                    aws.eks.AccessPolicyAssociationArgs(
                        cluster_name=cluster.name,
                        principal_arn=entry.principal_arn,
                        policy_arn=CLUSTER_ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    ),
                    opts=self.child_opts(),
                )
            )
        return done

    def _kubeconfig(self, cluster: aws.eks.Cluster) -> pulumi.Output[str]:
        def render(args: list[Any]) -> str:
            name, endpoint, authority = args
            ca = authority.data if hasattr(type(authority), "data") else authority["data"]
            exec_config = {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", name, "--region", self.region, "--output", "json"],
                "interactiveMode": "IfAvailable",
            }
            return exec_kubeconfig(f"eks_{self.region}_{name}", endpoint, ca, exec_config)

        return pulumi.Output.all(cluster.name, cluster.endpoint, cluster.certificate_authority).apply(render)

    def _subnet_tags(self) -> list[aws.ec2.Tag]:
        """Load-balancer role tags for the login Service: internal-elb on the private subnets, elb on the public."""
        public = [self.plan.pulumi_input(s) for s in self.aws.public_subnet_ids]
        return subnets.role_tags(self._name, self.subnets, public, self.child_opts())

    def _operations_identity(self, cluster_name: pulumi.Input[str]) -> aws.iam.Role:
        """The operations controller's role, its inline policy and its Pod Identity association
        (:mod:`slonk_infra.clouds.aws.operations`)."""
        role = aws.iam.Role(
            self.child_name("ops-role"),
            aws.iam.RoleArgs(
                assume_role_policy=_assume_role(operations.POD_IDENTITY_PRINCIPAL),
                description=f"slonk-infra {self.plan.name}: operations controller (slonk-ops)",
            ),
            opts=self.child_opts(),
        )
        blocks = any(g.reservation is not None and g.reservation.capacity_block for g in self.plan.groups)
        policy = aws.iam.RolePolicy(
            self.child_name("ops-policy"),
            aws.iam.RolePolicyArgs(
                role=role.id, policy=operations.policy_output(cluster_name, self.region, capacity_blocks=blocks)
            ),
            opts=self.child_opts(),
        )
        aws.eks.PodIdentityAssociation(
            self.child_name("ops-identity"),
            aws.eks.PodIdentityAssociationArgs(
                cluster_name=cluster_name,
                namespace=self.plan.namespace,
                service_account=operations.SERVICE_ACCOUNT,
                role_arn=role.arn,
            ),
            # A pod that starts before its role may act gets AccessDenied on its first calls.
            opts=self.child_opts(depends_on=[policy]),
        )
        return role

    # -- compute ---------------------------------------------------------------------------------
    def _efa_security_group(self) -> aws.ec2.SecurityGroup:
        everything: dict[str, Any] = {"from_port": 0, "to_port": 0, "protocol": "-1"}
        return aws.ec2.SecurityGroup(
            self.child_name("efa"),
            aws.ec2.SecurityGroupArgs(
                vpc_id=self.vpc_id,
                description=f"slonk-infra {self.plan.name}: EFA traffic between GPU nodes",
                # EFA's OS-bypass traffic is only allowed between interfaces of one security group
                # that admits all traffic to and from itself.
                ingress=[aws.ec2.SecurityGroupIngressArgs(**everything, self=True, description="EFA from itself")],
                egress=[
                    aws.ec2.SecurityGroupEgressArgs(**everything, self=True, description="EFA to itself"),
                    aws.ec2.SecurityGroupEgressArgs(**everything, cidr_blocks=["0.0.0.0/0"], description="outbound"),
                ],
                tags={"Name": f"{self.plan.name}-efa"},
            ),
            opts=self.child_opts(),
        )

    def _system_group(
        self, cluster_name: pulumi.Input[str], role_arn: pulumi.Input[str], opts: pulumi.ResourceOptions
    ) -> aws.eks.NodeGroup:
        nodes = self.plan.declaration.kubernetes.system_nodes
        return aws.eks.NodeGroup(
            self.child_name("system"),
            aws.eks.NodeGroupArgs(
                cluster_name=cluster_name,
                node_group_name=SYSTEM_POOL,
                node_role_arn=role_arn,
                subnet_ids=self.subnets,
                instance_types=[SYSTEM_INSTANCE],
                ami_type=CPU_AMI,
                capacity_type="ON_DEMAND",
                disk_size=CPU_DISK_GIB,
                labels=dict(SYSTEM_LABELS),
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(min_size=nodes, desired_size=nodes, max_size=nodes),
                update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            ),
            opts=opts,
        )

    def _addons(
        self, cluster: aws.eks.Cluster, storage: Sequence[StorageSpec], provider: k8s.Provider
    ) -> list[pulumi.Resource]:
        """The created cluster's add-ons and device plugins; returns what the block StorageClass waits for."""
        ebs_role, ebs_attachments = self._role("ebs-csi-role", "pods.eks.amazonaws.com", (addons.EBS_CSI_POLICY,))
        made = addons.cluster_addons(
            self,
            cluster,
            {vol.kind for vol in storage},
            self.system_group,
            ebs_role.arn,
            # Node auto repair (GPU groups) acts on the conditions the monitoring agent sets.
            monitor_nodes=bool(self.gpu_groups),
        )
        addons.device_plugins(self, provider, self.gpu_groups, self.efa_groups)
        return [made[addons.EBS_CSI_ADDON], *ebs_attachments]

    # -- storage ---------------------------------------------------------------------------------
    def _shared_storage(self, storage: Sequence[StorageSpec]) -> dict[str, AwsSharedStorage]:
        if not storage:
            return {}
        storage_sg = self._storage_security_group({vol.kind for vol in storage})
        return {
            vol.name: AwsSharedStorage(
                self.child_name("storage", vol.name),
                AwsSharedStorageArgs(
                    volume=vol,
                    subnet_ids=self.subnets,
                    zone_subnet_id=self.zone_subnet,
                    security_group=storage_sg.id,
                    tag_prefix=self.plan.name,
                    child_prefix=self._name,
                ),
                self.child_opts(),
            )
            for vol in storage
        }

    def _storage_security_group(self, kinds: set[str]) -> aws.ec2.SecurityGroup:
        vpc = aws.ec2.get_vpc_output(id=self.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self))
        cidrs = vpc.cidr_block_associations.apply(lambda assocs: sorted({str(a.cidr_block) for a in assocs}))
        ports: list[tuple[int, int, str]] = []
        if "efs" in kinds:
            ports.append((2049, 2049, "NFS (EFS)"))
        if "fsx-lustre" in kinds:
            ports += [(988, 988, "Lustre"), (1018, 1023, "Lustre")]
        return aws.ec2.SecurityGroup(
            self.child_name("storage"),
            aws.ec2.SecurityGroupArgs(
                vpc_id=self.vpc_id,
                description=f"slonk-infra {self.plan.name}: shared filesystems, from the VPC",
                # From the whole VPC: nodes of every group (and any security group) mount these.
                ingress=[
                    aws.ec2.SecurityGroupIngressArgs(
                        from_port=low, to_port=high, protocol="tcp", cidr_blocks=cidrs, description=what
                    )
                    for low, high, what in ports
                ],
                egress=[
                    aws.ec2.SecurityGroupEgressArgs(
                        from_port=0, to_port=0, protocol="-1", cidr_blocks=["0.0.0.0/0"], description="outbound"
                    )
                ],
                tags={"Name": f"{self.plan.name}-storage"},
            ),
            opts=self.child_opts(),
        )
