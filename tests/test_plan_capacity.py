"""Capacity math pinned for known machines: CoreSpecCount, RealMemory and DefMemPerCPU.

Every expected figure below was worked out by hand from the formulas documented in
:mod:`slonk_infra.plan.capacity` (GKE's node reservations plus eviction and DaemonSet headroom), not
copied from the code's output; the arithmetic is in the comments.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.plan import def_mem_per_cpu, kube_reserved_memory_mib, kube_reserved_millicores, node_shape


class Expected(NamedTuple):
    reserved_mib: int
    reserved_millicores: int
    core_spec: int
    real_memory_mib: int
    cpus: int
    def_mem_per_cpu: int


# Memory tiers: 25% of 4096 = 1024; 20% of 4096 = 819.2; 10% of 8192 = 819.2; 6% of 114688 = 6881.28;
# so a node above 128 GiB (131072 MiB) reserves 9543.68 MiB + 2% of the rest; then +100 eviction and
# DaemonSets min(2048, MiB/20). CPU: 60 + 10 + 5x2 + 2.5 per vCPU above 4 (millicores), + 250 per 16 vCPUs
# (max 2000); CoreSpecCount = ceil(that / (1000 x threads per core)), at most cores - 1.
TABLE: dict[str, Expected] = {
    # 208 vCPU (2x52 cores x2), 1872 GiB = 1916928 MiB.
    # mem: 9543.68 + 0.02 x 1785856 = 45260.8 -> 45261 + 100 + 2048 = 47409; 1916928 - 47409 = 1869519.
    # cpu: 80 + 2.5 x 204 = 590, + min(2000, 250 x 13) = 2590m -> ceil(2590 / 2000) = 2 cores; (104 - 2) x 2 = 204.
    # DefMemPerCPU: 1869519 // 204 = 9164.
    "a3-megagpu-8g": Expected(47409, 2590, 2, 1869519, 204, 9164),
    "a3-highgpu-8g": Expected(47409, 2590, 2, 1869519, 204, 9164),
    # 192 vCPU (2x48x2), 2048 GiB = 2097152 MiB.
    # mem: 9543.68 + 0.02 x 1966080 = 48865.28 -> 48866 + 100 + 2048 = 51014; 2097152 - 51014 = 2046138.
    # cpu: 80 + 2.5 x 188 = 550, + 2000 = 2550m -> 2 cores; (96 - 2) x 2 = 188. 2046138 // 188 = 10883.
    "p5.48xlarge": Expected(51014, 2550, 2, 2046138, 188, 10883),
    # 4 vCPU (1x2x2), 32 GiB = 32768 MiB.
    # mem: 2662.4 + 0.06 x 16384 = 3645.44 -> 3646 + 100 + 32768/20 = 1638 -> 5384; 32768 - 5384 = 27384.
    # cpu: 80 + 0 + 250 = 330m -> ceil(330 / 2000) = 1 core; (2 - 1) x 2 = 2. 27384 // 2 = 13692.
    "g6e.xlarge": Expected(5384, 330, 1, 27384, 2, 13692),
    # TPU v5p host: 208 vCPU (2x52x2), 448 GiB = 458752 MiB.
    # mem: 9543.68 + 0.02 x 327680 = 16097.28 -> 16098 + 100 + 2048 = 18246; 458752 - 18246 = 440506.
    # cpu: as a3 (208 vCPU) -> 2 cores, 204 CPUs. 440506 // 204 = 2159.
    "ct5p-hightpu-4t": Expected(18246, 2590, 2, 440506, 204, 2159),
    # 16 vCPU (1x8x2), 64 GiB = 65536 MiB.
    # mem: 2662.4 + 0.06 x 49152 = 5611.52 -> 5612 + 100 + 2048 = 7760; 65536 - 7760 = 57776.
    # cpu: 80 + 2.5 x 12 = 110, + 250 = 360m -> 1 core; (8 - 1) x 2 = 14. 57776 // 14 = 4126.
    "n2-standard-16": Expected(7760, 360, 1, 57776, 14, 4126),
    # Local shape: 2 vCPU (1x2x1), 4 GiB = 4096 MiB.
    # mem: 0.25 x 4096 = 1024 + 100 + 4096/20 = 204 -> 1328; 4096 - 1328 = 2768.
    # cpu: 60 + 10 + 250 = 320m -> ceil(320 / 1000) = 1 core (= cores - 1, the most it may be); 1 CPU left.
    "local-2c4g": Expected(1328, 320, 1, 2768, 1, 2768),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_node_shape_of_known_machines(name: str) -> None:
    machine = load_catalog().machines[name]
    want = TABLE[name]
    shape = node_shape(machine)
    assert kube_reserved_memory_mib(machine.memory_gib * 1024) == want.reserved_mib
    assert kube_reserved_millicores(machine.vcpus) == want.reserved_millicores
    assert shape.core_spec == want.core_spec
    assert shape.real_memory_mib == want.real_memory_mib == machine.memory_gib * 1024 - want.reserved_mib
    assert shape.cpus == want.cpus
    assert shape.mem_per_cpu_mib == want.def_mem_per_cpu


def test_the_table_covers_every_kind_of_machine() -> None:
    kinds = {load_catalog().machines[n].kind for n in TABLE}
    clouds = {load_catalog().machines[n].cloud for n in TABLE}
    assert kinds == {"gpu", "tpu", "cpu"} and clouds == {"gcp", "aws", "local"}


def test_def_mem_per_cpu_is_the_leanest_member() -> None:
    cat = load_catalog().machines
    shapes = [node_shape(cat[n]) for n in ("a3-megagpu-8g", "ct5p-hightpu-4t", "n2-standard-16")]
    assert def_mem_per_cpu(shapes) == 2159
    assert def_mem_per_cpu([]) is None


def test_core_spec_always_leaves_a_core_to_jobs() -> None:
    for machine in load_catalog().machines.values():
        shape = node_shape(machine)
        assert 1 <= shape.core_spec <= machine.sockets * machine.cores_per_socket - 1
        assert 0 < shape.real_memory_mib < machine.memory_gib * 1024
        assert shape.cpus >= 1


@pytest.mark.parametrize(
    ("memory_mib", "reserved"),
    [
        (4096, 1024 + 100 + 204),  # all of it in the first tier
        (8192, 1024 + 820 + 100 + 409),  # 819.2 -> the sum is rounded up once
        (131072, 9544 + 100 + 2048),  # exactly the end of the 6% tier; DaemonSets capped at 2 GiB
    ],
)
def test_memory_tier_boundaries(memory_mib: int, reserved: int) -> None:
    assert kube_reserved_memory_mib(memory_mib) == reserved
