"""Node allocatable models and DaemonSet reservations, checked against nodes the clouds reported.

The measured figures are from real GKE and EKS nodes (``kubectl get node -o yaml`` capacity and
allocatable, published with their sources in the catalog YAML); each test fails if a formula or
a figure in the catalog drifts from what the clouds do.
"""

from __future__ import annotations

import pytest

from slonk_infra.catalog import CLOUDS, Cloud, load_catalog

CATALOG = load_catalog()
GKE = CATALOG.nodes["gcp"]
EKS = CATALOG.nodes["aws"]
KI = 1024
MI = 1024 * 1024


# GKE nodes: (machine, nominal GiB, vCPUs, capacity Ki, allocatable Ki, allocatable millicores).
# 2i2c-org/infrastructure issue 2121 (GKE 1.25) and node-capacity-info.json.
GKE_NODES = [
    ("n2-highmem-4", 32, 4, 32880872, 29085928, 3920),
    ("n2-highmem-16", 128, 16, 131919220, 122210676, 15890),
    ("n2-highmem-64", 512, 64, 528365196, 510603916, 63770),
]


@pytest.mark.parametrize(("name", "nominal_gib", "vcpus", "capacity_ki", "allocatable_ki", "cpu_m"), GKE_NODES)
def test_gke_formula_on_capacity_reproduces_measured_allocatable(
    name: str, nominal_gib: int, vcpus: int, capacity_ki: int, allocatable_ki: int, cpu_m: int
) -> None:
    capacity_mib = capacity_ki // KI
    reserved = GKE.reserved_memory_mib(capacity_mib) + GKE.eviction_hard_mib
    measured = (capacity_ki - allocatable_ki) / KI
    # The documented formula on capacity reproduces what GKE reserved to within 0.3%.
    assert abs(reserved - measured) <= 0.003 * measured, (name, reserved, measured)
    assert vcpus * 1000 - GKE.reserved_cpu_m(vcpus) == cpu_m
    # The default nominal-to-capacity gap covers every measured node.
    assert nominal_gib * 1024 * (1 - GKE.default_memtotal_gap) <= capacity_mib


def test_gke_formula_is_applied_to_capacity_not_nominal() -> None:
    # On the 512 GiB node the nominal size would reserve ~160 MiB more than GKE does.
    _, nominal, _, capacity_ki, allocatable_ki, _ = GKE_NODES[2]
    measured = (capacity_ki - allocatable_ki) / KI
    on_nominal = GKE.reserved_memory_mib(nominal * 1024) + GKE.eviction_hard_mib
    assert on_nominal - measured > 100


def test_gke_small_node_and_tier_edges() -> None:
    assert GKE.reserved_memory_mib(512) == 255
    assert GKE.reserved_memory_mib(4096) == 1024
    assert GKE.reserved_memory_mib(8192) == 1844  # 1024 + 819.2, rounded up
    assert GKE.reserved_memory_mib(131072) == 9544  # 9.32 GiB: 1 + 0.8 + 0.8 + 6.72
    assert GKE.reserved_memory_mib(131072 + 1024) == 9544 + 21  # 2% above 128 GiB


# EKS nodes: (vCPUs, maxPods, capacity bytes, allocatable bytes, allocatable millicores).
# 2i2c-org/infrastructure node-capacity-info.json; maxPods from the ENI formula
# (awslabs/amazon-eks-ami nodeadm instance-info.jsonl: r5.xlarge 4 ENIs x 15 IPs, r5.4xlarge 8 x 30).
EKS_NODES = [
    ("r5.xlarge", 4, 58, 33164840960, 32123604992, 3920),
    ("r5.4xlarge", 16, 234, 133523050496, 130451771392, 15890),
]


@pytest.mark.parametrize(("name", "vcpus", "max_pods", "capacity_b", "allocatable_b", "cpu_m"), EKS_NODES)
def test_eks_formula_reproduces_measured_allocatable(
    name: str, vcpus: int, max_pods: int, capacity_b: int, allocatable_b: int, cpu_m: int
) -> None:
    reserved = EKS.reserved_memory_mib(capacity_b // MI, max_pods) + EKS.eviction_hard_mib
    assert reserved == (capacity_b - allocatable_b) // MI, name
    assert vcpus * 1000 - EKS.reserved_cpu_m(vcpus) == cpu_m


@pytest.mark.parametrize("machine", sorted(m.name for m in CATALOG.machines_on("aws")))
def test_eks_model_uses_the_larger_of_eni_max_pods_and_the_node_group_cap(machine: str) -> None:
    m = CATALOG.machines[machine]
    assert m.eni_max_pods is not None
    cap = 110 if m.vcpus < 30 else 250
    assert EKS.max_pods(m) == max(cap, m.eni_max_pods)


def test_eni_max_pods_match_the_karpenter_listing() -> None:
    # karpenter-provider-aws website/content/en/docs/reference/instance-types.md "pods" per type.
    listed = {"p4d.24xlarge": 737, "p5.48xlarge": 100, "p5en.48xlarge": 198, "p6-b200.48xlarge": 198}
    assert {k: CATALOG.machines[k].eni_max_pods for k in listed} == listed


def test_eks_cpu_on_192_vcpus_matches_karpenter_listing() -> None:
    assert EKS.allocatable_cpu_m(CATALOG.machines["p5.48xlarge"]) == 191450


def test_measured_gaps_cover_the_measurement_and_unmeasured_use_the_default() -> None:
    p5 = CATALOG.machines["p5.48xlarge"]
    # Karpenter measured 49192 MiB of 2097152 MiB missing on p5.48xlarge.
    assert EKS.capacity_mib(p5) <= 2097152 - 49192
    p5en = CATALOG.machines["p5en.48xlarge"]
    assert p5en.memtotal_gap is None
    assert EKS.memtotal_gap(p5en) == EKS.default_memtotal_gap == 0.075


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_node_model_names_its_sources(cloud: Cloud) -> None:
    model = CATALOG.nodes[cloud]
    assert model.reserved_memory.source and model.reserved_cpu.source
    assert model.eviction_source and model.default_memtotal_gap_source


ACCELERATED = sorted(m.name for m in CATALOG.machines.values() if m.kind in ("gpu", "tpu"))


@pytest.mark.parametrize("machine", ACCELERATED)
def test_system_pods_leave_most_of_every_accelerated_node(machine: str) -> None:
    m = CATALOG.machines[machine]
    model = CATALOG.node_model(m)
    every_storage = frozenset({"filestore", "efs", "fsx-lustre"})
    ds = CATALOG.daemonset_reservation(m, every_storage)
    assert ds.pods, "every cloud runs system pods on every node"
    assert all(p.source for p in ds.pods)
    left_memory = model.allocatable_memory_mib(m) - ds.memory_mib
    left_cpu = model.allocatable_cpu_m(m) - ds.cpu_m
    # Small GPU VMs lose a quarter to GKE's tiers; large ones keep nearly everything.
    share = 0.9 if m.memory_gib >= 256 else 0.6
    assert left_memory > share * m.memory_gib * 1024, (machine, left_memory)
    assert left_cpu > 0.7 * m.vcpus * 1000, (machine, left_cpu)


def test_fabric_daemonsets_land_only_on_their_machines() -> None:
    def names(machine: str, storage: frozenset[str] = frozenset()) -> set[str]:
        return {p.name for p in CATALOG.daemonset_reservation(CATALOG.machines[machine], storage).pods}

    assert {"nccl-tcpxo-installer", "nri-device-injector", "nvidia-gpu-device-plugin"} <= names("a3-megagpu-8g")
    assert "nccl-rdma-installer" not in names("a3-megagpu-8g")
    assert "nccl-rdma-installer" in names("a4-highgpu-8g") and "nccl-rdma-installer" in names("a3-ultragpu-8g")
    tpu = names("ct5p-hightpu-4t")
    assert "tpu-device-plugin" in tpu and "nvidia-gpu-device-plugin" not in tpu
    assert "aws-efa-k8s-device-plugin" in names("p5.48xlarge")
    assert "aws-efa-k8s-device-plugin" not in names("g6.xlarge")
    assert "efs-csi-node" in names("p5.48xlarge", frozenset({"efs"}))
    assert "efs-csi-node" not in names("p5.48xlarge")
    assert not names("local-4c8g")
