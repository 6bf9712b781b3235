"""The worker pod's side of a GPU fabric and of a multi-host TPU slice, from the catalog.

A GPU node's NICs reach NCCL only if the pod asks for them: on GKE the multi-network annotations
(one interface per GPU NIC), the TCPXO receive-datapath sidecar with its devices, and the NCCL
plugin's host libraries and environment; on EKS one ``vpc.amazonaws.com/efa`` per interface and
libfabric in the image. A multi-host TPU slice's processes find each other through
``TPU_WORKER_ID`` and ``TPU_WORKER_HOSTNAMES``, which GKE sets only for Indexed Jobs. Everything
here is plain data for the worker StatefulSet builder; the figures come from ``fabrics.yaml`` and
``tpus.yaml``. The GKE Network objects the interfaces annotation names are created by the GKE
adapter (``slonk_infra/clouds/gcp/gpu_networks.py``) from the same ``interfaces`` entry, and the
host paths mounted here are filled by its installer DaemonSets (``gpu_installers.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from slonk_infra import vocab
from slonk_infra.catalog import Catalog, MachineType, load_catalog
from slonk_infra.catalog.fabrics import HostMount
from slonk_infra.plan import naming

Obj = dict[str, Any]

DEFAULT_INTERFACE = "networking.gke.io/default-interface"
INTERFACES = "networking.gke.io/interfaces"
DEVICES = "devices.gke.io/container."
# A job's tasks inherit the submitter's environment, not slurmd's: slurmd.sh writes the variables
# named in SLONK_TASK_ENV (and what the fabric's env script sets) where the Slurm TaskProlog hands
# them to every task on the node.
TASK_ENV = "SLONK_TASK_ENV"
TASK_ENV_SCRIPT = "SLONK_TASK_ENV_SCRIPT"
# A pod-spec env entry replaces the image's own value, and CUDA images put the driver libraries on
# LD_LIBRARY_PATH (nvidia/cuda base images: ENV LD_LIBRARY_PATH /usr/local/nvidia/lib:/usr/local/nvidia/lib64);
# a fabric's library path is prepended to that, never instead of it.
CUDA_LIBRARY_PATH = (f"{vocab.GPU_DRIVER_DIR}/lib", f"{vocab.GPU_DRIVER_DIR}/lib64")


def _library_path(fabric_path: str) -> str:
    parts = [p for p in fabric_path.split(":") if p]
    return ":".join(dict.fromkeys([*parts, *CUDA_LIBRARY_PATH]))


@dataclass(frozen=True)
class FabricPodParts:
    """What a worker pod adds for its node's fabric."""

    annotations: dict[str, str] = field(default_factory=dict)
    containers: list[Obj] = field(default_factory=list)
    volumes: list[Obj] = field(default_factory=list)
    mounts: list[Obj] = field(default_factory=list)
    env: list[Obj] = field(default_factory=list)
    resources: dict[str, str] = field(default_factory=dict)
    note: str | None = None

    @property
    def task_env_names(self) -> list[str]:
        """Names of the env entries that jobs' tasks must also see (the env script's path is not one)."""
        return [e["name"] for e in self.env if e["name"] != TASK_ENV_SCRIPT]


def _volume_name(host: str) -> str:
    return "fabric" + host.replace("/", "-").replace("_", "-").rstrip("-")


def _host_volumes(mounts: tuple[HostMount, ...]) -> tuple[list[Obj], list[Obj]]:
    volumes = [{"name": _volume_name(m.host), "hostPath": {"path": m.host}} for m in mounts]
    return volumes, [{"name": _volume_name(m.host), "mountPath": m.path} for m in mounts]


def fabric_pod_parts(machine: MachineType, catalog: Catalog | None = None) -> FabricPodParts:
    """The pod-side wiring of ``machine``'s fabric; empty for a machine without one."""
    cat = catalog or load_catalog()
    fabric = cat.fabric_of(machine)
    if fabric is None:
        return FabricPodParts()
    if not fabric.wired or fabric.workload is None:
        return FabricPodParts(note=f"{fabric.name} on {machine.name} is not wired: {fabric.note}")
    workload = fabric.workload
    annotations: dict[str, str] = {}
    containers: list[Obj] = []
    volumes, mounts = _host_volumes(workload.mounts)
    if fabric.interfaces is not None:
        pairs = fabric.interfaces.pairs(machine.gpu_nics)
        annotations[DEFAULT_INTERFACE] = fabric.interfaces.default
        annotations[INTERFACES] = json.dumps([{"interfaceName": i, "network": n} for i, n in pairs])
    if fabric.sidecar is not None:
        side = fabric.sidecar
        gpus = machine.accelerator.count if machine.accelerator else 0
        annotations[DEVICES + side.name] = "".join(f"- path: {d}\n" for d in side.devices(gpus))
        side_volumes, side_mounts = _host_volumes(side.mounts)
        volumes += [v for v in side_volumes if v not in volumes]
        containers.append(
            {
                "name": side.name,
                "image": side.image,
                "command": list(side.command),
                "imagePullPolicy": "Always",
                "env": [{"name": k, "value": v} for k, v in sorted(side.env.items())],
                "resources": {
                    "requests": {"cpu": f"{side.requests.cpu_m}m", "memory": f"{side.requests.memory_mib}Mi"}
                },
                # Not privileged: the NRI device injector hands it the GPUs, these two capabilities
                # let it program the NICs (GKE's GPUDirect-TCPXO guide).
                "securityContext": {"capabilities": {"add": list(side.capabilities)}},
                "volumeMounts": side_mounts,
            }
        )
    values = {k: _library_path(v) if k == "LD_LIBRARY_PATH" else v for k, v in workload.env.items()}
    env = [{"name": k, "value": v} for k, v in sorted(values.items())]
    if workload.env_script:
        env.append({"name": TASK_ENV_SCRIPT, "value": workload.env_script})
    resources: dict[str, str] = {}
    if fabric.resource is not None:
        resources[fabric.resource] = str(min(machine.network_cards, machine.efa_interfaces))
    return FabricPodParts(
        annotations=annotations,
        containers=containers,
        volumes=volumes,
        mounts=mounts,
        env=env,
        resources=resources,
    )


def tpu_forwarded(catalog: Catalog | None = None) -> list[str]:
    """What the TPU device plugin sets on a TPU host's container that every task needs (``TPU_*``: a prefix)."""
    return list((catalog or load_catalog()).tpu_env.forwarded)


def tpu_worker_env(group: str, hosts: int, namespace: str, catalog: Catalog | None = None) -> list[Obj]:
    """``TPU_WORKER_ID`` (the pod's ordinal) and ``TPU_WORKER_HOSTNAMES`` (the slice's pods) of a multi-host slice.

    The ordinal comes from the StatefulSet controller's pod-index label through the downward API,
    so one pod template serves every host; the hostnames are the slice's pod DNS names in ordinal
    order, which is what JAX's GKE TPU cluster detection reads (first host = coordinator).
    Empty for a single-host slice, where the runtime needs neither.
    """
    if hosts <= 1:
        return []
    cat = catalog or load_catalog()
    names = cat.tpu_env
    label = cat.platform.kubernetes.pod_index_label
    domain = naming.workers_domain(namespace)
    hostnames = ",".join(f"{pod}.{domain}" for pod in naming.slurm_nodes(group, hosts))
    return [
        {"name": names.worker_id, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}},
        {"name": names.worker_hostnames, "value": hostnames},
    ]
