"""The worker pod's fabric wiring and TPU slice environment, built from the catalog."""

from __future__ import annotations

import json

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.kube.fabric import (
    DEFAULT_INTERFACE,
    INTERFACES,
    TASK_ENV,
    TASK_ENV_SCRIPT,
    FabricPodParts,
    fabric_pod_parts,
    tpu_worker_env,
)

CATALOG = load_catalog()
M = CATALOG.machines


def env_of(parts: FabricPodParts) -> dict[str, str]:
    return {e["name"]: e["value"] for e in parts.env}


def test_a3_mega_gets_eight_tcpxo_nics_the_rxdm_sidecar_and_the_plugin() -> None:
    parts = fabric_pod_parts(M["a3-megagpu-8g"])
    assert parts.annotations[DEFAULT_INTERFACE] == "eth0"
    nics = json.loads(parts.annotations[INTERFACES])
    assert nics[0] == {"interfaceName": "eth0", "network": "default"}
    assert [n["network"] for n in nics[1:]] == [f"vpc{i}" for i in range(1, 9)]
    [sidecar] = parts.containers
    assert sidecar["name"] == "tcpxo-daemon" and "tcpgpudmarxd" in sidecar["image"]
    devices = parts.annotations["devices.gke.io/container.tcpxo-daemon"].splitlines()
    assert devices[:8] == [f"- path: /dev/nvidia{i}" for i in range(8)]
    assert "- path: /dev/dmabuf_import_helper" in devices
    volume_names = {v["name"] for v in parts.volumes}
    assert {m["name"] for m in sidecar["volumeMounts"]} <= volume_names
    assert {m["name"] for m in parts.mounts} <= volume_names
    assert {"/dev/aperture_devices", "/usr/local/nvidia/lib64"} <= {m["mountPath"] for m in parts.mounts}
    env = env_of(parts)
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert env[TASK_ENV_SCRIPT].endswith("nccl-env-profile.sh")
    assert env["LD_LIBRARY_PATH"].split(":")[0] == "/usr/local/nvidia/lib64"
    assert "/usr/local/nvidia/lib" in env["LD_LIBRARY_PATH"].split(":")
    assert not parts.resources


@pytest.mark.parametrize(("machine", "nics"), [("a3-ultragpu-8g", 8), ("a4-highgpu-8g", 8), ("a4x-highgpu-4g", 4)])
def test_rdma_machines_get_their_rdma_nics_and_gib_but_no_sidecar(machine: str, nics: int) -> None:
    parts = fabric_pod_parts(M[machine])
    networks = [n["network"] for n in json.loads(parts.annotations[INTERFACES])]
    assert networks == ["default", *[f"rdma-{i}" for i in range(nics)]]
    assert not parts.containers
    assert {"/usr/local/gib", "/usr/local/nvidia"} <= {m["mountPath"] for m in parts.mounts}
    assert env_of(parts)[TASK_ENV_SCRIPT] == "/usr/local/gib/scripts/set_nccl_env.sh"


@pytest.mark.parametrize(
    ("machine", "efa"),
    [("p5.48xlarge", "32"), ("p5en.48xlarge", "16"), ("p4d.24xlarge", "4"), ("p6-b200.48xlarge", "8")],
)
def test_efa_machines_request_one_efa_per_interface(machine: str, efa: str) -> None:
    parts = fabric_pod_parts(M[machine])
    assert parts.resources == {"vpc.amazonaws.com/efa": efa}
    env = env_of(parts)
    assert env["FI_PROVIDER"] == "efa"
    assert env["LD_LIBRARY_PATH"].startswith("/opt/amazon/efa/lib:")
    assert set(parts.task_env_names) == {"FI_PROVIDER", "LD_LIBRARY_PATH"}
    assert TASK_ENV not in env
    assert not parts.annotations and not parts.containers


def test_machines_without_a_fabric_get_nothing_and_unwired_ones_say_so() -> None:
    for name in ("g6.xlarge", "a2-highgpu-8g", "ct5p-hightpu-4t", "n2-standard-16", "local-4c8g"):
        assert fabric_pod_parts(M[name]) == FabricPodParts(), name
    a3_high = fabric_pod_parts(M["a3-highgpu-8g"])
    assert not a3_high.annotations and a3_high.note and "not wired" in a3_high.note


def test_tpu_worker_env_comes_from_the_pod_index_and_the_slice_hostnames() -> None:
    worker_id, hostnames = tpu_worker_env("v5p-1", 16, "slurm")
    assert worker_id == {
        "name": "TPU_WORKER_ID",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}},
    }
    hosts = hostnames["value"].split(",")
    assert hostnames["name"] == "TPU_WORKER_HOSTNAMES" and len(hosts) == 16
    assert hosts[0] == "v5p-1-0.slurm-workers.slurm.svc.cluster.local"
    assert hosts[15].startswith("v5p-1-15.")
    assert tpu_worker_env("v5e-0", 1, "slurm") == []


@pytest.mark.parametrize("machine", ["a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g"])
def test_the_pods_name_exactly_the_gke_networks_the_gcp_adapter_creates(machine: str) -> None:
    # One source for both sides: the interfaces annotation and the GKE Network objects (and the node
    # NICs behind them) come from the same catalog entry; a pod naming a Network nobody made never starts.
    from slonk_infra.clouds.gcp.gpu_networks import fabric_nics, machine_nics

    m = M[machine]
    fabric = CATALOG.fabric_of(m)
    assert fabric is not None
    pod = json.loads(fabric_pod_parts(m).annotations[INTERFACES])
    nics = machine_nics(m, fabric_nics(fabric, m.gpu_nics, "192.168.0.0/16", "us-central1-a"), CATALOG)
    gpu_nics = [
        n.network for n in nics if n.device_mode == ("RDMA" if fabric.name == "gpudirect-rdma" else "NetDevice")
    ]
    assert [p["network"] for p in pod[1:]] == gpu_nics
    # Interface N of the pod is the node's NIC N: eth1 is RDMA's host gVNIC, which the pod does not take.
    assert [p["interfaceName"] for p in pod[1:]] == [
        f"eth{len(nics) - len(gpu_nics) + 1 + i}" for i in range(len(gpu_nics))
    ]
