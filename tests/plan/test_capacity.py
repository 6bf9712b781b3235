"""Capacity math pinned for known machines: CoreSpecCount, RealMemory and DefMemPerCPU.

Every expected figure below was worked out by hand from the catalog's node models
(``data/nodes.yaml``: each cloud's documented reservation formula applied to MemTotal, the
eviction threshold, the nominal-to-MemTotal gap) and system pod requests (``data/daemonsets.yaml``),
not copied from the code's output; the arithmetic is in the comments. No shared filesystem's CSI
pods are counted (storage kinds empty) unless a row says so.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.plan import MUNGED, def_mem_per_cpu, node_budget, node_shape, worker_sidecars


class Expected(NamedTuple):
    allocatable_mib: int
    daemonset_mib: int
    core_spec: int
    real_memory_mib: int
    cpus: int
    def_mem_per_cpu: int
    fabric_sidecar_mib: int = 0


# GKE memory tiers on capacity: 25% of 4096 = 1024; 20% of 4096 = 819.2; 10% of 8192 = 819.2;
# 6% of 114688 = 6881.28; 2% above 131072 MiB. EKS: 11 x maxPods + 255, maxPods = max(ENI formula,
# managed node group cap 110 below 30 vCPUs / 250). Both clouds: eviction 100 MiB; CPU reserved
# 60 + 10 + 5 x 2 + 2.5 per core above 4 (millicores). munged requests 50m / 64 Mi in every pod.
# GKE system pods on every node: 875m / 1830 Mi; + GPU device plugin 50m / 100 Mi; + TCPXO
# installer and NRI injector 300m; + TPU device plugin 100m / 200 Mi. EKS: 385m / 680 Mi; + NVIDIA
# plugin 50m / 100 Mi; + EFA plugin 10m / 20 Mi; + EFS CSI node 30m / 120 Mi. A3 Mega's pods also run
# the TCPXO receive-datapath daemon, 200m / 512 Mi (fabrics.yaml).
TABLE: dict[str, Expected] = {
    # 1872 GiB = 1916928 MiB; gap 3% -> capacity floor(1859420.16) = 1859420.
    # reserved 9543.68 + 0.02 x (1859420 - 131072) = 44110.64 -> 44111; allocatable 1859420 - 44111 - 100 = 1815209.
    # system pods 875 + 50 + 300 = 1225m, 1830 + 100 = 1930 Mi; sidecars munged and tcpxo-daemon (200m / 512 Mi).
    # RealMemory 1815209 - 1930 - 64 - 512 = 1812703.
    # CPU 208000 - (80 + 2.5 x 204 = 590) = 207410 - 1225 - 50 - 200 = 205935 -> 102 of 104 cores; 204 CPUs.
    # DefMemPerCPU 1812703 // 204 = 8885.
    "a3-megagpu-8g": Expected(1815209, 1930, 2, 1812703, 204, 8885, 512),
    # 2048 GiB = 2097152 MiB; measured gap 0.0235 + margin 0.01 -> capacity floor(2026897.4) = 2026897.
    # maxPods max(250, 100) = 250 -> 3005; allocatable 2026897 - 3005 - 100 = 2023792.
    # system pods 385 + 50 + 10 = 445m, 680 + 100 + 20 = 800 Mi; RealMemory 2023792 - 800 - 64 = 2022928.
    # CPU 192000 - 550 = 191450 - 445 - 50 = 190955 -> 95 of 96 cores; 190 CPUs. 2022928 // 190 = 10646.
    "p5.48xlarge": Expected(2023792, 800, 1, 2022928, 190, 10646),
    # 32 GiB = 32768 MiB; no measured gap: 7.5% -> floor(30310.4) = 30310.
    # maxPods max(110, 58) = 110 -> 1465; allocatable 30310 - 1465 - 100 = 28745.
    # system pods 385 + 50 = 435m, 680 + 100 = 780 Mi (no EFA on g6e.xlarge); RealMemory 28745 - 780 - 64 = 27901.
    # CPU 4000 - 80 = 3920 - 435 - 50 = 3435 -> 1 of 2 cores; 2 CPUs. 27901 // 2 = 13950.
    "g6e.xlarge": Expected(28745, 780, 1, 27901, 2, 13950),
    # TPU v5p host: 448 GiB = 458752 MiB; 3% -> floor(444989.44) = 444989.
    # reserved 9543.68 + 0.02 x 313917 = 15822.02 -> 15823; allocatable 444989 - 15823 - 100 = 429066.
    # system pods 875 + 100 = 975m, 1830 + 200 = 2030 Mi; RealMemory 429066 - 2030 - 64 = 426972.
    # CPU 207410 - 975 - 50 = 206385 -> 103 cores; 206 CPUs. 426972 // 206 = 2072.
    "ct5p-hightpu-4t": Expected(429066, 2030, 1, 426972, 206, 2072),
    # 64 GiB = 65536 MiB; 3% -> floor(63569.92) = 63569.
    # reserved 2662.4 + 0.06 x (63569 - 16384) = 5493.5 -> 5494; allocatable 63569 - 5494 - 100 = 57975.
    # RealMemory 57975 - 1830 - 64 = 56081. CPU 16000 - 110 = 15890 - 875 - 50 = 14965 -> 7 of 8 cores.
    # 56081 // 14 = 4005.
    "n2-standard-16": Expected(57975, 1830, 1, 56081, 14, 4005),
    # Local shape: 4096 MiB, no reservation, no gap: allocatable 4096 - 100 = 3996; RealMemory 3996 - 64 = 3932.
    # CPU 2000 - 50 = 1950 -> 1 of 2 cores; 1 CPU. 3932 // 1 = 3932.
    "local-2c4g": Expected(3996, 0, 1, 3932, 1, 3932),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_node_shape_of_known_machines(name: str) -> None:
    machine = load_catalog().machines[name]
    want = TABLE[name]
    budget = node_budget(machine, sidecars=worker_sidecars(machine))
    shape = node_shape(machine)
    assert budget.allocatable.memory_mib == want.allocatable_mib
    assert budget.daemonsets.memory_mib == want.daemonset_mib
    assert shape.core_spec == want.core_spec
    assert shape.real_memory_mib == want.real_memory_mib
    assert want.real_memory_mib == (
        want.allocatable_mib - want.daemonset_mib - MUNGED.memory_mib - want.fabric_sidecar_mib
    )
    assert shape.cpus == want.cpus
    assert shape.mem_per_cpu_mib == want.def_mem_per_cpu


def test_shared_filesystem_csi_pods_come_off_real_memory() -> None:
    # EFS's CSI node pod (120 Mi) runs on every node of a cluster that mounts EFS.
    p5 = load_catalog().machines["p5.48xlarge"]
    assert node_shape(p5, ["efs"]).real_memory_mib == TABLE["p5.48xlarge"].real_memory_mib - 120


def test_the_table_covers_every_kind_of_machine() -> None:
    kinds = {load_catalog().machines[n].kind for n in TABLE}
    clouds = {load_catalog().machines[n].cloud for n in TABLE}
    assert kinds == {"gpu", "tpu", "cpu"} and clouds == {"gcp", "aws", "local"}


def test_def_mem_per_cpu_is_the_leanest_member() -> None:
    cat = load_catalog().machines
    shapes = [node_shape(cat[n]) for n in ("a3-megagpu-8g", "ct5p-hightpu-4t", "n2-standard-16")]
    assert def_mem_per_cpu(shapes) == 2072  # the v5p host
    assert def_mem_per_cpu([]) is None


def test_core_spec_always_leaves_a_core_to_jobs() -> None:
    for machine in load_catalog().machines.values():
        shape = node_shape(machine)
        assert 1 <= shape.core_spec <= machine.sockets * machine.cores_per_socket - 1
        assert 0 < shape.real_memory_mib < machine.memory_gib * 1024
        assert shape.cpus >= 1
