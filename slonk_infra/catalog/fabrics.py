"""GPU fabrics (``data/fabrics.yaml``): what a worker pod needs so NCCL uses every GPU NIC, and the versions each needs.

GKE's GPUDirect-TCPXO (A3 Mega) and GPUDirect-RDMA (A3 Ultra, A4, A4X) give a pod its GPU NICs
through multi-network annotations naming GKE Network objects (``networks``: the VPCs and subnets the
node's GPU NICs attach to), load the NCCL plugin from host paths the ``installer`` DaemonSets fill,
and (TCPXO) run a receive-datapath sidecar. EFA on EKS is an extended resource plus libfabric and aws-ofi-nccl in the image.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from slonk_infra.catalog.types import Cloud

if TYPE_CHECKING:
    from slonk_infra.catalog.machines import MachineType

GKE_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-gke\.(\d+))?$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def gke_version_key(version: str) -> tuple[int, int, int, int]:
    """Sortable key of a GKE version (``1.31``, ``1.31.4``, ``1.31.4-gke.1183000``); missing parts sort lowest."""
    match = GKE_VERSION.match(version)
    if match is None:
        raise ValueError(f"{version!r} is not a GKE version like 1.31 or 1.31.4-gke.1183000")
    major, minor, patch, gke = match.groups()
    return int(major), int(minor), int(patch or 0), int(gke or 0)


def minor_of(version: str) -> str:
    """The ``major.minor`` part of a version."""
    major, minor, _, _ = gke_version_key(version)
    return f"{major}.{minor}"


class HostMount(_Frozen):
    """A host path mounted into a container."""

    host: str = Field(description="Path on the node.")
    path: str = Field(description="Mount path in the container.")


class Interfaces(_Frozen):
    """Multi-network pod wiring: the default interface and the GPU NICs' interface -> network names."""

    default: str = Field(description="Interface of the pod's primary network.")
    first_interface: int = Field(ge=1, description="N of the first GPU NIC interface ethN.")
    network_prefix: str = Field(description="Network object name prefix.")
    first_network_index: int = Field(ge=0, description="Index appended to the prefix for the first GPU NIC.")
    source: str = Field(description="Where the layout comes from.")

    def pairs(self, nics: int) -> list[tuple[str, str]]:
        """``(interface, network)`` for the pod's primary network and each of ``nics`` GPU NICs."""
        out = [(self.default, "default")]
        for i in range(nics):
            out.append((f"eth{self.first_interface + i}", f"{self.network_prefix}{self.first_network_index + i}"))
        return out


class SidecarRequests(_Frozen):
    """What a fabric sidecar requests (it comes off slurmd's share of the node)."""

    cpu_m: int = Field(ge=0, description="CPU request in millicores.")
    memory_mib: int = Field(ge=0, description="Memory request in MiB.")


class Sidecar(_Frozen):
    """A container the worker pod runs beside slurmd for the fabric."""

    name: str = Field(description="Container name (also names the NRI device annotation).")
    image: str = Field(description="Image reference.")
    command: tuple[str, ...] = Field(description="Command.")
    capabilities: tuple[str, ...] = Field(default=(), description="Linux capabilities added.")
    requests: SidecarRequests = Field(description="CPU and memory requests of the sidecar.")
    requests_estimate: bool = Field(default=False, description="Whether the requests are an estimate.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment.")
    mounts: tuple[HostMount, ...] = Field(default=(), description="Host paths mounted.")
    extra_devices: tuple[str, ...] = Field(default=(), description="Devices injected besides one /dev/nvidiaN per GPU.")
    source: str = Field(description="Where this comes from.")

    def devices(self, gpus: int) -> list[str]:
        """Device paths the NRI device injector gives the sidecar on a node with ``gpus`` GPUs."""
        return [f"/dev/nvidia{i}" for i in range(gpus)] + list(self.extra_devices)


class Workload(_Frozen):
    """What the container that runs jobs needs for the NCCL plugin."""

    env: dict[str, str] = Field(default_factory=dict, description="Environment.")
    env_script: str | None = Field(default=None, description="Script the plugin ships to set the NCCL environment.")
    mounts: tuple[HostMount, ...] = Field(default=(), description="Host paths mounted.")
    source: str = Field(description="Where this comes from.")


InstallerRole = Literal["tcpxo-plugin", "nri-device-injector", "gib-plugin"]


class InstallerDaemonSet(_Frozen):
    """One host-side DaemonSet a fabric needs on its nodes (GKE's GPUDirect guides apply them by hand)."""

    name: str = Field(description="DaemonSet name in kube-system.")
    role: InstallerRole = Field(
        description="What it does, which decides its pod spec: tcpxo-plugin (FasTrak NCCL plugin and aperture "
        "devices), nri-device-injector (devices.gke.io annotations), gib-plugin (the gIB NCCL plugin)."
    )
    machines: tuple[str, ...] = Field(min_length=1, description="Machine types it runs on (their accelerator label).")
    arch: Literal["amd64", "arm64"] = Field(default="amd64", description="CPU architecture of those machines.")
    image: str = Field(description="The installer (or injector) image, pinned by tag or digest.")
    cpu_m: int = Field(ge=0, description="CPU request of its main (init) container, millicores.")
    source: str = Field(description="The manifest its spec is written from.")


class Installer(_Frozen):
    """The DaemonSets that prepare a fabric's hosts: NCCL plugin libraries, devices for the sidecar."""

    daemonsets: tuple[InstallerDaemonSet, ...] = Field(min_length=1, description="The DaemonSets, one per kind.")
    host_image: str = Field(
        description="Image of the step that runs in the host's namespaces (nsenter) to prepare devices."
    )
    pause_image: str = Field(description="The long-running container that keeps each DaemonSet pod scheduled.")
    source: str = Field(description="Where the images and the one-DaemonSet-per-kind layout come from.")

    def privileged_images(self) -> dict[str, frozenset[str]]:
        """DaemonSet name -> the images its privileged containers run (the host step, the installer or injector).

        They load kernel modules, bind-mount PCI devices and write host paths, as GKE's manifests do; the
        policy pack can recognise exactly these (kube-system, catalog name and image) instead of any DaemonSet.
        """
        return {
            ds.name: frozenset({ds.image, self.host_image} if ds.role == "tcpxo-plugin" else {ds.image})
            for ds in self.daemonsets
        }


class HostNic(_Frozen):
    """A second gVNIC the node needs on its own network before the GPU NICs (GPUDirect-RDMA's eth1)."""

    network: str = Field(description="Name of the GKE Network object (and VPC suffix), e.g. gvnic-1.")
    mtu: int = Field(ge=1300, le=8896, description="MTU of its VPC.")


class GpuNetworks(_Frozen):
    """The VPCs and subnets a fabric's GPU NICs attach to, and the GKE Network objects naming them.

    The GKE Network names are the interfaces' ``network_prefix`` + index (:class:`Interfaces`), the same
    names the worker pods' ``networking.gke.io/interfaces`` annotation uses.
    """

    layout: Literal["vpc-per-nic", "subnet-per-nic"] = Field(
        description="vpc-per-nic: one VPC per GPU NIC (TCPXO); subnet-per-nic: one VPC, one subnet per NIC (RDMA)."
    )
    device_mode: Literal["NetDevice", "RDMA"] = Field(description="GKENetworkParamSet deviceMode of the GPU NICs.")
    mtu: int = Field(ge=1300, le=8896, description="MTU of the GPU NIC VPCs.")
    network_profile: str | None = Field(
        default=None, description="VPC network profile, {zone} replaced by the pool zone (RDMA: {zone}-vpc-roce)."
    )
    firewall: bool = Field(description="Whether the VPCs need an allow-internal firewall rule (RoCE VPCs allow all).")
    host_nic: HostNic | None = Field(default=None, description="A host gVNIC attached before the GPU NICs.")
    source: str = Field(description="Where the layout comes from.")


class Fabric(_Frozen):
    """One GPU fabric and its pod-side wiring."""

    name: str = Field(description="Fabric name.")
    cloud: Cloud = Field(description="Cloud that offers it.")
    wired: bool = Field(default=True, description="False when the pod side is not rendered (NCCL uses one NIC).")
    note: str | None = Field(default=None, description="Why it is not wired, when not.")
    min_gke: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="machine -> {minor: minimum full version}."
    )
    min_gke_source: str | None = Field(default=None, description="Where the versions come from.")
    interfaces: Interfaces | None = Field(default=None, description="Multi-network wiring.")
    networks: GpuNetworks | None = Field(default=None, description="The VPCs the GPU NICs attach to.")
    sidecar: Sidecar | None = Field(default=None, description="Sidecar beside slurmd.")
    workload: Workload | None = Field(default=None, description="What slurmd's container needs.")
    installer: Installer | None = Field(default=None, description="Host installer DaemonSets.")
    resource: str | None = Field(default=None, description="Extended resource requested per interface.")
    resource_source: str | None = Field(default=None, description="Where the resource name comes from.")
    image_step: str | None = Field(default=None, description="Image build step installing user-space libraries.")

    def version_problem(self, machine: MachineType, version: str) -> str | None:
        """Why ``version`` of GKE cannot run this fabric on ``machine``, or None when it can.

        A version naming only a minor passes when that minor is at or above the oldest minor with a
        floor; a full version must also reach the floor of its minor.
        """
        floors = self.min_gke.get(machine.name)
        if not floors:
            return None
        wanted = gke_version_key(version)
        lowest_minor = min(floors, key=gke_version_key)
        if wanted[:2] < gke_version_key(lowest_minor)[:2]:
            needs = ", ".join(f"{v}" for _, v in sorted(floors.items(), key=lambda kv: gke_version_key(kv[0])))
            return (
                f"{self.name} on {machine.name} needs GKE {needs} or later; the declaration has {version}"
                f"{self._floor_source}"
            )
        floor = floors.get(minor_of(version))
        # Compare only as precisely as the declaration is: 1.31.4 means any 1.31.4-gke build.
        given = 4 if "-gke." in version else version.count(".") + 1
        if floor is not None and given > 2 and wanted[:given] < gke_version_key(floor)[:given]:
            return (
                f"{self.name} on {machine.name} needs GKE {floor} or later in {minor_of(version)}; got {version}"
                f"{self._floor_source}"
            )
        return None

    @property
    def _floor_source(self) -> str:
        return f" (source: {' '.join(self.min_gke_source.split())})" if self.min_gke_source else ""

    def patch_floor(self, machine: MachineType, version: str) -> str | None:
        """The patch floor a minor-only ``version`` must still reach (GKE picks the patch), if any."""
        floor = self.min_gke.get(machine.name, {}).get(minor_of(version))
        return floor if "-gke." not in version else None
