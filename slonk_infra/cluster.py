"""``Cluster``: the whole system (cloud layer + Slurm layer) as one component, with typed outputs.

The idiom of ``eks.Cluster``: construct it with the declaration and read its outputs::

    import pulumi
    import slonk_infra

    cluster = slonk_infra.Cluster("research", declaration_dict)
    pulumi.export("login", cluster.login_address)

The declaration is validated completely (:func:`slonk_infra.clouds.build_plan`) before any resource
is declared; a bad one raises :class:`~slonk_infra.declaration.errors.DeclarationError` listing every problem.
The fields that name existing cloud objects may be the program's Pulumi Outputs
(:mod:`slonk_infra.declaration.inputs`).

:func:`recording_plans` lets an offline run (``slonk-infra render --program``) see the plan each
``Cluster`` of a user's program was built with, so its summary describes what the program declared.
"""

# No ``from __future__ import annotations``: Pulumi's component analyzer reads the class annotations.
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pulumi

from slonk_infra import tokens
from slonk_infra.clouds import build_plan, deploy_cloud
from slonk_infra.clouds.common import CloudComponent
from slonk_infra.declaration.args import ClusterArgs
from slonk_infra.declaration.model import ClusterDeclaration
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm_layer.slurm_cluster import SlurmCluster

# Outputs, in the order ``register_outputs`` and the docs list them.
OUTPUT_KEYS = (
    "clusterName",
    "namespace",
    "loginAddress",
    "controllerHost",
    "kubeconfig",
    "nodePools",
    "slurmFiles",
)


def _login_address(service: Any) -> pulumi.Output[str]:
    """The login Service's external address (LoadBalancer hostname or IP), else its ClusterIP."""

    def pick(args: list[Any]) -> str:
        spec, status = args
        for ingress in _get(_get(status, "load_balancer", "loadBalancer"), "ingress") or []:
            address = _get(ingress, "hostname") or _get(ingress, "ip")
            if address:
                return str(address)
        return str(_get(spec, "cluster_ip", "clusterIP") or "")

    return pulumi.Output.all(service.spec, service.status).apply(pick)


def _get(obj: Any, name: str, wire: str | None = None) -> Any:
    """A field of an SDK output type, or of the plain dict an older SDK or a mock hands back."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name, obj.get(wire or name))
    return getattr(obj, name, None)


def _string_map(values: Mapping[str, pulumi.Input[str]]) -> pulumi.Output[dict[str, str]]:
    """One Output of a dict from a dict of Inputs (``Output.all`` of nothing is a list, not a dict)."""
    if not values:
        return pulumi.Output.from_input({})
    return pulumi.Output.all(**values).apply(lambda resolved: {str(k): str(v) for k, v in resolved.items()})


# Open recordings of the plans Clusters are built with (see recording_plans); empty outside offline runs.
_RECORDINGS: list[list[tuple[str, ClusterPlan]]] = []


@contextmanager
def recording_plans() -> Iterator[list[tuple[str, ClusterPlan]]]:
    """Collect ``(component name, plan)`` of every :class:`Cluster` constructed while the block runs."""
    recording: list[tuple[str, ClusterPlan]] = []
    _RECORDINGS.append(recording)
    try:
        yield recording
    finally:
        _RECORDINGS.remove(recording)


def as_plan(args: "ClusterArgs | Mapping[str, Any] | ClusterDeclaration | ClusterPlan") -> ClusterPlan:
    """Validate any accepted form of the declaration into a plan (raises DeclarationError)."""
    if isinstance(args, ClusterPlan):
        return args
    if isinstance(args, ClusterDeclaration):
        return build_plan(args)
    return build_plan(dict(args))


class Cluster(pulumi.ComponentResource):
    """A Slurm cluster on Kubernetes: the cloud layer (GKE, EKS, or an existing cluster) and the Slurm
    layer (StatefulSets, Services, ConfigMaps, storage) as its two children.

    Outputs (each a ``pulumi.Output`` attribute; registered under the camelCase names):

    - ``cluster_name`` (``clusterName``): Slurm ClusterName, and the GKE / EKS cluster's name.
    - ``namespace``: the Kubernetes namespace holding every Slurm object.
    - ``login_address`` (``loginAddress``): where to ``ssh``: the login Service's LoadBalancer hostname or
      IP, else its ClusterIP.
    - ``controller_host`` (``controllerHost``): cluster DNS name of the (primary) slurmctld.
    - ``kubeconfig``: (secret) kubeconfig of a GKE / EKS cluster this component created, with exec-plugin
      auth and no credential inside; empty when an existing cluster is used.
    - ``node_pools`` (``nodePools``): the node pool (GKE) / node group (EKS) name per worker group.
    - ``slurm_files`` (``slurmFiles``): the rendered Slurm files (slurm.conf, gres.conf, cgroup.conf,
      topology, ``scripts/*``) by path relative to /etc/slurm.
    """

    cluster_name: pulumi.Output[str]
    """Cluster name: Slurm ClusterName and the GKE/EKS cluster's name."""
    namespace: pulumi.Output[str]
    """Kubernetes namespace holding every Slurm object."""
    login_address: pulumi.Output[str]
    """Where to ``ssh``: the login Service's LoadBalancer hostname or IP, else its ClusterIP."""
    controller_host: pulumi.Output[str]
    """Cluster DNS name of the (primary) slurmctld, as slurm.conf's first SlurmctldHost names it; with
    ``controller.replicas: 2`` the backup's is the same with ``slurmctld-standby-0``."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig of the Kubernetes cluster this component created (exec-plugin auth, no credential
    inside; a secret output); empty when an existing cluster is used."""
    node_pools: pulumi.Output[dict[str, str]]
    """Cloud node pool (GKE) / node group (EKS) name per worker group; empty on local clusters."""
    slurm_files: pulumi.Output[dict[str, str]]
    """The rendered Slurm files (slurm.conf, gres.conf, cgroup.conf, topology, ``scripts/*``), by path
    relative to /etc/slurm."""

    def __init__(
        self,
        name: str,
        args: "ClusterArgs | Mapping[str, Any] | ClusterDeclaration | ClusterPlan",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Validate the declaration completely, then declare the cloud layer and the Slurm layer under this component.

        Arguments:

        - ``name``: the component's name; every child's name starts with it (``<name>-cluster``, ...).
        - ``args``: the cluster declaration (the object a stack file holds under ``slonk-infra:cluster``) as
          a :class:`~slonk_infra.declaration.args.ClusterArgs` dict (camelCase or snake_case keys), a
          :class:`~slonk_infra.declaration.model.ClusterDeclaration`, or a :class:`~slonk_infra.plan.ClusterPlan`
          from :func:`slonk_infra.build_plan`. The fields that name existing cloud objects may be Pulumi
          Outputs (a VPC made in the same program, a StackReference output): ``gcp.project``,
          ``gcp.network``, ``gcp.subnetwork``, ``aws.vpcId``, each of ``aws.subnetIds`` and ``aws.publicSubnetIds``, ``aws.nodeRoleArn``,
          ``reservation.name`` of pools and TPU slices, ``kubernetes.kubeconfig`` and ``kubernetes.context``.
        - ``opts``: Pulumi resource options of the component (parent, providers, transforms, ...).

        A bad declaration raises :class:`~slonk_infra.declaration.errors.DeclarationError` listing every
        problem by field, before any resource is declared. Besides the outputs, ``plan`` (the validated
        :class:`~slonk_infra.plan.ClusterPlan`), ``cloud`` and ``slurm`` (the two child components) are public.

        Example, on AWS in a VPC the same program creates::

            import pulumi
            import pulumi_aws as aws
            import slonk_infra

            vpc = aws.ec2.Vpc("net", cidr_block="10.0.0.0/16")
            subnet = aws.ec2.Subnet("gpu", vpc_id=vpc.id, cidr_block="10.0.0.0/20", availability_zone="us-east-1a")
            cluster = slonk_infra.Cluster("research", {
                "name": "research", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
                "aws": {"vpcId": vpc.id, "subnetIds": [subnet.id], "adminRoleArns": [admin_role_arn]},
                "kubernetes": {"create": True, "authorizedNetworks": ["203.0.113.0/24"]},
                "image": {"reference": image_with_digest, "cudaVersion": "12.8", "slurmVersion": "25.05"},
                "pools": [{"name": "h100", "kind": "gpu", "accelerator": {"type": "h100", "count": 8}, "nodes": 2}],
                "storage": [{"name": "home", "kind": "efs", "mountPath": "/home"}],
            })
            pulumi.export("login", cluster.login_address)
        """
        # The plan is built before the component registers, so a bad declaration declares nothing.
        self.plan: ClusterPlan = as_plan(args)
        super().__init__(tokens.CLUSTER, name, None, opts)
        for recording in _RECORDINGS:
            recording.append((name, self.plan))
        # What deploys but is probably a mistake shows in `pulumi preview`/`up` as it does in the CLI.
        for warning in self.plan.warnings:
            pulumi.log.warn(f"{self.plan.name}: {warning}", resource=self)
        child = pulumi.ResourceOptions(parent=self)
        self.cloud: CloudComponent = deploy_cloud(self.plan, child, name=name)
        result = self.cloud.result
        self.slurm: SlurmCluster = SlurmCluster(name, self.plan, result, child)

        self.cluster_name = pulumi.Output.from_input(self.plan.name)
        self.namespace = pulumi.Output.from_input(self.plan.namespace)
        self.login_address = _login_address(self.slurm.objects[f"Service/{naming.LOGIN}"])
        primary = naming.controller_hosts(self.plan.namespace, self.plan.declaration.controller.replicas)[0]
        self.controller_host = pulumi.Output.from_input(primary)
        self.kubeconfig = pulumi.Output.secret(result.kubeconfig if result.kubeconfig is not None else "")
        self.node_pools = _string_map(result.node_pool_names)
        self.slurm_files = pulumi.Output.from_input(self.slurm.files.all())
        self.register_outputs(dict(zip(OUTPUT_KEYS, self._outputs(), strict=True)))

    def _outputs(self) -> tuple[pulumi.Output[Any], ...]:
        return (
            self.cluster_name,
            self.namespace,
            self.login_address,
            self.controller_host,
            self.kubeconfig,
            self.node_pools,
            self.slurm_files,
        )


# Pulumi's component analyzer (the cross-language schema) reads the ``args`` annotation and understands
# TypedDicts only; the other accepted forms are for Python callers.
Cluster.__init__.__annotations__["args"] = ClusterArgs
