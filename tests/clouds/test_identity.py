"""One declaration on GCP and on AWS gives the same Slurm cluster, except for an explicit list of fields.

The allowed differences are machine-derived sizes (the two clouds' H100 and CPU machines differ in vCPUs
and memory), the cloud's name as a Slurm feature, and where the shared filesystem comes from.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from slonk_infra.catalog import load_catalog
from slonk_infra.declaration.stacks import CONFIG_KEY, load_declaration
from slonk_infra.offline.render import ProgramRun, run_program

# Paths (dotted, list indexes as [*]) whose values may differ between the clouds, and why.
ALLOWED_MANIFEST_DIFFERENCES = {
    "spec.template.spec.containers[*].resources.requests.cpu": "machine-derived CPUs",
    "spec.template.spec.containers[*].resources.requests.memory": "machine-derived memory",
    "spec.csi": "storage source (Filestore vs EFS CSI volume)",
    "spec.storageClassName": "each cloud's block StorageClass for slurmctld's state (standard-rwo vs slonk-gp3)",
    "spec.template.spec.containers[*].env": "the fabric's NCCL / EFA environment (TCPXO vs EFA)",
    "spec.template.spec.containers[*].resources.requests.vpc.amazonaws.com/efa": "EFA interfaces (EKS only)",
    "spec.template.spec.containers[*].resources.limits.vpc.amazonaws.com/efa": "EFA interfaces (EKS only)",
    "spec.template.spec.containers[*].volumeMounts": "the fabric's host libraries (TCPXO on GKE)",
    "spec.template.spec.volumes": "the fabric's host paths (TCPXO on GKE)",
    "spec.template.metadata.annotations": "GKE multi-network interfaces and TCPXO devices",
    "metadata.annotations.slonk.dev/node-topology-labels": "each cloud's physical-topology node labels",
    "data.slurm.conf": "compared separately, line by line, below",
    "metadata.annotations.iam.gke.io/gcp-service-account": "slonk-ops' GKE Workload Identity (EKS Pod Identity binds by name)",
    "data.config.yaml": "slonk-ops' cloud section (cluster, region, node pools), checked in tests/kube/test_operations.py",
    "metadata.annotations.networking.gke.io/load-balancer-type": "the internal login load balancer, GKE's form",
    "metadata.annotations.service.beta.kubernetes.io/aws-load-balancer-internal": "the same, EKS's form",
    "spec.template.metadata.annotations.slonk.dev/config-hash": "hash of slurm.conf, whose machine sizes differ",
}
# Slurm node/partition keys whose values are machine-derived; plus the cloud's name among Features.
MACHINE_KEYS = (
    "Sockets",
    "CoresPerSocket",
    "ThreadsPerCore",
    "CoreSpecCount",
    "RealMemory",
    "DefMemPerCPU",
    "DefCpuPerGPU",
    "DefMemPerGPU",
)


def declaration(cloud: str) -> dict[str, Any]:
    """The AWS example's GPU and CPU pools, portable, with only cloud-specific sections switched."""
    raw: dict[str, Any] = copy.deepcopy(load_declaration("aws"))
    raw["pools"][2] = {
        "name": "cpu",
        "kind": "cpu",
        "nodes": 2,
        "machineTypes": {"gcp": "n2-standard-16", "aws": "m7i.4xlarge"},
    }
    for p in raw["pools"]:
        p.pop("reservation", None)
    raw["storage"] = [
        {"name": "home", "kind": "filestore" if cloud == "gcp" else "efs", "capacityGib": 2048, "mountPath": "/home"}
    ]
    if cloud == "gcp":
        gcp = load_declaration("gcp")
        raw.update(cloud="gcp", region=gcp["region"], zone=gcp["zone"], gcp=gcp["gcp"])
        raw.pop("aws")
    return raw


def run(cloud: str) -> ProgramRun:
    return run_program(cloud, {CONFIG_KEY: declaration(cloud)})


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    # A map one side lacks compares as empty, so each of its keys is named (and allowed) on its own.
    if isinstance(a, dict) and b is None:
        b = {}
    if isinstance(b, dict) and a is None:
        a = {}
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for x, y in zip(a, b, strict=True) for d in diff(x, y, f"{path}[*]")]
    return [] if a == b else [path]


def without_fabric_daemon(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without a GPU fabric's own daemon container (GKE's TCPXO sidecar), compared apart."""
    spec = obj.get("spec", {}).get("template", {}).get("spec")
    if not spec:
        return obj
    daemons = {f.sidecar.name for f in load_catalog().fabrics.values() if f.sidecar}
    out = copy.deepcopy(obj)
    out["spec"]["template"]["spec"]["containers"] = [c for c in spec["containers"] if c["name"] not in daemons]
    return out


def normalize_slurm(text: str) -> str:
    text = re.sub(rf"\b({'|'.join(MACHINE_KEYS)})=\d+", r"\1=<machine>", text)
    return re.sub(r"\b(gcp|aws)\b", "<cloud>", text)


def test_gcp_and_aws_give_the_same_slurm_cluster(capsys: Any) -> None:
    gcp, aws = run("gcp"), run("aws")
    assert gcp.plan and aws.plan
    from slonk_infra.slurm import render_slurm_files

    gcp_files, aws_files = render_slurm_files(gcp.plan).all(), render_slurm_files(aws.plan).all()
    assert gcp_files.keys() == aws_files.keys()
    for name in gcp_files:
        assert normalize_slurm(gcp_files[name]) == normalize_slurm(aws_files[name]), name
    gcp_objs = {(o["kind"], o["metadata"]["name"]): without_fabric_daemon(o) for o in gcp.kubernetes_objects()}
    aws_objs = {(o["kind"], o["metadata"]["name"]): without_fabric_daemon(o) for o in aws.kubernetes_objects()}
    # StorageClasses belong to the cloud layer: EKS needs one created, GKE ships standard-rwo; so do GKE's
    # GPU networking objects (Network, GKENetworkParamSet) and the GPUDirect host installers in kube-system.
    cloud_kinds = {"StorageClass", "Network", "GKENetworkParamSet"}

    def slurm_layer(objs: dict[tuple[str, str], Any]) -> dict[tuple[str, str], Any]:
        return {
            k: o for k, o in objs.items() if k[0] not in cloud_kinds and o["metadata"].get("namespace") != "kube-system"
        }

    assert any(o["metadata"].get("namespace") == "kube-system" for o in gcp_objs.values())
    gcp_objs, aws_objs = slurm_layer(gcp_objs), slurm_layer(aws_objs)
    assert gcp_objs.keys() == aws_objs.keys()
    seen: set[str] = set()
    for key, obj in gcp_objs.items():
        for path in diff(obj, aws_objs[key]):
            allowed = [p for p in ALLOWED_MANIFEST_DIFFERENCES if path == p or path.startswith(p + ".")]
            assert allowed, f"{key}: {path} differs between gcp and aws and is not on the allowed list"
            seen.add(f"{key[0]}/{key[1]}: {path}")
    with capsys.disabled():
        print("\nallowed gcp/aws differences:\n  " + "\n  ".join(sorted(seen)))
    # The list is not vacuous: sizes and storage really do differ, and nothing else does.
    assert any("requests.cpu" in s for s in seen) and any("spec.csi" in s for s in seen)
