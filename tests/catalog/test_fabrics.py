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


def test_gpudirect_networks_follow_gkes_guides() -> None:
    tcpxo, rdma = CATALOG.fabrics["gpudirect-tcpxo"].networks, CATALOG.fabrics["gpudirect-rdma"].networks
    assert tcpxo is not None and rdma is not None
    # TCPXO: one VPC per GPU NIC, MTU 8244, NetDevice; RDMA: gvnic-1, then one RoCE VPC, MTU 8896.
    assert (tcpxo.layout, tcpxo.device_mode, tcpxo.mtu, tcpxo.firewall, tcpxo.host_nic) == (
        "vpc-per-nic",
        "NetDevice",
        8244,
        True,
        None,
    )
    assert (rdma.layout, rdma.device_mode, rdma.mtu, rdma.network_profile, rdma.firewall) == (
        "subnet-per-nic",
        "RDMA",
        8896,
        "{zone}-vpc-roce",
        False,
    )
    assert rdma.host_nic is not None and rdma.host_nic.network == "gvnic-1"
    # The pods skip eth1 exactly when the fabric gives the node a host NIC first.
    for fabric in (CATALOG.fabrics["gpudirect-tcpxo"], CATALOG.fabrics["gpudirect-rdma"]):
        assert fabric.networks is not None and fabric.interfaces is not None
        assert fabric.interfaces.first_interface == 1 + (fabric.networks.host_nic is not None)


def test_installers_cover_every_wired_machine_once_with_pinned_images() -> None:
    for fabric in CATALOG.fabrics.values():
        if fabric.cloud != "gcp" or not fabric.wired:
            continue
        assert fabric.installer is not None
        wired = {m.name for m in CATALOG.machines.values() if m.fabric == fabric.name}
        by_role: dict[str, set[str]] = {}
        for ds in fabric.installer.daemonsets:
            assert set(ds.machines) <= wired, ds.name
            assert ":" in ds.image.rsplit("/", 1)[-1] and not ds.image.endswith(":latest"), ds.image
            assert ds.source and ds.cpu_m > 0
            assert not by_role.setdefault(ds.role, set()) & set(ds.machines), f"{ds.name} overlaps its role"
            by_role[ds.role] |= set(ds.machines)
        assert all(machines == wired for machines in by_role.values()), fabric.name
        assert "@sha256:" in fabric.installer.pause_image
    tcpxo = CATALOG.fabrics["gpudirect-tcpxo"].installer
    assert tcpxo is not None
    assert {d.name: d.role for d in tcpxo.daemonsets} == {
        "nccl-tcpxo-installer": "tcpxo-plugin",
        "nri-device-injector": "nri-device-injector",
    }
    # The plugin installer and the sidecar come from the same TCPXO release (v1.0.15 with RxDM v1.0.21).
    assert tcpxo.daemonsets[0].image.endswith(":v1.0.15")
    rdma = CATALOG.fabrics["gpudirect-rdma"].installer
    assert rdma is not None
    arm = [d for d in rdma.daemonsets if d.arch == "arm64"]
    assert [d.machines for d in arm] == [("a4x-highgpu-4g",)] and "arm64" in arm[0].image


def test_faulty_host_report_is_marked_on_the_families_the_api_accepts() -> None:
    # "Report faulty host": A4X Max, A4X, A4, A3 Ultra, A3 Mega and A3 High (8 GPUs) only.
    marked = {m.name for m in CATALOG.machines.values() if m.faulty_host_report}
    assert marked == {"a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g"}
    assert all(M[n].faulty_host_report_source for n in marked)


def test_local_ssd_and_host_maintenance_come_with_sources() -> None:
    assert {
        n: M[n].local_ssd_ephemeral for n in ("a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g")
    } == {
        "a3-highgpu-8g": 16,
        "a3-megagpu-8g": 16,
        "a3-ultragpu-8g": 32,
        "a4-highgpu-8g": 32,
    }
    assert M["a3-megagpu-8g"].host_maintenance_interval == "PERIODIC"
    for m in CATALOG.machines.values():
        assert bool(m.local_ssd_ephemeral) == bool(m.local_ssd_source), m.name
        assert (m.host_maintenance_interval is None) == (m.host_maintenance_source is None), m.name


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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"faulty_host_report": True}, "faulty_host_report needs faulty_host_report_source"),
        ({"local_ssd_ephemeral": 16}, "local_ssd_ephemeral needs local_ssd_source"),
        ({"host_maintenance_interval": "PERIODIC"}, "host_maintenance_interval needs host_maintenance_source"),
        (
            {"cloud": "aws", "eni_max_pods": 58, "faulty_host_report": True, "faulty_host_report_source": "x"},
            "GCP machines only",
        ),
    ],
)
def test_machine_fields_without_their_source_or_on_the_wrong_cloud_are_refused(
    extra: dict[str, object], message: str
) -> None:
    from pydantic import ValidationError

    from slonk_infra.catalog.machines import MachineType

    body: dict[str, object] = {
        "name": "m",
        "cloud": "gcp",
        "kind": "cpu",
        "vcpus": 8,
        "sockets": 1,
        "threads_per_core": 2,
        "memory_gib": 32,
        "source": "test",
    }
    with pytest.raises(ValidationError, match=message):
        MachineType.model_validate(body | extra)
