"""The machine catalog: TPU sizing for every generation, portable resolution for every GPU machine."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import pytest

import slonk_infra
from slonk_infra.catalog import MachineType, load_catalog, topology_chips, tpu_vms
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.plan import naming

CATALOG = load_catalog()
GPU_MACHINES = sorted(m.name for m in CATALOG.machines.values() if m.kind == "gpu")


def _with_pool(cloud: str, pool: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(load_declaration(cloud))
    raw["pools"] = [pool]
    raw.pop("tpuSlices", None)
    raw["slurm"] = {}
    raw.pop("operations", None)  # needs slurm.restApi, which the reset above drops
    return raw


@pytest.mark.parametrize("generation", sorted(CATALOG.tpus))
def test_tpu_sizing_rule_for_every_generation_and_topology(generation: str) -> None:
    gen = CATALOG.tpus[generation]
    vm = CATALOG.machines[gen.machine]
    assert vm.accelerator is not None and vm.accelerator.count == 4
    for topo in gen.topologies:
        dims = [int(d) for d in topo.split("x")]
        assert len(dims) == gen.dims
        chips = 1
        for d in dims:
            chips *= d
        assert topology_chips(topo) == chips
        assert tpu_vms(gen, topo, 4) == chips // 4


@pytest.mark.parametrize(
    ("generation", "topology", "nodes"),
    [("v4", "2x2x4", 4), ("v5e", "4x4", 4), ("v5p", "4x4x4", 16), ("v6e", "16x16", 64), ("tpu7x", "4x4x8", 32)],
)
def test_tpu_slice_becomes_that_many_nodes_with_four_chips_each(generation: str, topology: str, nodes: int) -> None:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["tpuSlices"] = [{"name": "s", "generation": generation, "topology": topology, "slices": 2}]
    raw["slurm"] = {"topology": "tree"}
    raw.pop("operations", None)  # needs slurm.restApi, which the reset above drops
    plan = build_plan(raw)
    slices = [g for g in plan.groups if g.kind == "tpu"]
    assert [g.name for g in slices] == ["s-0", "s-1"]
    for g in slices:
        assert g.replicas == nodes
        assert g.gres == f"tpu:{generation}:4"
        assert g.kube_resource == "google.com/tpu"
        assert g.node_selector["cloud.google.com/gke-tpu-topology"] == topology


@pytest.mark.parametrize("machine", GPU_MACHINES)
def test_every_gpu_machine_is_reachable_by_a_portable_request(machine: str) -> None:
    m = CATALOG.machines[machine]
    assert m.accelerator is not None
    pool = {
        "name": "p",
        "kind": "gpu",
        "accelerator": {"type": m.accelerator.type, "count": m.accelerator.count},
        "nodes": 2,
        "machineTypes": {m.cloud: machine},
    }
    plan = build_plan(_with_pool(m.cloud, pool))
    group = plan.groups[0]
    assert group.machine.name == machine
    assert group.gres == f"gpu:{m.accelerator.type}:{m.accelerator.count}"
    # Without a choice, the request lands on the cloud's preferred machine for that accelerator and count.
    del pool["machineTypes"]
    default = build_plan(_with_pool(m.cloud, pool)).groups[0].machine
    assert default.accelerator == m.accelerator or (
        default.accelerator and default.accelerator.type == m.accelerator.type
    )
    assert default.name == CATALOG.candidates(m.cloud, m.accelerator.type, m.accelerator.count)[0].name


@pytest.mark.parametrize(
    ("accelerator", "gcp_machine", "aws_machine"),
    [
        ("h100", "a3-megagpu-8g", "p5.48xlarge"),
        ("h200", "a3-ultragpu-8g", "p5en.48xlarge"),
        ("b200", "a4-highgpu-8g", "p6-b200.48xlarge"),
        ("a100-40gb", "a2-highgpu-8g", "p4d.24xlarge"),
        ("l4", "g2-standard-96", "g6.48xlarge"),
    ],
)
def test_same_request_resolves_on_both_clouds(accelerator: str, gcp_machine: str, aws_machine: str) -> None:
    pool = {"name": "p", "kind": "gpu", "accelerator": {"type": accelerator, "count": 8}, "nodes": 2}
    assert build_plan(_with_pool("gcp", pool)).groups[0].machine.name == gcp_machine
    assert build_plan(_with_pool("aws", pool)).groups[0].machine.name == aws_machine


def test_every_machine_names_its_source_and_efa_only_on_aws() -> None:
    for m in CATALOG.machines.values():
        assert m.source
        if m.cloud != "aws":
            assert m.efa_interfaces == 0 and m.network_cards == 0
        if m.kind == "gpu":
            assert m.label is not None


def test_naming_chain() -> None:
    assert naming.node_hostlist("h100-a", 16) == "h100-a-[0-15]"
    for group, count in (("cpu", 1), ("h100-a", 2), ("v5p-0", 16), ("x-1", 4096)):
        assert naming.node_hostlist(group, count) == naming.compress(naming.slurm_nodes(group, count))
    assert naming.expand("v5p-0-[0-3]") == ["v5p-0-0", "v5p-0-1", "v5p-0-2", "v5p-0-3"]
    assert naming.compress(["a-1", "a-0", "b-3"]) == "a-[0-1],b-3"
    assert naming.pod("cpu", 3) == "cpu-3"
    assert naming.switch("v5p-1") == "sw-v5p-1"
    assert naming.controller_hosts("slurm", 1) == ["slurmctld-0.slurm.svc.cluster.local."]
    plan = build_plan(load_declaration("gcp"))
    for g in plan.groups:
        for name in (naming.statefulset(g.name), naming.node_pool(g.name), *g.node_names, naming.switch(g.name)):
            assert naming.is_dns_label(name), name


def test_every_machine_fact_is_read_by_library_code() -> None:
    """A catalog fact that no library code reads is a promise nothing keeps: setting it changes nothing.

    Counted by attribute name over the package (tests excluded); a field with a common name (``name``,
    ``kind``) passes trivially, the machine-specific ones (``hyperdisk_only``, ``eni_max_pods``) do not.
    """
    package = Path(slonk_infra.__file__).parent
    read = {
        node.attr
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
    }
    assert sorted(set(MachineType.model_fields) - read) == []
