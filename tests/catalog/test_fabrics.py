"""GPU fabrics in the catalog: which machines have which, the pod wiring and the GKE versions each needs."""

from __future__ import annotations

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.catalog.fabrics import gke_version_key, minor_of

CATALOG = load_catalog()
M = CATALOG.machines


def test_every_gpu_nic_machine_has_a_fabric_and_every_efa_machine_efa() -> None:
    for m in CATALOG.machines.values():
        if m.cloud == "gcp" and m.gpu_nics:
            assert m.fabric and m.fabric.startswith("gpudirect"), m.name
        if m.cloud == "aws":
            assert (m.fabric == "efa") == (m.efa_interfaces > 0), m.name
    assert M["a3-megagpu-8g"].fabric == "gpudirect-tcpxo"
    assert {M[n].fabric for n in ("a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g")} == {"gpudirect-rdma"}


def test_wired_fabrics_name_their_sources() -> None:
    for fabric in CATALOG.fabrics.values():
        if not fabric.wired:
            assert fabric.note
            continue
        assert fabric.workload is not None and fabric.workload.source
        if fabric.cloud == "gcp":
            assert fabric.interfaces is not None and fabric.interfaces.source
            assert fabric.installer is not None and fabric.installer.source
            assert fabric.min_gke and fabric.min_gke_source
        else:
            assert fabric.resource == "vpc.amazonaws.com/efa" and fabric.image_step


def test_tcpxo_interfaces_sidecar_and_devices() -> None:
    tcpxo = CATALOG.fabrics["gpudirect-tcpxo"]
    assert tcpxo.interfaces is not None and tcpxo.sidecar is not None
    pairs = tcpxo.interfaces.pairs(M["a3-megagpu-8g"].gpu_nics)
    assert pairs[0] == ("eth0", "default")
    assert pairs[1:] == [(f"eth{i}", f"vpc{i}") for i in range(1, 9)]
    devices = tcpxo.sidecar.devices(8)
    assert devices[:8] == [f"/dev/nvidia{i}" for i in range(8)]
    assert "/dev/dmabuf_import_helper" in devices
    assert "NET_ADMIN" in tcpxo.sidecar.capabilities


def test_rdma_interfaces_skip_the_host_gvnic() -> None:
    rdma = CATALOG.fabrics["gpudirect-rdma"]
    assert rdma.interfaces is not None
    assert rdma.interfaces.pairs(8)[1:] == [(f"eth{i + 2}", f"rdma-{i}") for i in range(8)]
    assert rdma.interfaces.pairs(M["a4x-highgpu-4g"].gpu_nics)[-1] == ("eth5", "rdma-3")
    assert rdma.dranet is not None and rdma.dranet.device_class == "mrdma.google.com"


@pytest.mark.parametrize(
    ("machine", "version", "refused"),
    [
        ("a3-megagpu-8g", "1.27", True),
        ("a3-megagpu-8g", "1.28", False),
        ("a3-megagpu-8g", "1.33", False),
        ("a3-ultragpu-8g", "1.30", True),
        ("a3-ultragpu-8g", "1.31", False),
        ("a3-ultragpu-8g", "1.31.3", True),
        ("a3-ultragpu-8g", "1.31.4", False),
        ("a3-ultragpu-8g", "1.31.4-gke.1000000", True),
        ("a4-highgpu-8g", "1.31", True),
        ("a4-highgpu-8g", "1.32", False),
        ("a4x-highgpu-4g", "1.33.3", True),
        ("a4x-highgpu-4g", "1.34", False),
    ],
)
def test_gke_version_floors(machine: str, version: str, refused: bool) -> None:
    fabric = CATALOG.fabric_of(M[machine])
    assert fabric is not None
    problem = fabric.version_problem(M[machine], version)
    assert (problem is not None) == refused, problem
    if problem:
        assert machine in problem and version in problem


def test_minor_only_versions_report_the_patch_floor() -> None:
    rdma = CATALOG.fabrics["gpudirect-rdma"]
    assert rdma.patch_floor(M["a3-ultragpu-8g"], "1.31") == "1.31.4-gke.1183000"
    assert rdma.patch_floor(M["a3-ultragpu-8g"], "1.33") is None


def test_version_keys() -> None:
    assert gke_version_key("1.31.4-gke.1183000") > gke_version_key("1.31.4")
    assert gke_version_key("1.9") < gke_version_key("1.10")
    assert minor_of("1.32.2-gke.1475000") == "1.32"
    with pytest.raises(ValueError, match="not a GKE version"):
        gke_version_key("latest")


def test_tpu_multihost_env_is_what_jax_reads() -> None:
    env = CATALOG.tpu_env
    assert (env.worker_id, env.worker_hostnames, env.coordinator_port) == (
        "TPU_WORKER_ID",
        "TPU_WORKER_HOSTNAMES",
        8476,
    )
    assert CATALOG.platform.kubernetes.pod_index_label == "apps.kubernetes.io/pod-index"
