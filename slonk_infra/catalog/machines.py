"""The catalog's machine types, accelerators and TPU generations: the types, below the loader."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from slonk_infra.catalog.types import Cloud, FabricName, PoolKind


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeLabel(_Frozen):
    """A Kubernetes node label the cloud sets on every node of a machine type."""

    key: str = Field(description="Label key, e.g. cloud.google.com/gke-accelerator.")
    value: str = Field(description="Label value for this machine type.")


class Accelerator(_Frozen):
    """Accelerators attached to one VM."""

    type: str = Field(description="Portable accelerator name; also the Slurm GRES type (h100, tpu-v5p, ...).")
    count: int = Field(gt=0, description="GPUs or TPU chips per VM.")
    memory_gib: int = Field(gt=0, description="Memory per accelerator in GiB.")


class MachineType(_Frozen):
    """One cloud machine type and the figures Slurm and Kubernetes need about it."""

    name: str = Field(description="The cloud's machine / instance type name.")
    cloud: Cloud = Field(description="Cloud that offers it.")
    kind: PoolKind = Field(description="gpu, tpu or cpu.")
    vcpus: int = Field(gt=0, description="vCPUs of the VM.")
    sockets: int = Field(gt=0, description="CPU sockets.")
    threads_per_core: int = Field(gt=0, description="Hardware threads per core.")
    memory_gib: int = Field(gt=0, description="VM memory in GiB.")
    accelerator: Accelerator | None = Field(default=None, description="Attached GPUs / TPU chips.")
    label: NodeLabel | None = Field(default=None, description="Accelerator (or machine) node label.")
    gpu_nics: int = Field(default=0, ge=0, description="GPU-direct / RDMA NICs (GCP).")
    efa_interfaces: int = Field(default=0, ge=0, description="EFA interfaces the instance supports (AWS).")
    network_cards: int = Field(default=0, ge=0, description="Network cards (AWS), one EFA per card.")
    nvlink_domain: int = Field(default=1, gt=0, description="VMs per NVLink domain (GB200-class racks).")
    fabric: FabricName | None = Field(default=None, description="GPU-to-GPU network the pod must be wired to.")
    memtotal_gap: float | None = Field(
        default=None, ge=0, lt=1, description="Measured fraction of memory_gib the kubelet does not report."
    )
    memtotal_gap_source: str | None = Field(default=None, description="Where the measured gap comes from.")
    hyperdisk_only: bool = Field(default=False, description="GCP: attaches Hyperdisk only, no pd-balanced.")
    eni_max_pods: int | None = Field(default=None, gt=0, description="AWS: maxPods by the VPC CNI ENI formula.")
    preferred: bool = Field(default=False, description="Default target of a portable accelerator request.")
    local_ssd_ephemeral: int = Field(
        default=0,
        ge=0,
        description="GCP: Local SSDs the machine carries that GKE uses as ephemeral storage (kubelet, images, "
        "emptyDir) instead of the boot disk; 0 = none.",
    )
    local_ssd_source: str | None = Field(default=None, description="Where the Local SSD count comes from.")
    host_maintenance_interval: Literal["PERIODIC", "AS_NEEDED"] | None = Field(
        default=None,
        description="GCP: the node pool's host maintenance interval (PERIODIC: planned, announced host "
        "maintenance for the GPU machine families that offer it); None = GKE's default.",
    )
    host_maintenance_source: str | None = Field(default=None, description="Where the maintenance interval comes from.")
    faulty_host_report: bool = Field(
        default=False,
        description=(
            "GCP: Compute Engine instances.reportHostAsFaulty accepts this machine type, so a bad machine is "
            "replaced by reporting its host rather than by recreating the instance."
        ),
    )
    faulty_host_report_source: str | None = Field(
        default=None, description="Where the reportHostAsFaulty support of this machine type is documented."
    )
    source: str = Field(description="Where the figures come from.")

    @model_validator(mode="after")
    def _consistent(self) -> MachineType:
        if (self.kind == "cpu") != (self.accelerator is None):
            raise ValueError(f"{self.name}: kind {self.kind} does not match accelerator {self.accelerator}")
        if self.vcpus % (self.sockets * self.threads_per_core):
            raise ValueError(f"{self.name}: {self.vcpus} vCPUs do not split into {self.sockets} sockets")
        if (self.memtotal_gap is None) != (self.memtotal_gap_source is None):
            raise ValueError(f"{self.name}: a measured memtotal_gap needs memtotal_gap_source, and only then")
        if bool(self.local_ssd_ephemeral) != (self.local_ssd_source is not None):
            raise ValueError(f"{self.name}: local_ssd_ephemeral needs local_ssd_source, and only then")
        if (self.host_maintenance_interval is None) != (self.host_maintenance_source is None):
            raise ValueError(f"{self.name}: host_maintenance_interval needs host_maintenance_source, and only then")
        if (self.local_ssd_ephemeral or self.host_maintenance_interval) and self.cloud != "gcp":
            raise ValueError(f"{self.name}: local_ssd_ephemeral and host_maintenance_interval are GKE settings")
        if self.faulty_host_report != (self.faulty_host_report_source is not None):
            raise ValueError(f"{self.name}: faulty_host_report needs faulty_host_report_source, and only then")
        if self.faulty_host_report and self.cloud != "gcp":
            raise ValueError(f"{self.name}: faulty_host_report is a Compute Engine API, GCP machines only")
        if (self.cloud == "aws") != (self.eni_max_pods is not None):
            raise ValueError(f"{self.name}: eni_max_pods is required on AWS machines and only there")
        if self.fabric == "efa" and (self.cloud != "aws" or self.efa_interfaces == 0):
            raise ValueError(f"{self.name}: fabric efa needs an AWS machine with efa_interfaces")
        if (
            self.fabric is not None
            and self.fabric.startswith("gpudirect")
            and (self.cloud != "gcp" or not self.gpu_nics)
        ):
            raise ValueError(f"{self.name}: fabric {self.fabric} needs a GCP machine with gpu_nics")
        return self

    @property
    def cores_per_socket(self) -> int:
        """Physical cores per socket, as Slurm's CoresPerSocket."""
        return self.vcpus // (self.sockets * self.threads_per_core)


class TpuGeneration(_Frozen):
    """A TPU generation: its VM type and the slice topologies GKE accepts."""

    name: str = Field(description="Generation name (v4, v5e, v5p, v6e, tpu7x).")
    machine: str = Field(description="Multi-host VM machine type.")
    dims: Literal[2, 3] = Field(description="Torus dimensions of a slice topology.")
    max_chips: int = Field(gt=0, description="Largest slice in chips.")
    topologies: tuple[str, ...] = Field(description="Valid slice topologies, e.g. 4x4x4.")
    workload_policy: bool = Field(default=False, description="Multi-host slices need a workload policy.")
    source: str = Field(description="Where the figures come from.")
