"""What a first ``pulumi up`` on GKE and EKS needs, checked on the rendered stacks.

The gcp and aws programs run under mocks with the shipped stacks, plus A3 Ultra and A4 pools on GKE,
and the rendered objects are held to: worker requests that fit their nodes beside the system pods,
an explicit StorageClass on every dynamically provisioned claim, the GPU fabric wired into A3 Mega /
A3 Ultra / A4 / p5 pods, and the TPU worker environment on multi-host slices. Declarations that
cannot deploy are refused before any resource is declared.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.stacks import CONFIG_KEY
from slonk_infra.offline.render import ProgramRun, run_program
from slonk_infra.offline.runner import Registration
from slonk_infra.plan import Request, fits
from slonk_infra.policy.claims_name_a_storage_class import claims_name_a_storage_class
from slonk_infra.policy.config import resolve
from slonk_infra.policy.runner import run_policies
from tests.support import declaration, parse_quantity_m, parse_quantity_mib

CATALOG = load_catalog()
STATEFULSET = "kubernetes:apps/v1:StatefulSet"


def gcp_with_rdma() -> dict[str, Any]:
    """The shipped gcp stack plus an A3 Ultra and an A4 pool (GPUDirect-RDMA)."""
    raw = copy.deepcopy(declaration("gcp"))
    raw["pools"] += [
        {"name": "h200", "kind": "gpu", "accelerator": {"type": "h200", "count": 8}, "nodes": 2},
        {"name": "b200", "kind": "gpu", "accelerator": {"type": "b200", "count": 8}, "nodes": 2},
    ]
    return raw


@pytest.fixture(scope="module")
def runs() -> dict[str, ProgramRun]:
    return {
        "gcp": run_program("gcp", {CONFIG_KEY: gcp_with_rdma()}),
        "aws": run_program("aws", {CONFIG_KEY: declaration("aws")}),
    }


def workers(run: ProgramRun) -> dict[str, dict[str, Any]]:
    """Worker StatefulSets of a run by group name."""
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in run.registrations
        if r.type == STATEFULSET and r.inputs["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"
    }


def pod_request(template: dict[str, Any]) -> Request:
    """What the scheduler adds up for a pod: its containers plus native sidecars (init, restartPolicy Always)."""
    spec = template["spec"]
    running = [*spec["containers"], *[c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]]
    cpu = sum(parse_quantity_m(c.get("resources", {}).get("requests", {}).get("cpu", "0")) for c in running)
    mem = sum(parse_quantity_mib(c.get("resources", {}).get("requests", {}).get("memory", "0")) for c in running)
    return Request(cpu, mem)


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_rendered_worker_requests_fit_beside_the_system_pods(runs: dict[str, ProgramRun], cloud: str) -> None:
    run = runs[cloud]
    assert run.plan is not None
    for name, sts in workers(run).items():
        group = run.plan.group(name)
        budget = group.budget
        pod = pod_request(sts["spec"]["template"])
        slurmd = Request(pod.cpu_m - budget.sidecars.cpu_m, pod.memory_mib - budget.sidecars.memory_mib)
        assert fits(budget, slurmd), (name, pod, budget)
        assert pod.cpu_m + budget.daemonsets.cpu_m <= budget.allocatable.cpu_m
        assert pod.memory_mib + budget.daemonsets.memory_mib <= budget.allocatable.memory_mib
        # And Slurm promises exactly what slurmd's container gets.
        slurm_conf = next(
            r.inputs["data"]["slurm.conf"]
            for r in run.registrations
            if r.type == "kubernetes:core/v1:ConfigMap" and "slurm.conf" in r.inputs.get("data", {})
        )
        line = next(ln for ln in slurm_conf.splitlines() if ln.startswith(f"NodeName={group.hostlist} "))
        assert f"RealMemory={slurmd.memory_mib}" in line


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_every_dynamic_claim_names_the_clouds_storage_class(runs: dict[str, ProgramRun], cloud: str) -> None:
    expected = CATALOG.storage.block_classes[cloud].name
    claims = [
        r.inputs["spec"]
        for r in runs[cloud].registrations
        if r.type == "kubernetes:core/v1:PersistentVolumeClaim" and not r.inputs["spec"].get("volumeName")
    ]
    assert claims, "slurmctld's state claim at least"
    assert all(c["storageClassName"] == expected for c in claims)
    assert run_policies([claims_name_a_storage_class], runs[cloud].registrations, resolve({}, [])).violations == []


def test_the_claim_policy_refuses_a_classless_claim_on_a_managed_cluster(runs: dict[str, ProgramRun]) -> None:
    regs = list(runs["aws"].registrations)
    i = next(
        i for i, r in enumerate(regs) if r.type == "kubernetes:core/v1:PersistentVolumeClaim" and "slurmctld" in r.name
    )
    spec = {k: v for k, v in regs[i].inputs["spec"].items() if k != "storageClassName"}
    regs[i] = Registration(**{**regs[i].__dict__, "inputs": {**regs[i].inputs, "spec": spec}})
    [violation] = run_policies([claims_name_a_storage_class], regs, resolve({}, [])).violations
    assert "slurmctld-state" in violation.message and "storageClassName" in violation.message


def test_a_local_claim_uses_the_cluster_default_and_says_so() -> None:
    run = run_program("local", {CONFIG_KEY: declaration("local")})
    claims = [r.inputs for r in run.registrations if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    state = next(c for c in claims if c["metadata"]["name"] == "slurmctld-state")
    assert "storageClassName" not in state["spec"]
    assert state["metadata"]["annotations"]["slonk.dev/storage-class"] == "the cluster's default StorageClass"


@pytest.mark.parametrize(
    ("group", "networks"),
    [
        ("h100-a", [f"vpc{i}" for i in range(1, 9)]),
        ("h200", [f"rdma-{i}" for i in range(8)]),
        ("b200", [f"rdma-{i}" for i in range(8)]),
    ],
)
def test_gke_gpu_pods_carry_their_fabric(runs: dict[str, ProgramRun], group: str, networks: list[str]) -> None:
    template = workers(runs["gcp"])[group]["spec"]["template"]
    notes = template["metadata"]["annotations"]
    assert notes["networking.gke.io/default-interface"] == "eth0"
    assert [n["network"] for n in json.loads(notes["networking.gke.io/interfaces"])] == ["default", *networks]
    containers = {c["name"]: c for c in template["spec"]["containers"]}
    slurmd_env = {e["name"]: e.get("value") for e in containers["slurmd"]["env"]}
    assert "LD_LIBRARY_PATH" in slurmd_env and "SLONK_TASK_ENV_SCRIPT" in slurmd_env
    assert "LD_LIBRARY_PATH" in slurmd_env["SLONK_TASK_ENV"].split(",")
    hosts = {v["hostPath"]["path"] for v in template["spec"]["volumes"] if "hostPath" in v}
    if networks[0] == "vpc1":
        assert "tcpxo-daemon" in containers and "devices.gke.io/container.tcpxo-daemon" in notes
        assert "/dev/aperture_devices" in hosts
    else:
        assert set(containers) == {"slurmd"} and "/home/kubernetes/bin/gib" in hosts


def test_p5_pods_request_every_efa_interface(runs: dict[str, ProgramRun]) -> None:
    for name in ("h100-a", "h100-b"):
        slurmd = next(c for c in workers(runs["aws"])[name]["spec"]["template"]["spec"]["containers"])
        resources = slurmd["resources"]
        assert resources["requests"]["vpc.amazonaws.com/efa"] == resources["limits"]["vpc.amazonaws.com/efa"] == "32"
        env = {e["name"]: e.get("value") for e in slurmd["env"]}
        assert env["FI_PROVIDER"] == "efa" and "/opt/amazon/efa/lib" in env["LD_LIBRARY_PATH"]
    cpu = next(iter(workers(runs["aws"])["cpu"]["spec"]["template"]["spec"]["containers"]))
    assert "vpc.amazonaws.com/efa" not in cpu["resources"]["requests"]


def test_multi_host_tpu_slices_get_their_worker_env(runs: dict[str, ProgramRun]) -> None:
    for name in ("v5p-0", "v5p-1"):
        slurmd = workers(runs["gcp"])[name]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in slurmd["env"]}
        assert env["TPU_WORKER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
            "metadata.labels['apps.kubernetes.io/pod-index']"
        )
        hosts = env["TPU_WORKER_HOSTNAMES"]["value"].split(",")
        assert len(hosts) == 16 and hosts[0] == f"{name}-0.slurm-workers.slurm.svc.cluster.local"
        # the slice's own two, then what GKE's TPU device plugin sets on the container (TPU_* a prefix)
        forwarded = env["SLONK_TASK_ENV"]["value"].split(",")
        assert forwarded[:2] == ["TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES"]
        assert forwarded[2:] == ["TPU_*", "VBAR_CONTROL_SERVICE_URL", "ENABLE_ICI_RESILIENCY"]


def _refused(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(DeclarationError) as err:
        build_plan(raw)
    return [str(p) for p in err.value.problems]


def test_a_gke_version_without_the_fabric_is_refused() -> None:
    raw = gcp_with_rdma()
    raw["kubernetes"]["version"] = "1.30"
    problems = _refused(raw)
    assert len(problems) == 2  # A3 Ultra needs 1.31, A4 1.32; A3 Mega's TCPXO is in 1.30
    assert all(p.startswith("kubernetes.version: gpudirect-rdma on a") for p in problems)
    assert any("a3-ultragpu-8g needs GKE 1.31.4-gke.1183000" in p and "'h200'" in p for p in problems)


def test_multi_host_slices_need_the_pod_index_label() -> None:
    # The pod-index label (1.28) is below the 1.29 floor of the native munged sidecar: one refusal covers both.
    raw = copy.deepcopy(declaration("gcp"))
    raw["pools"] = [p for p in raw["pools"] if p["kind"] == "cpu"]
    raw["kubernetes"]["version"] = "1.27"
    [problem] = _refused(raw)
    assert problem.startswith("kubernetes.version: 1.27 is older than 1.29")


def test_sizes_and_placement_the_cloud_would_refuse_are_refused_by_the_plan() -> None:
    raw = copy.deepcopy(declaration("aws"))
    raw["storage"][1]["capacityGib"] = 38000
    raw["pools"][0]["compactPlacement"] = True
    problems = _refused(raw)
    assert any(p.startswith("storage[1].capacityGib: 38000 GiB is not an FSx for Lustre") for p in problems)
    assert any(p.startswith("pools[0].compactPlacement: true cannot be honoured") for p in problems)
