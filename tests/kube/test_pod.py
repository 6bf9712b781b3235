"""The shared pod template: every mount names a declared volume, munged gets what its script reads, and
the paths the scripts use are mounted in the pods that run them."""

from __future__ import annotations

import re

import pytest

from slonk_infra import vocab
from slonk_infra.kube import pod
from slonk_infra.kube.manifests import build_manifests
from slonk_infra.kube.pod import Obj
from tests.kube_support import files_for, plan_for, with_rest_api

STACKS = ["local", "gcp", "aws"]


def _workloads(stack: str) -> list[Obj]:
    plan = plan_for(stack, with_rest_api)
    # The Slurm pods (the operations controller is its own application, with its own account).
    return [
        o
        for o in build_manifests(plan, files_for(plan))
        if o["kind"] in ("StatefulSet", "Deployment") and o["metadata"]["labels"].get(vocab.NAME_LABEL) == vocab.APP
    ]


def _containers(spec: Obj) -> list[Obj]:
    return [*spec.get("initContainers", []), *spec["containers"]]


@pytest.mark.parametrize("stack", STACKS)
def test_every_mount_names_a_volume_of_its_pod(stack: str) -> None:
    for obj in _workloads(stack):
        spec = obj["spec"]["template"]["spec"]
        declared = {v["name"] for v in spec["volumes"]} | {
            t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])
        }
        assert len(declared) == len(spec["volumes"]) + len(obj["spec"].get("volumeClaimTemplates", []))
        for c in _containers(spec):
            for m in c.get("volumeMounts", []):
                assert m["name"] in declared, (obj["metadata"]["name"], c["name"], m["name"])


@pytest.mark.parametrize("stack", STACKS)
def test_scripts_paths_are_mounted_where_the_scripts_run(stack: str) -> None:
    plan = plan_for(stack)
    scripts = files_for(plan).scripts
    for obj in _workloads(stack):
        for c in _containers(obj["spec"]["template"]["spec"]):
            command = (
                " ".join(c.get("command", []))
                + " "
                + " ".join(c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", []))
            )
            mounted = [m["mountPath"] for m in c.get("volumeMounts", [])]
            for script in re.findall(rf"{pod.SCRIPTS_MOUNT}/([\w.-]+\.sh)", command):
                assert script in scripts
                assert pod.SCRIPTS_MOUNT in mounted
                # Every /run/... directory the script touches is a volume of this container.
                for used in re.findall(r"(/run/[\w-]+)/", scripts[script]):
                    assert used in mounted, (obj["metadata"]["name"], c["name"], script, used)


def test_munged_reads_the_key_where_the_secret_is_mounted() -> None:
    plan = plan_for("gcp")
    sidecar = pod.munged_sidecar("img")
    at = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    script = files_for(plan).scripts["munged.sh"]
    assert f"{vocab.MUNGE_SECRET_DIR}/{vocab.MUNGE_KEY_FILE}" in script
    assert at[vocab.MUNGE_SECRET_DIR] == "munge-key"
    [secret_vol] = [v for v in pod.common_volumes() if v["name"] == "munge-key"]
    assert secret_vol["secret"]["secretName"] == vocab.MUNGE_SECRET
    assert at[vocab.MUNGE_SOCKET_DIR] == "munge-socket" and at[vocab.MUNGE_PRIVATE_DIR] == "munge-private"
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: starts first, runs beside the daemon


def test_restricted_context_drops_everything_but_what_is_asked() -> None:
    ctx = pod.restricted(run_as=7, caps=("CHOWN",))
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert ctx["allowPrivilegeEscalation"] is False and ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["runAsNonRoot"]) == (7, 7, True)
    assert "runAsUser" not in pod.restricted()


def test_only_workers_and_nfs_servers_are_privileged() -> None:
    for obj in _workloads("local"):
        for c in _containers(obj["spec"]["template"]["spec"]):
            if c.get("securityContext", {}).get("privileged"):
                assert (obj["metadata"]["labels"][vocab.COMPONENT], c["name"]) in {
                    (vocab.WORKER_COMPONENT, "slurmd"),
                    (vocab.NFS_COMPONENT, "nfs"),
                }


def test_slurm_pods_share_one_service_account_without_a_token_and_resolve_worker_names() -> None:
    plan = plan_for("aws", with_rest_api)
    for obj in _workloads("aws"):
        spec = obj["spec"]["template"]["spec"]
        assert spec["automountServiceAccountToken"] is False
        if obj["metadata"]["labels"][vocab.COMPONENT] != vocab.NFS_COMPONENT:
            assert spec["serviceAccountName"] == vocab.SERVICE_ACCOUNT
            assert spec["dnsConfig"]["searches"] == [f"slurm-workers.{plan.namespace}.svc.cluster.local"]
            # A dropped query is asked again after 1 s, not glibc's 5 s, on a fresh socket.
            assert spec["dnsConfig"]["options"] == [
                {"name": "timeout", "value": "1"},
                {"name": "attempts", "value": "3"},
                {"name": "single-request-reopen"},
            ]
