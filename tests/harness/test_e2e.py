"""The container tier's pure parts (testing/e2e), without podman: what it renders and runs, and the names and
volumes it gives pods. The tier itself (``bash tools/e2e.sh``) runs the pods."""

from __future__ import annotations

import ipaddress
import stat
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from slonk_infra import vocab
from slonk_infra.declaration.stacks import load_declaration
from testing.e2e.cluster import Cluster
from testing.e2e.kube import Objects, dns_names, fill_volume
from testing.e2e.nodes import PROFILES, TpuProfile
from testing.e2e.podman import wait_for
from testing.e2e.scenarios import SCENARIOS
from testing.e2e.stack import REPO, ClusterSecrets, render, render_raw


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> ClusterSecrets:
    return ClusterSecrets(
        keys_dir=tmp_path_factory.mktemp("keys"),
        login_host_key="-----BEGIN OPENSSH PRIVATE KEY-----\nnot a key\n-----END OPENSSH PRIVATE KEY-----\n",
        user_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHarness researcher@e2e",
    )


def test_gpu_shaped_runs_slurmrestd_and_local_runs_slurmdbd(secrets: ClusterSecrets) -> None:
    gpu = render("gpu-shaped", "26.05", secrets)
    assert [d["metadata"]["name"] for d in gpu.deployments()] == ["slurmrestd"]
    assert "AuthAltTypes=auth/jwt" in gpu.objects.get("ConfigMap", "slurm-config")["data"]["slurm.conf"]
    local = render("local", "26.05", secrets)
    assert [d["metadata"]["name"] for d in local.deployments()] == [vocab.SLURMDBD]


def test_operations_controller_is_not_run_and_the_run_says_so(secrets: ClusterSecrets) -> None:
    raw = load_declaration(str(REPO / "stacks" / "Pulumi.gcp.yaml"))
    assert raw["operations"]["enabled"]
    raw["slurm"].pop("accounting")  # its accounts name none of the tier's researchers
    rendered = render_raw("gcp", raw, "26.05", secrets)
    ops = [
        d["metadata"]["name"] for d in rendered.objects.of_kind("Deployment") if d["metadata"]["name"] != "slurmrestd"
    ]
    assert ops, "the gcp stack renders the operations controller"
    assert [d["metadata"]["name"] for d in rendered.deployments()] == ["slurmrestd"]
    said = [s for s in rendered.standins if s.startswith("Deployment ")]
    assert said == [f"Deployment {', '.join(ops)} not run: it needs a Kubernetes API server"]


def test_declared_version_and_users_are_stand_ins_said_aloud(secrets: ClusterSecrets) -> None:
    rendered = render("local", "26.05", secrets)
    assert rendered.plan.declaration.image.slurm_version == "26.05"
    assert any(s.startswith("image.slurmVersion ") and s.endswith("-> 26.05 (the Slurm the test image carries)")
               for s in rendered.standins)  # fmt: skip
    # The local stack declares its researchers: kept as declared, the run's key added beside theirs.
    users = rendered.plan.declaration.users
    assert [u.name for u in users] == ["alice", "bob"]
    assert all(secrets.user_public_key in u.ssh_authorized_keys and len(u.ssh_authorized_keys) == 2 for u in users)
    assert not [s for s in rendered.standins if s.startswith("users ")]
    # A declaration with no users gets the tier's researchers, said so.
    gpu = render("gpu-shaped", "26.05", secrets)
    assert [u.name for u in gpu.plan.declaration.users] == ["alice", "bob"]
    assert [s for s in gpu.standins if s.startswith("users alice (uid 2001) and bob (uid 2002")]


def test_rest_api_scenario_applies_only_where_declared(secrets: ClusterSecrets) -> None:
    scenario = next(s for s in SCENARIOS if s.title == "the REST API")
    for name, applies in (("gpu-shaped", True), ("local", False)):
        cluster = cast(Any, SimpleNamespace(rendered=render(name, "26.05", secrets)))
        assert (scenario.applies(cluster) is None) is applies, name
    # the last cluster is local's: no GPUs, no TPUs, no fabric, one controller (with state archives); the rest
    # applies to every declaration
    applies_to_local = {s.number for s in SCENARIOS if s.applies(cluster) is None}
    # (its accounting declares no QOS with a GPU limit, so no scenario 21)
    assert applies_to_local == {1, 2, 3, 4, 5, 6, 7, 14, 18, 19, 20, 22, 23, 24}


def test_the_accounting_declaration_is_gpu_shaped_with_a_declared_qos_gpu_limit(secrets: ClusterSecrets) -> None:
    rendered = render("accounting", "26.05", secrets)
    conf = rendered.objects.get("ConfigMap", vocab.CONFIG_MAP)["data"]["slurm.conf"]
    assert "Gres=gpu:h100:8" in conf and "AccountingStorageTRES=gres/gpu" in conf
    desired = rendered.objects.get("ConfigMap", vocab.ACCOUNTING_MAP)["data"][vocab.ACCOUNTING_DESIRED_FILE]
    assert '"gres/gpu": 8' in desired
    # The whole day's GPUs and the GPU limit apply; no CPU node shares the default partition.
    cluster = cast(Any, SimpleNamespace(rendered=rendered))
    applies = {s.number for s in SCENARIOS if s.applies(cluster) is None}
    assert {9, 10, 13, 19, 20, 21, 22, 23, 24} <= applies and 15 not in applies
    assert sorted(d["metadata"]["name"] for d in rendered.deployments()) == [vocab.SLURMDBD]


def test_failover_scenarios_apply_where_a_backup_controller_is_declared(secrets: ClusterSecrets) -> None:
    wanted = {16, 17, 18}
    scenarios = [s for s in SCENARIOS if s.number in wanted]
    for name, applies in (("gpu-eks", wanted), ("gpu-shaped", set()), ("local", {18})):
        cluster = cast(Any, SimpleNamespace(rendered=render(name, "26.05", secrets)))
        assert {s.number for s in scenarios if s.applies(cluster) is None} == applies, name


def test_objects_carry_what_the_declared_cloud_layer_hands_the_slurm_layer(secrets: ClusterSecrets) -> None:
    """The cloud layer's own result, not a copy of its rules: GKE pins workers and has a system pool,
    a local cluster has neither; a Filestore volume is the cloud's CSI source."""
    gpu = render("gpu-shaped", "26.05", secrets).objects
    ctld = gpu.get("StatefulSet", "slurmctld")["spec"]["template"]["spec"]
    assert ctld["nodeSelector"] == {vocab.SYSTEM_ROLE_LABEL: vocab.SYSTEM_ROLE}
    assert vocab.TOPOLOGY_LABELS in gpu.get("ConfigMap", vocab.TOPOLOGY_MAP)["metadata"]["annotations"]
    (pv,) = gpu.of_kind("PersistentVolume")
    assert pv["spec"]["csi"]["driver"] == "filestore.csi.storage.gke.io"
    local = render("local", "26.05", secrets).objects
    assert "nodeSelector" not in local.get("StatefulSet", "slurmctld")["spec"]["template"]["spec"]


def test_dns_names_of_a_statefulset_pod_and_of_a_deployment_pod() -> None:
    svc = {"metadata": {"name": "slurmrestd"}}
    assert dns_names("slurmrestd-abc-12345", "slurm", None, [svc]) == [
        "slurmrestd",
        "slurmrestd.slurm",
        "slurmrestd.slurm.svc",
        "slurmrestd.slurm.svc.cluster.local",
    ]
    names = dns_names("cpu-a-0", "slurm", "slurm-workers", [])
    assert names[0] == "cpu-a-0.slurm-workers"
    assert names[-1] == "cpu-a-0.slurm-workers.slurm.svc.cluster.local"


def test_secret_volume_items_keep_their_modes(tmp_path: Path) -> None:
    objects = Objects([{"kind": "Secret", "metadata": {"name": "k"}, "data": {"key": "aGVsbG8="}}])
    volume = {"name": "v", "secret": {"secretName": "k", "items": [{"key": "key", "path": "sub/f", "mode": 0o400}]}}
    fill_volume(tmp_path / "v", volume, objects)
    f = tmp_path / "v" / "sub" / "f"
    assert f.read_bytes() == b"hello"
    assert stat.S_IMODE(f.stat().st_mode) == 0o400


def test_tpu_profile_gives_what_the_device_plugin_gives() -> None:
    """The values GKE's TPU device plugin computes (its TestInitEnvs cases; docs/containers.md)."""
    v5p = TpuProfile.env("v5p", "2x2x2", 4)
    assert v5p["TPU_ACCELERATOR_TYPE"] == "v5p-16"
    assert (v5p["TPU_HOST_BOUNDS"], v5p["TPU_CHIPS_PER_HOST_BOUNDS"]) == ("1,1,2", "2,2,1")
    assert v5p["HOST_BOUNDS"] == v5p["TPU_HOST_BOUNDS"] and v5p["WRAP"] == "false,false,false"
    assert v5p["TPU_RUNTIME_METRICS_PORTS"] == "8431,8432,8433,8434" and v5p["TPU_SKIP_MDS_QUERY"] == "true"
    v6e = TpuProfile.env("v6e", "4x4", 4)
    assert (v6e["TPU_ACCELERATOR_TYPE"], v6e["TPU_HOST_BOUNDS"], v6e["TPU_CHIPS_PER_HOST_BOUNDS"]) == (
        "v6e-16",
        "2,2,1",
        "2,2,1",
    )
    assert TpuProfile.devices("v5p", 4) == [
        "/dev/vfio/0",
        "/dev/vfio/1",
        "/dev/vfio/2",
        "/dev/vfio/3",
        "/dev/vfio/vfio",
    ]
    assert TpuProfile.devices("v4", 2) == ["/dev/accel0", "/dev/accel1"]


def test_each_declaration_runs_on_its_clouds_node_profile(secrets: ClusterSecrets) -> None:
    assert PROFILES["gcp"].gpu is not None and PROFILES["gcp"].gpu.library_dir == f"{vocab.GPU_DRIVER_DIR}/lib64"
    assert PROFILES["gcp"].gpu.in_linker_cache is False  # the case slurmd's bare environment breaks
    assert PROFILES["aws"].gpu is not None and PROFILES["aws"].efa
    for name, cloud, kinds in (
        ("gpu-shaped", "gcp", {"gpu"}),
        ("gpu-eks", "aws", {"gpu"}),
        ("tpu-gke", "gcp", {"tpu"}),
    ):
        rendered = render(name, "26.05", secrets)
        assert rendered.plan.declaration.cloud == cloud
        assert {g.kind for g in rendered.plan.groups} - {"cpu"} == kinds
        # every GPU/TPU group is said to run on the profile, and no GPU check is switched off any more
        assert any("profile (testing/e2e/nodes.py)" in s for s in rendered.standins), rendered.standins
        groups = rendered.objects.get("ConfigMap", vocab.SCRIPTS_MAP)["data"][vocab.HEALTH_GROUPS_FILE]
        assert all(line.split()[1] != "0" for line in groups.splitlines() if line.split()[0].startswith("h100"))
    tpu = render("tpu-gke", "26.05", secrets).plan
    assert any(g.kind == "tpu" and g.replicas > 1 for g in tpu.groups)


def test_a_timed_out_wait_says_what_it_last_saw() -> None:
    with pytest.raises(TimeoutError, match=r"job 7 in RUNNING: not reached within 0s; last seen PENDING"):
        wait_for("job 7 in RUNNING", lambda: None, 0, interval=0, seen=lambda: "PENDING")


def test_running_out_of_test_network_addresses_names_the_network() -> None:
    """The harness never reuses an address within a run; when the network's are spent the error says so
    (a bare StopIteration said nothing), and addresses are handed out once each, in order."""
    cluster = Cluster.__new__(Cluster)  # only the address allocator: no podman
    cluster.subnet = ipaddress.IPv4Network("10.200.16.0/30")
    cluster._ips = (str(ip) for ip in cluster.subnet.hosts())
    cluster._ips_lock = threading.Lock()
    assert [cluster._next_ip(), cluster._next_ip()] == ["10.200.16.1", "10.200.16.2"]
    with pytest.raises(RuntimeError, match=r"10\.200\.16\.0/30 has no address left"):
        cluster._next_ip()
