"""The networks a GKE node's GPU NICs attach to, created with the cluster (GPUDirect-TCPXO and -RDMA).

GKE gives a pod a GPU NIC only through a GKE ``Network`` object of type ``Device`` whose
``GKENetworkParamSet`` names the VPC and subnet that NIC of the node is attached to; the node gets
the NICs from its node pool's ``additional_node_network_configs``. All three are made here, from one
list of :class:`NicNetwork` per fabric, so the node pools, the GKE objects and the worker pods'
``networking.gke.io/interfaces`` annotation (:mod:`slonk_infra.kube.fabric`, from the same catalog
``interfaces``) name the same networks. Per fabric present in the plan (not per pool, never per node):

- GPUDirect-TCPXO (A3 Mega): one VPC + subnet + allow-internal firewall rule per GPU NIC (vpc1..vpc8);
- GPUDirect-RDMA (A3 Ultra, A4, A4X): a host gVNIC VPC + subnet + firewall rule (gvnic-1), then one
  RoCE VPC (network profile ``<zone>-vpc-roce``) with one subnet per RDMA NIC (rdma-0..).

Subnet ranges come from ``gcp.gpuNetworkRange`` (default 192.168.0.0/16): the range is cut into 32
slots of prefix + 5; each fabric owns a fixed block of 16 slots (TCPXO 0-15, RDMA 16-31), slot 0 of
a block is the host NIC and slot 1 + i the GPU NIC i, so adding a fabric or a pool never moves an
existing subnet.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from slonk_infra.catalog import Catalog, MachineType
from slonk_infra.catalog.fabrics import Fabric
from slonk_infra.clouds.common import concat
from slonk_infra.plan import ClusterPlan

# GKE multi-network objects (https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods).
GKE_NETWORKING_API = "networking.gke.io/v1"
# Fixed slot blocks of gcp.gpuNetworkRange per fabric (module docstring).
FABRIC_BLOCK = {"gpudirect-tcpxo": 0, "gpudirect-rdma": 1}
SLOTS_PER_BLOCK = 16
SLOT_BITS = 5  # 32 slots: two blocks of 16


@dataclass(frozen=True)
class NicNetwork:
    """One node NIC beyond the primary: its GKE Network name, its VPC and subnet, and its range."""

    network: str
    """GKE Network / GKENetworkParamSet name (what the pods' interfaces annotation names)."""
    vpc: str
    """Suffix of the VPC name (``<cluster>-<vpc>``)."""
    subnet: str
    """Suffix of the subnet name (``<cluster>-<subnet>``)."""
    cidr: str
    """Primary IPv4 range of the subnet."""
    device_mode: str
    """GKENetworkParamSet deviceMode: NetDevice or RDMA."""
    mtu: int
    """MTU of the VPC."""
    profile: str | None = None
    """VPC network profile name (RoCE VPCs)."""
    firewall: bool = True
    """Whether the VPC gets an allow-internal firewall rule."""


def wired_fabrics(plan: ClusterPlan, catalog: Catalog) -> dict[str, Fabric]:
    """The GKE fabrics with networks that the plan's GPU groups use, by name, sorted."""
    found: dict[str, Fabric] = {}
    for group in plan.groups:
        fabric = catalog.fabric_of(group.machine) if group.kind == "gpu" else None
        if fabric is not None and fabric.wired and fabric.networks is not None and fabric.interfaces is not None:
            found[fabric.name] = fabric
    return dict(sorted(found.items()))


def fabric_nics(fabric: Fabric, nics: int, base: str, zone: str) -> list[NicNetwork]:
    """The node NICs of ``fabric`` for machines with ``nics`` GPU NICs, in attachment order (eth1, eth2, ...)."""
    assert fabric.networks is not None and fabric.interfaces is not None, f"{fabric.name} has no networks"
    spec = fabric.networks
    net = ipaddress.ip_network(base)
    slots = list(net.subnets(prefixlen_diff=SLOT_BITS))
    first = FABRIC_BLOCK[fabric.name] * SLOTS_PER_BLOCK
    if nics + 1 > SLOTS_PER_BLOCK:
        raise ValueError(f"{fabric.name}: {nics} GPU NICs do not fit a block of {SLOTS_PER_BLOCK} subnets")
    out: list[NicNetwork] = []
    if spec.host_nic is not None:
        name = spec.host_nic.network
        out.append(NicNetwork(name, name, name, str(slots[first]), "NetDevice", spec.host_nic.mtu))
    profile = spec.network_profile.format(zone=zone) if spec.network_profile else None
    # The pods' names, from the same catalog entry the pod annotation is built from.
    gpu_names = [network for _, network in fabric.interfaces.pairs(nics)[1:]]
    shared_vpc = fabric.name.removeprefix("gpudirect-")
    for i, name in enumerate(gpu_names):
        vpc = name if spec.layout == "vpc-per-nic" else shared_vpc
        out.append(
            NicNetwork(name, vpc, name, str(slots[first + 1 + i]), spec.device_mode, spec.mtu, profile, spec.firewall)
        )
    return out


def cluster_nics(plan: ClusterPlan, catalog: Catalog, base: str, zone: str) -> dict[str, list[NicNetwork]]:
    """Per wired fabric in the plan, every NIC network the largest of its machines needs."""
    out: dict[str, list[NicNetwork]] = {}
    for name, fabric in wired_fabrics(plan, catalog).items():
        most = max(g.machine.gpu_nics for g in plan.groups if g.machine.fabric == name)
        out[name] = fabric_nics(fabric, most, base, zone)
    return out


def machine_nics(machine: MachineType, nics: Sequence[NicNetwork], catalog: Catalog) -> list[NicNetwork]:
    """The NICs a node of ``machine`` attaches: the host NIC if the fabric has one, then its GPU NICs."""
    fabric = catalog.fabric_of(machine)
    host = 1 if fabric is not None and fabric.networks is not None and fabric.networks.host_nic else 0
    return list(nics[: host + machine.gpu_nics])


@dataclass(frozen=True)
class NodeNetwork:
    """What a node pool's ``additional_node_network_configs`` entry names."""

    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]


class GpuNetworks:
    """Creates the VPCs, subnets, firewall rules and GKE Network objects of every wired fabric in a plan."""

    def __init__(
        self,
        prefix: str,
        cluster: str,
        nics: dict[str, list[NicNetwork]],
        project: pulumi.Input[str],
        region: str,
        base: str,
        opts: pulumi.ResourceOptions,
    ) -> None:
        self._prefix, self._cluster, self._project, self._region, self._base = prefix, cluster, project, region, base
        self._opts = opts
        self.vpcs: dict[str, gcp.compute.Network] = {}
        self.subnets: dict[str, gcp.compute.Subnetwork] = {}
        self.firewalls: dict[str, gcp.compute.Firewall] = {}
        self.nodes: dict[str, NodeNetwork] = {}
        for fabric_nics in nics.values():
            for nic in fabric_nics:
                self._nic(nic)
        self.nics = nics
        self.objects: list[pulumi.Resource] = []

    def _vpc(self, nic: NicNetwork) -> gcp.compute.Network:
        if nic.vpc in self.vpcs:
            return self.vpcs[nic.vpc]
        profile = concat("projects/", self._project, f"/global/networkProfiles/{nic.profile}") if nic.profile else None
        vpc = gcp.compute.Network(
            f"{self._prefix}-gpu-net-{nic.vpc}",
            gcp.compute.NetworkArgs(
                name=f"{self._cluster}-{nic.vpc}",
                project=self._project,
                auto_create_subnetworks=False,
                mtu=nic.mtu,
                network_profile=profile,
                description=f"slonk-infra {self._cluster}: GPU NIC network {nic.vpc}",
            ),
            opts=self._opts,
        )
        self.vpcs[nic.vpc] = vpc
        if nic.firewall:
            # NCCL and the receive-datapath manager talk between nodes on every port of these NICs.
            self.firewalls[nic.vpc] = gcp.compute.Firewall(
                f"{self._prefix}-gpu-fw-{nic.vpc}",
                gcp.compute.FirewallArgs(
                    name=f"{self._cluster}-{nic.vpc}-internal",
                    project=self._project,
                    network=vpc.self_link,
                    allows=[
                        gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                        gcp.compute.FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                        gcp.compute.FirewallAllowArgs(protocol="icmp"),
                    ],
                    source_ranges=[self._base],
                ),
                opts=self._opts,
            )
        return vpc

    def _nic(self, nic: NicNetwork) -> None:
        vpc = self._vpc(nic)
        subnet = gcp.compute.Subnetwork(
            f"{self._prefix}-gpu-subnet-{nic.subnet}",
            gcp.compute.SubnetworkArgs(
                name=f"{self._cluster}-{nic.subnet}",
                project=self._project,
                region=self._region,
                network=vpc.self_link,
                ip_cidr_range=nic.cidr,
            ),
            opts=self._opts,
        )
        self.subnets[nic.network] = subnet
        self.nodes[nic.network] = NodeNetwork(network=vpc.name, subnetwork=subnet.name)

    def kubernetes_objects(self, provider: k8s.Provider, parent: pulumi.Resource) -> list[pulumi.Resource]:
        """The GKENetworkParamSet and Network of every NIC network, in the cluster (cluster-scoped objects)."""
        opts = pulumi.ResourceOptions(parent=parent, provider=provider)
        out: list[pulumi.Resource] = []
        for fabric_nics in self.nics.values():
            for nic in fabric_nics:
                node = self.nodes[nic.network]
                params = k8s.apiextensions.CustomResource(
                    f"{self._prefix}-gke-network-params-{nic.network}",
                    api_version=GKE_NETWORKING_API,
                    kind="GKENetworkParamSet",
                    metadata={"name": nic.network},
                    spec={"vpc": node.network, "vpcSubnet": node.subnetwork, "deviceMode": nic.device_mode},
                    opts=opts,
                )
                network = k8s.apiextensions.CustomResource(
                    f"{self._prefix}-gke-network-{nic.network}",
                    api_version=GKE_NETWORKING_API,
                    kind="Network",
                    metadata={"name": nic.network},
                    spec={
                        "type": "Device",
                        "parametersRef": {
                            "group": "networking.gke.io",
                            "kind": "GKENetworkParamSet",
                            "name": nic.network,
                        },
                    },
                    opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[params])),
                )
                out += [params, network]
        self.objects = out
        return out
