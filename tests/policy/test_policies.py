"""The policy pack: each policy on violating and conforming resources, the config file, the offline check."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

import slonk_infra.offline.render
from slonk_infra.catalog import load_catalog
from slonk_infra.cli import main
from slonk_infra.declaration.stacks import load_stack_config
from slonk_infra.offline.render import run_program
from slonk_infra.offline.runner import UNKNOWN, Registration
from slonk_infra.policy import ALL_POLICIES, PolicyConfig, PolicyConfigError, load_policy_config
from slonk_infra.policy import policies as P
from slonk_infra.policy.config import resolve
from slonk_infra.policy.images import parse_image
from slonk_infra.policy.privileged_only_where_needed import host_installer_images
from slonk_infra.policy.runner import CheckResult, analyzer_props, check_registrations, format_report
from slonk_infra.policy.slurmconf import gres_conf_counts, node_gres

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")

REPO = Path(__file__).resolve().parents[2]
CONFIG_FILE = REPO / "policies" / "policy-config.json"
IMAGE = json.loads(CONFIG_FILE.read_text())["uniform-cuda-image"]["image"]
TAGGED = IMAGE.split("@", 1)[0]
SHIPPED = load_policy_config(CONFIG_FILE)


# ------------------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def config() -> PolicyConfig:
    return load_policy_config(CONFIG_FILE)


@pytest.fixture(scope="module")
def gcp() -> list[Registration]:
    return run_program("gcp", load_stack_config("gcp", REPO / "stacks")).registrations


@pytest.fixture(scope="module")
def aws() -> list[Registration]:
    return run_program("aws", load_stack_config("aws", REPO / "stacks")).registrations


def named(regs: list[Registration], name: str) -> Registration:
    found = [r for r in regs if r.name == name]
    assert len(found) == 1, name
    return found[0]


def edited(regs: list[Registration], name: str, edit: Callable[[dict[str, Any]], None]) -> list[Registration]:
    """The registrations with ``name``'s inputs changed by ``edit`` (drift introduced after rendering)."""
    out = []
    for reg in regs:
        if reg.name == name:
            inputs = copy.deepcopy(reg.inputs)
            edit(inputs)
            reg = dataclasses.replace(reg, inputs=inputs)
        out.append(reg)
    return out


def opts(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def run_resource(
    policy: ResourceValidationPolicy,
    typ: str,
    props: dict[str, Any],
    *,
    protect: bool = False,
    settings: dict[str, Any] | None = None,
    name: str = "r",
) -> list[str]:
    """Messages ``policy`` reports for one resource, with the analyzer's proxy around the props."""
    messages: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        messages.append(message)

    cfg = SHIPPED.for_policy(policy.name) if settings is None else settings
    args = ResourceValidationArgs(typ, analyzer_props(props), f"urn:{name}", name, opts(protect), None, cfg)
    policy.validate(args, report)
    return messages


def run_stack(policy: StackValidationPolicy, regs: list[Registration]) -> list[tuple[str, str | None]]:
    """(message, urn) pairs ``policy`` reports for a stack of registrations."""
    resources = [
        PolicyResource(r.type, analyzer_props(r.inputs), r.urn, r.name, opts(r.protect), None, None, [], {})
        for r in regs
    ]
    found: list[tuple[str, str | None]] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append((message, urn))

    policy.validate(StackValidationArgs(resources, {}), report)
    return found


STS = "kubernetes:apps/v1:StatefulSet"
CM = "kubernetes:core/v1:ConfigMap"


def workload(
    name: str = "h100-a",
    *,
    image: str = IMAGE,
    component: str = "worker",
    slurm: bool = True,
    container: str = "slurmd",
    security: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": component}
    if slurm:
        labels["app.kubernetes.io/name"] = "slurm"
    if component == "worker":
        labels["slonk.dev/group"] = name
    spec: dict[str, Any] = {
        "containers": [{"name": container, "image": image, "securityContext": security or {}}],
        "terminationGracePeriodSeconds": 300.0,
    }
    if component == "worker":
        spec["containers"][0]["lifecycle"] = {"preStop": {"exec": {"command": ["/drain.sh"]}}}
    obj: dict[str, Any] = {
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "slurm", "labels": labels},
        "spec": {
            "replicas": 2.0,
            "updateStrategy": {"type": "OnDelete"},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    obj["spec"].update(extra or {})
    return obj


def set_images(inputs: dict[str, Any], image: str) -> None:
    """Every Slurm container of a pod template on ``image`` (a GPU fabric's own daemon keeps its image)."""
    spec = inputs["spec"]["template"]["spec"]
    sidecars = {f.sidecar.name for f in load_catalog().fabrics.values() if f.sidecar}
    for c in spec["containers"] + spec.get("initContainers", []):
        if c["name"] not in sidecars:
            c["image"] = image


# ---------------------------------------------------------------------------------- shipped stacks
@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_shipped_stacks_pass_check(stack: str) -> None:
    result = CliRunner().invoke(
        main, ["check", stack, "--stacks-dir", str(REPO / "stacks"), "--policy-config", str(CONFIG_FILE)]
    )
    assert result.exit_code == 0, result.output
    assert f"{stack}: OK - 0 mandatory, 0 advisory violation(s)" in result.output
    assert "[mandatory]" not in result.output and "[not checked]" not in result.output


def test_the_one_config_file_names_the_image_every_stack_declares() -> None:
    for stack in ("local", "gcp", "aws"):
        declared = load_stack_config(stack, REPO / "stacks")["slonk-infra:cluster"]["image"]
        assert declared["reference"] == IMAGE
        assert declared["cudaVersion"] == json.loads(CONFIG_FILE.read_text())["uniform-cuda-image"]["cudaVersion"]


# ------------------------------------------------------------------------------ drift in one pool
def test_worker_pool_on_a_tag_fails_and_names_the_pool(gcp: list[Registration], config: PolicyConfig) -> None:
    drifted = edited(gcp, "slonk-gcp-statefulset-h100-b", lambda i: set_images(i, TAGGED))
    result = check_registrations(drifted, config)
    assert result.failed
    assert {v.policy for v in result.violations} == {"uniform-cuda-image"}
    assert all("StatefulSet slurm/h100-b" in v.message for v in result.violations)
    assert all(v.urn == named(gcp, "slonk-gcp-statefulset-h100-b").urn for v in result.violations)
    text = format_report("gcp", result, "policies/policy-config.json")
    assert (
        f"[mandatory] uniform-cuda-image: StatefulSet slurm/h100-b container slurmd: image {TAGGED} "
        "is not pinned by digest" in text
    )
    assert "how to fix:" in text and text.endswith("gcp: FAILED - 4 mandatory, 0 advisory violation(s)")


def test_worker_pool_on_another_pinned_image_fails(gcp: list[Registration], config: PolicyConfig) -> None:
    other = "registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.8.1@sha256:" + "0" * 64
    drifted = edited(gcp, "slonk-gcp-statefulset-h100-b", lambda i: set_images(i, other))
    result = check_registrations(drifted, config)
    assert sorted(v.message for v in result.mandatory) == [
        f"StatefulSet slurm/h100-b container slurmd: image {other} is not the configured Slurm image {IMAGE}",
        f"StatefulSet slurm/h100-b init container munged: image {other} is not the configured Slurm image {IMAGE}",
    ]


def test_check_command_exits_non_zero_on_drift(gcp: list[Registration], monkeypatch: pytest.MonkeyPatch) -> None:
    drifted = edited(gcp, "slonk-gcp-statefulset-h100-b", lambda i: set_images(i, TAGGED))
    real = slonk_infra.offline.render.run_program

    def fake(stack: str, cfg: Any, program: Any = None) -> slonk_infra.offline.render.ProgramRun:
        run = real(stack, cfg)
        return dataclasses.replace(run, registrations=drifted)

    monkeypatch.setattr(slonk_infra.offline.render, "run_program", fake)
    result = CliRunner().invoke(
        main, ["check", "gcp", "--stacks-dir", str(REPO / "stacks"), "--policy-config", str(CONFIG_FILE)]
    )
    assert result.exit_code == 1, result.output
    assert "[mandatory] uniform-cuda-image: StatefulSet slurm/h100-b container slurmd" in result.output


def test_check_command_rejects_a_missing_config(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["check", "gcp", "--stacks-dir", str(REPO / "stacks"), "--policy-config", str(tmp_path / "nope.json")]
    )
    assert result.exit_code == 2
    assert "not found" in result.output


# ------------------------------------------------------------------------------ uniform-cuda-image
def test_uniform_image_accepts_the_configured_image(gcp: list[Registration]) -> None:
    reg = named(gcp, "slonk-gcp-statefulset-h100-a")
    assert run_resource(P.uniform_cuda_image, STS, reg.inputs) == []


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (TAGGED, "is not pinned by digest"),
        ("registry.example.com/slonk/slurm-cuda:latest", "uses the :latest tag"),
        (
            "docker.io/someone/slurm:25.05-cuda12.8.1@sha256:" + "a" * 64,
            "comes from docker.io, which is not an allowed registry",
        ),
        (
            "registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.4.1@sha256:" + "b" * 64,
            "declares CUDA 12.4.1, but the configured cudaVersion is 12.8",
        ),
        ("registry.example.com/slonk/slurm:25.05.3@sha256:" + "c" * 64, "does not declare a CUDA version"),
    ],
)
def test_uniform_image_rejects(image: str, expected: str) -> None:
    messages = run_resource(P.uniform_cuda_image, STS, workload("h100-a", image=image))
    assert any(expected in m for m in messages), messages
    assert all(m.startswith(f"StatefulSet slurm/h100-a container slurmd: image {image} ") for m in messages)
    assert any("is not the configured Slurm image" in m for m in messages)


def test_uniform_image_checks_cuda_against_the_allowed_list() -> None:
    settings = {"cudaVersion": "12.9", "allowedCudaVersions": ["12.8"]}
    image = "registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.9.0@sha256:" + "d" * 64
    messages = run_resource(P.uniform_cuda_image, STS, workload(image=image), settings=settings)
    assert any("cudaVersion 12.9 is not in allowedCudaVersions ['12.8']" in m for m in messages)
    assert any("declares CUDA 12.9.0, which is not in allowedCudaVersions" in m for m in messages)


def test_uniform_image_ignores_workloads_outside_slurm() -> None:
    other = workload("metrics", image="quay.io/prometheus/node-exporter:v1.9.1", component="metrics", slurm=False)
    assert run_resource(P.uniform_cuda_image, "kubernetes:apps/v1:DaemonSet", other) == []


# ------------------------------------------------------------------------- gpu-request-matches-gres
def test_gres_matches_on_gcp(gcp: list[Registration]) -> None:
    assert run_stack(P.gpu_request_matches_gres, gcp) == []


def test_gres_catches_a_gpu_limit_that_differs(gcp: list[Registration]) -> None:
    def four_gpus(i: dict[str, Any]) -> None:
        i["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"

    found = run_stack(P.gpu_request_matches_gres, edited(gcp, "slonk-gcp-statefulset-h100-a", four_gpus))
    assert found == [
        (
            "StatefulSet slurm/h100-a container slurmd: nvidia.com/gpu limit 4, but slurm.conf gives nodes "
            "h100-a-[0-15] Gres=gpu:8",
            named(gcp, "slonk-gcp-statefulset-h100-a").urn,
        )
    ]


def test_gres_catches_tpu_chips_missing_from_slurm_conf(gcp: list[Registration]) -> None:
    def drop_tpu_gres(i: dict[str, Any]) -> None:
        i["data"]["slurm.conf"] = i["data"]["slurm.conf"].replace(" Gres=tpu:v5p:4", "")

    found = run_stack(P.gpu_request_matches_gres, edited(gcp, "slonk-gcp-configmap-slurm-config", drop_tpu_gres))
    assert sorted(m for m, _ in found) == [
        f"StatefulSet slurm/{g} container slurmd: google.com/tpu limit 4, but slurm.conf gives nodes "
        f"{g}-[0-15] Gres=tpu:0"
        for g in ("v5p-0", "v5p-1")
    ]


def test_gres_catches_gres_conf_with_fewer_devices(gcp: list[Registration]) -> None:
    def four_devices(i: dict[str, Any]) -> None:
        i["data"]["gres.conf"] = i["data"]["gres.conf"].replace(
            "h100-b-[0-15] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
            "h100-b-[0-15] Name=gpu Type=h100 File=/dev/nvidia[0-3]",
        )

    found = run_stack(P.gpu_request_matches_gres, edited(gcp, "slonk-gcp-configmap-slurm-config", four_devices))
    assert len(found) == 1
    assert found[0][0].startswith("StatefulSet slurm/h100-b: slurm.conf gives h100-b nodes gpu:8 but gres.conf")
    assert "defines 4 gpu devices" in found[0][0]


def test_gres_catches_a_gpu_worker_slurm_does_not_know(gcp: list[Registration]) -> None:
    extra = workload("h200-x")
    extra["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    reg = dataclasses.replace(named(gcp, "slonk-gcp-statefulset-h100-a"), name="x", urn="urn:x", inputs=extra)
    found = run_stack(P.gpu_request_matches_gres, [*gcp, reg])
    assert found == [
        (
            "StatefulSet slurm/h200-x container slurmd: requests {'gpu': 8} but slurm.conf has no NodeName line "
            "for group h200-x (nodes h200-x-N)",
            "urn:x",
        )
    ]


def test_slurm_conf_parsing_handles_defaults_continuations_and_counts() -> None:
    text = (
        "NodeName=DEFAULT Gres=gpu:a100:4\n"
        "NodeName=a-[0-1] CPUs=8 \\\n  RealMemory=1000\n"
        "NodeName=b-0 Gres=gpu:2,tpu:v5e:4(S:0) # comment\n"
        "PartitionName=x Nodes=a-[0-1]\n"
    )
    assert node_gres(text) == {"a-0": {"gpu": 4}, "a-1": {"gpu": 4}, "b-0": {"gpu": 2, "tpu": 4}}
    gres = "AutoDetect=off\nNodeName=a-[0-1] Name=gpu File=/dev/nvidia[0-3]\nName=tpu Count=4\n"
    assert gres_conf_counts(gres) == {"a-0": {"gpu": 4}, "a-1": {"gpu": 4}, "*": {"tpu": 4}}


# ---------------------------------------------------------------------------------- tpu-slice-shape
def test_tpu_slices_agree_on_gcp(gcp: list[Registration]) -> None:
    assert run_stack(P.tpu_slice_shape, gcp) == []


def test_tpu_slice_catches_replicas_node_count_and_topology(gcp: list[Registration]) -> None:
    def eight(i: dict[str, Any]) -> None:
        i["spec"]["replicas"] = 8.0
        i["spec"]["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "4x4x2"

    def pool(i: dict[str, Any]) -> None:
        i["nodeCount"] = 8.0

    regs = edited(edited(gcp, "slonk-gcp-statefulset-v5p-0", eight), "slonk-gcp-pool-v5p-1", pool)
    messages = sorted(m for m, _ in run_stack(P.tpu_slice_shape, regs))
    assert messages == [
        "StatefulSet slurm/v5p-0: nodeSelector cloud.google.com/gke-tpu-topology=4x4x2 does not match the pool's "
        "tpu_topology 4x4x4",
        "StatefulSet slurm/v5p-0: replicas 8, but TPU slice pool v5p-0 has 16 hosts (topology 4x4x4)",
        "gcp NodePool slonk-gcp-pool-v5p-1: node_count 8, but topology 4x4x4 is 64 chips = 16 hosts of 4 "
        "(ct5p-hightpu-4t)",
    ]


def test_tpu_workload_without_a_pool_must_still_fill_its_slice() -> None:
    sts = workload("v5e")
    spec = sts["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"cloud.google.com/gke-tpu-topology": "4x4"}
    spec["containers"][0]["resources"] = {"limits": {"google.com/tpu": 4.0}}
    reg = Registration(STS, "v5e", "urn:v5e", "", True, sts, False, False, False, (), "")
    assert [m for m, _ in run_stack(P.tpu_slice_shape, [reg])] == [
        "StatefulSet slurm/v5e: 2 replicas x google.com/tpu 4 = 8 chips, but topology 4x4 has 16 chips"
    ]
    sts["spec"]["replicas"] = 4.0
    assert run_stack(P.tpu_slice_shape, [reg]) == []


# ---------------------------------------------------------------------- stateful-resources-protected
@pytest.mark.parametrize(
    "name",
    [
        "slonk-aws-efs-home",
        "slonk-aws-fsx-scratch",
        "slonk-aws-persistentvolume-slurm-home",
        "slonk-aws-persistentvolumeclaim-shared-scratch",
        "slonk-aws-persistentvolumeclaim-slurmctld-state",
    ],
)
def test_stateful_resources_must_be_protected(aws: list[Registration], name: str) -> None:
    reg = named(aws, name)
    assert reg.protect
    assert run_resource(P.stateful_resources_protected, reg.type, reg.inputs, protect=True) == []
    messages = run_resource(P.stateful_resources_protected, reg.type, reg.inputs, protect=False, name=name)
    assert len(messages) == 1 and "is not protected (protect=False)" in messages[0]


def test_filestore_message_names_the_instance(gcp: list[Registration]) -> None:
    reg = named(gcp, "slonk-gcp-filestore-home")
    assert run_resource(P.stateful_resources_protected, reg.type, reg.inputs, name=reg.name) == [
        "gcp Instance slonk-gcp-filestore-home: Filestore instance is not protected (protect=False); deleting or "
        "replacing it destroys the data on it"
    ]


def test_unshared_claims_need_no_protection() -> None:
    claim = {"metadata": {"name": "scratch-0", "namespace": "slurm"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    assert run_resource(P.stateful_resources_protected, "kubernetes:core/v1:PersistentVolumeClaim", claim) == []


def test_shared_volume_must_retain_its_data(aws: list[Registration]) -> None:
    reg = named(aws, "slonk-aws-persistentvolume-slurm-home")
    inputs = copy.deepcopy(reg.inputs)
    inputs["spec"]["persistentVolumeReclaimPolicy"] = "Delete"
    messages = run_resource(P.stateful_resources_protected, reg.type, inputs, protect=True)
    assert messages == [
        "PersistentVolume slurm-home: persistentVolumeReclaimPolicy is Delete; a shared PersistentVolume "
        "(ReadWriteMany) must be Retain so releasing its claim does not delete the data"
    ]


def test_statefulset_claims_must_outlive_the_statefulset() -> None:
    sts = workload("nfs-home", component="nfs", container="nfs")
    sts["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "export"}}]
    assert run_resource(P.stateful_resources_protected, STS, sts) == []
    sts["spec"]["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Delete"}
    assert run_resource(P.stateful_resources_protected, STS, sts) == [
        "StatefulSet slurm/nfs-home: persistentVolumeClaimRetentionPolicy.whenDeleted is Delete; its volume "
        "claims (Slurm data) would be deleted with the StatefulSet"
    ]


# -------------------------------------------------------------------------- no-secrets-in-configmaps
def configmap(data: dict[str, str] | None = None, binary: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "ConfigMap", "metadata": {"name": "site", "namespace": "slurm"}}
    if data is not None:
        obj["data"] = data
    if binary is not None:
        obj["binaryData"] = binary
    return obj


def test_shipped_configmaps_hold_no_secrets(gcp: list[Registration]) -> None:
    maps = [r for r in gcp if r.type == CM]
    # slurm config, topology and scripts, the operations controller's settings, and the accounting
    # reconciler's declaration and scripts (the shipped gcp stack declares slurm.accounting).
    assert len(maps) == 6
    for reg in maps:
        assert run_resource(P.no_secrets_in_configmaps, CM, reg.inputs) == []


RANDOM_B64 = base64.b64encode(os.urandom(1024)).decode()
WRAPPED_B64 = "\n".join(RANDOM_B64[i : i + 76] for i in range(0, len(RANDOM_B64), 76))
PEM_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzbHVybSJ9.c2lnbmF0dXJlc2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("data", "binary", "reason"),
    [
        ({"munge.key": "x"}, None, "key munge.key: key name looks like a credential"),
        ({"jwt_hs256.key": "x"}, None, "key jwt_hs256.key: key name looks like a credential"),
        ({"id": PEM_KEY}, None, "key id: contains a PEM private key block"),
        ({"env": f"SLURM_JWT={JWT}\n"}, None, "key env: contains a JSON Web Token"),
        (
            {"slurmdbd.conf": "DbdHost=x\nStoragePass=hunter2hunter2\n"},
            None,
            "key slurmdbd.conf: line 2 sets StoragePass to a literal value",
        ),
        ({"blob": WRAPPED_B64}, None, "key blob: holds a high-entropy base64 blob of 1368 characters"),
        (None, {"munge": RANDOM_B64}, "key munge: holds 1024 bytes of high-entropy binary data"),
    ],
)
def test_configmap_secrets_are_found(data: dict[str, str] | None, binary: dict[str, str] | None, reason: str) -> None:
    messages = run_resource(P.no_secrets_in_configmaps, CM, configmap(data, binary))
    assert any(m.startswith(f"ConfigMap slurm/site {reason}") for m in messages), messages
    assert not any("hunter2hunter2" in m or RANDOM_B64[:40] in m or JWT in m for m in messages)


def test_configmap_public_material_and_references_pass() -> None:
    cert = "-----BEGIN CERTIFICATE-----\n" + RANDOM_B64 + "\n-----END CERTIFICATE-----\n"
    data = {
        "ca.crt": cert,
        "slurm.conf": "AccountingStoragePass=/var/run/munge/global.socket.2\nAuthType=auth/munge\n",
        "munged.sh": 'PASSWORD="$1"\nexec munged --key-file=/run/munge-key/munge.key\n',
    }
    assert run_resource(P.no_secrets_in_configmaps, CM, configmap(data)) == []


# ------------------------------------------------------------------------------ privileged containers
def test_privileged_allowed_for_worker_slurmd_and_nfs() -> None:
    priv = {"privileged": True}
    assert run_resource(P.privileged_only_where_needed, STS, workload(security=priv)) == []
    nfs = workload("nfs-home", component="nfs", container="nfs", security=priv)
    assert run_resource(P.privileged_only_where_needed, STS, nfs) == []


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            workload("login", component="login", container="login", security={"privileged": True}),
            "StatefulSet slurm/login container login: privileged: true (component login)",
        ),
        (
            workload("login", component="login", container="sshd", security={"capabilities": {"add": ["SYS_ADMIN"]}}),
            "StatefulSet slurm/login container sshd: capabilities.add ['SYS_ADMIN'] (component login)",
        ),
        (
            workload("fake", slurm=False, security={"privileged": True}),
            "StatefulSet slurm/fake container slurmd: privileged: true (component worker)",
        ),
    ],
)
def test_privileged_elsewhere_is_rejected(obj: dict[str, Any], expected: str) -> None:
    messages = run_resource(P.privileged_only_where_needed, STS, obj)
    assert len(messages) == 1 and messages[0].startswith(expected), messages


def _installer(name: str, namespace: str, image: str) -> dict[str, Any]:
    container = {"name": "installer", "image": image, "securityContext": {"privileged": True}}
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"initContainers": [container], "containers": []}}},
    }


def test_the_catalogs_gpudirect_installers_may_run_privileged_and_nothing_that_borrows_their_names() -> None:
    images = host_installer_images()
    assert images, "the catalog pins GPUDirect installers"
    name, allowed = sorted(images.items())[0]
    image = sorted(allowed)[0]
    ds = "kubernetes:apps/v1:DaemonSet"
    assert run_resource(P.privileged_only_where_needed, ds, _installer(name, "kube-system", image)) == []
    # Another namespace, another image, or a StatefulSet with the same name and image: refused.
    for obj, kind in [
        (_installer(name, "slurm", image), ds),
        (_installer(name, "kube-system", "example.com/evil:1"), ds),
        (_installer(name, "kube-system", image), STS),
    ]:
        assert len(run_resource(P.privileged_only_where_needed, kind, obj)) == 1, (obj, kind)


# ------------------------------------------------------------------------------------- tainted pools
def test_shipped_accelerator_pools_are_tainted(gcp: list[Registration], aws: list[Registration]) -> None:
    pools = [r for r in gcp + aws if r.type in ("gcp:container/nodePool:NodePool", "aws:eks/nodeGroup:NodeGroup")]
    assert len(pools) == 10
    for reg in pools:
        assert run_resource(P.gpu_node_pools_tainted, reg.type, reg.inputs) == []


@pytest.mark.parametrize(
    ("name", "taint"),
    [
        ("slonk-gcp-pool-h100-a", "nvidia.com/gpu"),
        ("slonk-gcp-pool-v5p-0", "google.com/tpu"),
        ("slonk-aws-nodegroup-h100-b", "nvidia.com/gpu"),
    ],
)
def test_untainted_accelerator_pools_are_rejected(
    gcp: list[Registration], aws: list[Registration], name: str, taint: str
) -> None:
    reg = named(gcp + aws, name)
    inputs = copy.deepcopy(reg.inputs)
    (inputs.get("nodeConfig") or inputs).pop("taints")
    messages = run_resource(P.gpu_node_pools_tainted, reg.type, inputs, name=name)
    assert len(messages) == 1
    assert name in messages[0] and f"without the {taint} NoSchedule taint" in messages[0]


def test_cpu_pools_need_no_taint(gcp: list[Registration]) -> None:
    reg = named(gcp, "slonk-gcp-pool-cpu")
    assert "taints" not in reg.inputs["nodeConfig"]
    assert run_resource(P.gpu_node_pools_tainted, reg.type, reg.inputs) == []


# --------------------------------------------------------------------------------- operator policies
def test_workers_update_on_delete_only() -> None:
    assert run_resource(P.worker_on_delete_updates, STS, workload()) == []
    rolling = workload(extra={"updateStrategy": {"type": "RollingUpdate"}})
    assert run_resource(P.worker_on_delete_updates, STS, rolling) == [
        "StatefulSet slurm/h100-a: worker group h100-a uses updateStrategy RollingUpdate; any template change "
        "would restart every worker and kill the jobs running on them"
    ]
    controller = workload("slurmctld", component="controller", container="slurmctld", extra={"updateStrategy": {}})
    assert run_resource(P.worker_on_delete_updates, STS, controller) == []


def test_workers_drain_before_they_stop() -> None:
    assert P.worker_graceful_drain.enforcement_level == EnforcementLevel.ADVISORY
    assert run_resource(P.worker_graceful_drain, STS, workload()) == []
    rushed = workload()
    spec = rushed["spec"]["template"]["spec"]
    spec["terminationGracePeriodSeconds"] = 30.0
    del spec["containers"][0]["lifecycle"]
    assert run_resource(P.worker_graceful_drain, STS, rushed) == [
        "StatefulSet slurm/h100-a: terminationGracePeriodSeconds 30 is under 120; slurmd is killed before its "
        "jobs can be requeued",
        "StatefulSet slurm/h100-a container slurmd: no lifecycle.preStop hook; the node is not drained in Slurm "
        "before its pod stops",
    ]


@pytest.mark.parametrize("image", ["busybox", "nginx:latest", "registry.example.com/tools/debug"])
def test_floating_images_are_rejected(image: str) -> None:
    obj = workload("debug", image=image, component="debug", slurm=False, container="debug")
    assert run_resource(P.no_floating_image_tags, "kubernetes:apps/v1:Deployment", obj) == [
        f"Deployment slurm/debug container debug: image {image} floats (no tag, or :latest)"
    ]


def test_pinned_images_and_versioned_charts_pass(aws: list[Registration]) -> None:
    obj = workload("exporter", image="quay.io/prometheus/node-exporter:v1.9.1", component="metrics", slurm=False)
    assert run_resource(P.no_floating_image_tags, STS, obj) == []
    release = named(aws, "slonk-aws-nvidia-device-plugin")
    assert run_resource(P.no_floating_image_tags, release.type, release.inputs) == []
    unpinned = {k: v for k, v in release.inputs.items() if k != "version"}
    assert run_resource(P.no_floating_image_tags, release.type, unpinned, name="dp") == [
        "Helm Release kube-system/nvidia-device-plugin: chart nvidia-device-plugin has no version; the next deploy installs whatever is newest"
    ]


# --------------------------------------------------------------------------- runner and configuration
def test_unknown_values_are_not_checked_rather_than_guessed(config: PolicyConfig) -> None:
    sts = workload(image=UNKNOWN)
    reg = Registration(STS, "w", "urn:w", "", True, sts, False, False, False, (), "")
    result = check_registrations([reg], config)
    assert result.violations == []
    assert {v.policy for v in result.undecided} >= {"uniform-cuda-image", "no-floating-image-tags"}
    assert all("can't be known during preview" in v.message for v in result.undecided)


def test_enforcement_levels_come_from_the_config_file(gcp: list[Registration]) -> None:
    drifted = edited(gcp, "slonk-gcp-statefulset-h100-b", lambda i: set_images(i, TAGGED))
    raw = json.loads(CONFIG_FILE.read_text())
    raw["uniform-cuda-image"]["enforcementLevel"] = "advisory"
    advisory: CheckResult = check_registrations(drifted, resolve(raw, ALL_POLICIES))
    assert not advisory.failed and len(advisory.advisory) == 4
    raw["uniform-cuda-image"]["enforcementLevel"] = "disabled"
    assert check_registrations(drifted, resolve(raw, ALL_POLICIES)).violations == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda raw: raw.update({"uniform-cuda-imag": {}}), "uniform-cuda-imag: no such policy"),
        (lambda raw: raw["uniform-cuda-image"].pop("image"), "uniform-cuda-image: image is required"),
        (
            lambda raw: raw["uniform-cuda-image"].update(allowedRegistries="x"),
            "allowedRegistries must be of type array",
        ),
        (lambda raw: raw.update({"tpu-slice-shape": "sometimes"}), "'sometimes' is not an enforcement level"),
        (lambda raw: raw["no-secrets-in-configmaps"].update(maxChars=1), "maxChars is not a setting of this policy"),
    ],
)
def test_config_file_mistakes_are_reported(edit: Callable[[dict[str, Any]], Any], problem: str) -> None:
    raw = json.loads(CONFIG_FILE.read_text())
    edit(raw)
    with pytest.raises(PolicyConfigError, match=problem):
        resolve(raw, ALL_POLICIES)


def test_config_all_sets_every_level_and_schema_defaults_apply() -> None:
    raw = {"all": "advisory", **json.loads(CONFIG_FILE.read_text())}
    del raw["no-secrets-in-configmaps"]
    resolved = resolve(raw, ALL_POLICIES)
    assert {resolved.level(p) for p in ALL_POLICIES} == {EnforcementLevel.ADVISORY}
    assert resolved.for_policy("no-secrets-in-configmaps") == {"maxBlobChars": 512, "minEntropyBitsPerChar": 4.5}


def test_every_policy_is_documented_and_explains_the_fix() -> None:
    docs = (REPO / "docs" / "policies.md").read_text()
    # Registration itself is guarded by tests/policy/test_registry.py; no count to keep in step here.
    assert len({p.name for p in ALL_POLICIES}) == len(ALL_POLICIES)
    for policy in ALL_POLICIES:
        assert policy.description and policy.remediation_steps and policy.enforcement_level
        assert f"`{policy.name}`" in docs


@pytest.mark.parametrize(
    ("ref", "registry", "repository", "tag", "digest"),
    [
        ("busybox", "docker.io", "library/busybox", None, None),
        ("localhost:5000/slurm:1", "localhost:5000", "slurm", "1", None),
        (IMAGE, "registry.example.com", "slonk/slurm-cuda", "25.05.3-cuda12.8.1", IMAGE.split("@")[1]),
    ],
)
def test_image_references_are_split_like_a_runtime_does(
    ref: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    parsed = parse_image(ref)
    assert (parsed.registry, parsed.repository, parsed.tag, parsed.digest) == (registry, repository, tag, digest)
