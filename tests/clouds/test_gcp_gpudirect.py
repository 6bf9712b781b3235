"""GKE GPUDirect, host side: the GPU NIC networks, their GKE objects, and the installer DaemonSets.

Checked against GKE's GPUDirect-TCPXO / -RDMA guides and Cluster Toolkit as the catalog cites them:
TCPXO gets eight VPCs (MTU 8244) named for the pods' vpc1..vpc8, RDMA a gvnic-1 VPC and one RoCE VPC
with the ``<zone>-vpc-roce`` profile and one subnet per RDMA NIC (rdma-0..), and each fabric its
installer DaemonSets, one per kind per cluster, only where a pool of its machines exists.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.catalog import load_catalog
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.kube.fabric import INTERFACES, fabric_pod_parts
from slonk_infra.offline.runner import OfflineRun, Registration
from tests.declaration.test_errors import Raw, edit, gcp, pool
from tests.support import deploy

NODE_POOL = "gcp:container/nodePool:NodePool"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
PARAMS = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
GKE_NETWORK = "kubernetes:networking.gke.io/v1:Network"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
CATALOG = load_catalog()

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")


def rdma_stack(raw: Raw) -> None:
    """A3 Ultra and A4X pools instead of the shipped A3 Mega ones."""
    raw["pools"] = [
        {"name": "h200", "kind": "gpu", "machineType": "a3-ultragpu-8g", "nodes": 2},
        {"name": "gb200", "kind": "gpu", "machineType": "a4x-highgpu-4g", "nodes": 18},
        {"name": "cpu", "kind": "cpu", "machineType": "n2-standard-16", "nodes": 2},
    ]


def no_gpudirect(raw: Raw) -> None:
    raw["pools"] = [{"name": "cpu", "kind": "cpu", "machineType": "n2-standard-16", "nodes": 2}]


@pytest.fixture(scope="module")
def tcpxo() -> OfflineRun[CloudResult]:
    return deploy(build_plan(gcp()))


@pytest.fixture(scope="module")
def rdma() -> OfflineRun[CloudResult]:
    return deploy(build_plan(edit(gcp, rdma_stack)))


def node_pool(run: OfflineRun[Any], name: str) -> dict[str, Any]:
    [found] = [r.inputs for r in run.of_type(NODE_POOL) if r.inputs.get("name") == name]
    return found


def by_name(regs: list[Registration]) -> dict[str, dict[str, Any]]:
    return {r.inputs["name"]: r.inputs for r in regs}


def metadata_names(run: OfflineRun[Any], typ: str) -> list[str]:
    return sorted(r.inputs["metadata"]["name"] for r in run.of_type(typ))


def pod_networks(machine: str) -> list[str]:
    return [n["network"] for n in json.loads(fabric_pod_parts(CATALOG.machines[machine]).annotations[INTERFACES])][1:]


# ------------------------------------------------------------------------------------------- TCPXO
def test_tcpxo_gets_eight_vpcs_with_mtu_8244_a_subnet_and_a_firewall_each(tcpxo: OfflineRun[CloudResult]) -> None:
    vpcs = by_name(tcpxo.of_type(NETWORK))
    assert sorted(vpcs) == sorted(f"slonk-gcp-vpc{i}" for i in range(1, 9))
    assert all(
        v["mtu"] == 8244 and v["autoCreateSubnetworks"] is False and "networkProfile" not in v for v in vpcs.values()
    )
    subnets = by_name(tcpxo.of_type(SUBNET))
    assert sorted(subnets) == sorted(vpcs)
    assert all(s["region"] == "us-central1" for s in subnets.values())
    # Slot i of 192.168.0.0/16 cut in /21s: vpc1 is 192.168.8.0/21 (slot 0 is kept for a host NIC).
    assert subnets["slonk-gcp-vpc1"]["ipCidrRange"] == "192.168.8.0/21"
    firewalls = tcpxo.of_type(FIREWALL)
    assert len(firewalls) == 8
    for fw in firewalls:
        assert fw.inputs["sourceRanges"] == ["192.168.0.0/16"]
        assert {a["protocol"] for a in fw.inputs["allows"]} == {"tcp", "udp", "icmp"}


def test_tcpxo_gke_networks_are_the_names_the_pods_use(tcpxo: OfflineRun[CloudResult]) -> None:
    wanted = pod_networks("a3-megagpu-8g")
    assert wanted == [f"vpc{i}" for i in range(1, 9)]
    assert metadata_names(tcpxo, PARAMS) == metadata_names(tcpxo, GKE_NETWORK) == sorted(wanted)
    for params in tcpxo.of_type(PARAMS):
        name = params.inputs["metadata"]["name"]
        assert params.inputs["spec"] == {
            "vpc": f"slonk-gcp-{name}",
            "vpcSubnet": f"slonk-gcp-{name}",
            "deviceMode": "NetDevice",
        }
    for network in tcpxo.of_type(GKE_NETWORK):
        name = network.inputs["metadata"]["name"]
        assert network.inputs["spec"] == {
            "type": "Device",
            "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
        }


def test_tcpxo_pools_attach_their_nics_in_the_pods_order(tcpxo: OfflineRun[CloudResult]) -> None:
    for name in ("h100-a", "h100-b"):
        configs = node_pool(tcpxo, name)["networkConfig"]["additionalNodeNetworkConfigs"]
        assert [c["network"] for c in configs] == [f"slonk-gcp-{n}" for n in pod_networks("a3-megagpu-8g")]
        assert "acceleratorNetworkProfile" not in node_pool(tcpxo, name)["networkConfig"]
    assert "networkConfig" not in node_pool(tcpxo, "cpu")


def test_tcpxo_installers_once_per_cluster_pinned_selecting_a3_mega(tcpxo: OfflineRun[CloudResult]) -> None:
    # Two A3 Mega pools, still one DaemonSet of each kind.
    sets = {d.inputs["metadata"]["name"]: d.inputs for d in tcpxo.of_type(DAEMONSET)}
    assert sorted(sets) == ["nccl-tcpxo-installer", "nri-device-injector"]
    for ds in sets.values():
        assert ds["metadata"]["namespace"] == "kube-system"
        pod = ds["spec"]["template"]["spec"]
        [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [
            {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-h100-mega-80gb"]}
        ]
        # Every taint tolerated (GKE's manifests do the same): a node tainted for any reason still gets its
        # plugin, or its worker pod never becomes Ready. Pulumi does not wait for their rollout.
        assert pod["tolerations"] == [{"operator": "Exists"}]
        assert ds["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
        assert pod["priorityClassName"] == "system-node-critical"
        assert (
            ds["spec"]["template"]["metadata"]["labels"]["k8s-app"] == ds["spec"]["selector"]["matchLabels"]["k8s-app"]
        )
    installer = sets["nccl-tcpxo-installer"]["spec"]["template"]["spec"]
    images = [c["image"] for c in installer["initContainers"]]
    assert "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15" in images
    assert installer["hostPID"] is True  # the host step enters PID 1's namespaces
    # The plugin lands where the worker pod mounts it from (fabrics.yaml workload mounts).
    assert {"name": "kubernetes-bin", "hostPath": {"path": "/home/kubernetes/bin"}} in installer["volumes"]
    [injector] = sets["nri-device-injector"]["spec"]["template"]["spec"]["containers"]
    assert injector["image"].startswith("gcr.io/gke-release/nri-device-injector@sha256:")
    assert {"name": "nri", "mountPath": "/var/run/nri"} in injector["volumeMounts"]


def test_installers_tolerate_the_pools_declared_taints() -> None:
    raw = gcp()
    pool(raw)["taints"] = [{"key": "team", "value": "llm", "effect": "NoExecute"}]
    run = deploy(build_plan(raw))
    for ds in run.of_type(DAEMONSET):
        tolerations = ds.inputs["spec"]["template"]["spec"]["tolerations"]
        assert tolerations == [{"operator": "Exists"}]  # the declared taint too


def test_no_gpudirect_pool_means_no_gpu_network_and_no_installer() -> None:
    run = deploy(build_plan(edit(gcp, no_gpudirect)))
    for typ in (NETWORK, SUBNET, FIREWALL, PARAMS, GKE_NETWORK, DAEMONSET):
        assert not run.of_type(typ), typ


# -------------------------------------------------------------------------------------------- RDMA
def test_rdma_gets_a_host_gvnic_vpc_and_one_roce_vpc_with_a_subnet_per_nic(rdma: OfflineRun[CloudResult]) -> None:
    vpcs = by_name(rdma.of_type(NETWORK))
    assert sorted(vpcs) == ["slonk-gcp-gvnic-1", "slonk-gcp-rdma"]
    assert (
        vpcs["slonk-gcp-rdma"]["networkProfile"]
        == "projects/my-ml-project/global/networkProfiles/us-central1-a-vpc-roce"
    )
    assert vpcs["slonk-gcp-rdma"]["mtu"] == 8896 and vpcs["slonk-gcp-gvnic-1"]["mtu"] == 8896
    assert "networkProfile" not in vpcs["slonk-gcp-gvnic-1"]
    subnets = by_name(rdma.of_type(SUBNET))
    # The largest RDMA machine (A3 Ultra) has 8 RDMA NICs.
    assert sorted(subnets) == sorted(["slonk-gcp-gvnic-1", *[f"slonk-gcp-rdma-{i}" for i in range(8)]])
    # RoCE VPCs allow all traffic implicitly and take no firewall rule; the host gVNIC's VPC gets one.
    assert [fw.inputs["name"] for fw in rdma.of_type(FIREWALL)] == ["slonk-gcp-gvnic-1-internal"]
    modes = {p.inputs["metadata"]["name"]: p.inputs["spec"]["deviceMode"] for p in rdma.of_type(PARAMS)}
    assert modes == {"gvnic-1": "NetDevice", **{f"rdma-{i}": "RDMA" for i in range(8)}}
    assert metadata_names(rdma, GKE_NETWORK) == sorted(modes)


@pytest.mark.parametrize(("group", "machine"), [("h200", "a3-ultragpu-8g"), ("gb200", "a4x-highgpu-4g")])
def test_rdma_pools_attach_the_host_gvnic_then_their_rdma_nics(
    rdma: OfflineRun[CloudResult], group: str, machine: str
) -> None:
    configs = node_pool(rdma, group)["networkConfig"]["additionalNodeNetworkConfigs"]
    assert configs[0] == {"network": "slonk-gcp-gvnic-1", "subnetwork": "slonk-gcp-gvnic-1"}
    assert [c["subnetwork"] for c in configs[1:]] == [f"slonk-gcp-{n}" for n in pod_networks(machine)]
    assert {c["network"] for c in configs[1:]} == {"slonk-gcp-rdma"}
    assert len(configs) == 1 + CATALOG.machines[machine].gpu_nics


def test_rdma_installers_per_architecture(rdma: OfflineRun[CloudResult]) -> None:
    sets = {d.inputs["metadata"]["name"]: d.inputs["spec"]["template"]["spec"] for d in rdma.of_type(DAEMONSET)}
    assert sorted(sets) == ["nccl-rdma-installer", "nccl-rdma-installer-arm64"]

    def match(name: str) -> list[dict[str, Any]]:
        terms = sets[name]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        expressions: list[dict[str, Any]] = terms["nodeSelectorTerms"][0]["matchExpressions"]
        return expressions

    assert match("nccl-rdma-installer") == [
        {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-h200-141gb"]}
    ]
    assert match("nccl-rdma-installer-arm64")[1] == {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    [x86] = sets["nccl-rdma-installer"]["initContainers"]
    assert x86["image"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    [arm] = sets["nccl-rdma-installer-arm64"]["initContainers"]
    assert arm["image"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64:v1.1.0"
    assert {v["hostPath"]["path"] for v in sets["nccl-rdma-installer"]["volumes"]} == {
        "/home/kubernetes/bin/nvidia/lib64",
        "/home/kubernetes/bin/gib",
    }


def test_all_gpu_subnets_are_disjoint_inside_the_declared_range() -> None:
    raw = gcp()
    raw["gcp"]["gpuNetworkRange"] = "172.20.0.0/16"
    raw["pools"].append({"name": "h200", "kind": "gpu", "machineType": "a3-ultragpu-8g", "nodes": 2})
    run = deploy(build_plan(raw))
    ranges = [ipaddress.ip_network(s.inputs["ipCidrRange"]) for s in run.of_type(SUBNET)]
    assert len(ranges) == 8 + 1 + 8
    base = ipaddress.ip_network("172.20.0.0/16")
    assert all(r.subnet_of(base) for r in ranges)  # type: ignore[arg-type]
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])


def test_adding_a_fabric_moves_no_existing_subnet(tcpxo: OfflineRun[CloudResult]) -> None:
    raw = gcp()
    raw["pools"].append({"name": "h200", "kind": "gpu", "machineType": "a3-ultragpu-8g", "nodes": 2})
    both = by_name(deploy(build_plan(raw)).of_type(SUBNET))
    for name, subnet in by_name(tcpxo.of_type(SUBNET)).items():
        assert both[name]["ipCidrRange"] == subnet["ipCidrRange"]


# ---------------------------------------------------------------------------------------- refusals
# (id, declaration, field path that must be named, fragments the message must contain)
REFUSED: list[tuple[str, Raw, str, list[str]]] = [
    (
        "GPU NIC range is public",
        edit(gcp, lambda r: r["gcp"].update(gpuNetworkRange="8.8.0.0/16")),
        "gcp.gpuNetworkRange",
        ["'8.8.0.0/16'", "not a private IPv4 range"],
    ),
    (
        "GPU NIC range too small for its subnets",
        edit(gcp, lambda r: r["gcp"].update(gpuNetworkRange="192.168.0.0/22")),
        "gcp.gpuNetworkRange",
        ["/22", "/8 to /19"],
    ),
    (
        "GPU NIC range is IPv6",
        edit(gcp, lambda r: r["gcp"].update(gpuNetworkRange="fd00::/48")),
        "gcp.gpuNetworkRange",
        ["not a private IPv4 range"],
    ),
    (
        "GPU NIC range overlaps the default network's subnets",
        edit(gcp, lambda r: r["gcp"].update(gpuNetworkRange="10.128.0.0/16")),
        "gcp.gpuNetworkRange",
        ["overlaps 10.128.0.0/9", "https://cloud.google.com/vpc/docs/subnets"],
    ),
    (
        "GPU NIC range not a CIDR",
        edit(gcp, lambda r: r["gcp"].update(gpuNetworkRange="192.168.0.0")),
        "gcp.gpuNetworkRange",
        ["192.168.0.0"],
    ),
    (
        "maintenance window too short for GKE",
        edit(gcp, lambda r: r["gcp"].update(maintenance={"windowHours": 4, "days": ["SU"]})),
        "gcp.maintenance",
        ["16 hours in 32 days", "at least 48", "maintenance-windows-and-exclusions"],
    ),
    (
        "maintenance window under four hours",
        edit(gcp, lambda r: r["gcp"].update(maintenance={"windowHours": 2})),
        "gcp.maintenance.windowHours",
        ["4"],
    ),
    (
        "maintenance start not a time of day",
        edit(gcp, lambda r: r["gcp"].update(maintenance={"windowStart": "25:00"})),
        "gcp.maintenance.windowStart",
        ["25:00"],
    ),
    (
        "RDMA machine below its GKE floor, with the floor's source",
        edit(
            gcp,
            lambda r: (
                r["kubernetes"].update(version="1.30"),
                r.update(tpuSlices=[]),
                r["pools"].append({"name": "h200", "kind": "gpu", "machineType": "a3-ultragpu-8g", "nodes": 2}),
            ),
        ),
        "kubernetes.version",
        ["gpudirect-rdma on a3-ultragpu-8g needs GKE 1.31.4-gke.1183000", "source:", "gke-ai-hypercompute"],
    ),
]


@pytest.mark.parametrize(("declaration", "path", "fragments"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_gke_gpudirect_and_cluster_settings_that_cannot_work_are_refused(
    declaration: Raw, path: str, fragments: list[str]
) -> None:
    with pytest.raises(DeclarationError) as info:
        build_plan(declaration)
    problems = [p for p in info.value.problems if p.path == path]
    assert problems, f"no problem at {path}: {info.value}"
    text = " ".join(p.message for p in problems)
    for fragment in fragments:
        assert fragment in text, (fragment, text)


@pytest.mark.parametrize("stack", ["tcpxo", "rdma"])
def test_only_the_catalogs_installer_images_run_privileged(stack: str, request: pytest.FixtureRequest) -> None:
    # What the policy pack may exempt (Installer.privileged_images) is exactly what runs privileged here.
    run: OfflineRun[CloudResult] = request.getfixturevalue(stack)
    allowed: dict[str, frozenset[str]] = {}
    for fabric in CATALOG.fabrics.values():
        if fabric.installer is not None:
            allowed |= fabric.installer.privileged_images()
    for ds in run.of_type(DAEMONSET):
        name, pod = ds.inputs["metadata"]["name"], ds.inputs["spec"]["template"]["spec"]
        privileged = {
            c["image"]
            for c in [*pod.get("initContainers", []), *pod["containers"]]
            if c.get("securityContext", {}).get("privileged")
        }
        assert privileged == allowed[name], name
