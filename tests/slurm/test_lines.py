"""The Slurm renderers line by line: NodeName / PartitionName records, gres.conf and topology lines.

Expected lines are written out in full from the machine figures (see tests/plan/test_capacity.py for
how each CoreSpecCount / RealMemory / DefMemPerCPU is worked out) and the naming chain. DefCpuPerGPU and
DefMemPerGPU follow from the NodeName lines: a3-megagpu-8g keeps 102 - 2 = 100 cores, 100 // 8 = 12
whole cores = 24 CPUs per GPU, and 1812703 // 8 = 226587 MiB per GPU.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from slonk_infra.slurm.conf import node_line, partition_lines, render_slurm_conf
from slonk_infra.slurm.gres import gpu_files, render_gres_conf
from slonk_infra.slurm.lines import kv_line
from slonk_infra.slurm.topology import render_topology_conf, render_topology_yaml
from tests.kube_support import plan_for, with_slurm


def _body(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def _block(raw: dict[str, Any]) -> None:
    raw["slurm"]["topology"] = "block"


def _tree(raw: dict[str, Any]) -> None:
    raw["slurm"]["topology"] = "tree"


def test_kv_line_skips_none_and_spells_booleans_as_slurm_does() -> None:
    assert kv_line([("A", 1), ("B", None), ("C", True), ("D", False), ("E", ("x", "y"))]) == "A=1 C=YES D=NO E=x,y"


def test_node_lines_of_gpu_tpu_and_cpu_groups() -> None:
    plan = plan_for("gcp")
    lines = {g.name: node_line(g) for g in plan.groups}
    # Every pool of the gcp stack mounts Filestore, so its CSI node pod is among the system pods.
    assert lines["h100-b"] == (
        "NodeName=h100-b-[0-15] Sockets=2 CoresPerSocket=52 ThreadsPerCore=2 CoreSpecCount=2 RealMemory=1812703 "
        "Gres=gpu:h100:8 Feature=h100-b,gpu,h100,gcp Weight=10 State=FUTURE"
    )
    assert lines["cpu"] == (
        "NodeName=cpu-[0-1] Sockets=1 CoresPerSocket=8 ThreadsPerCore=2 CoreSpecCount=1 RealMemory=56081 "
        "Feature=cpu,gcp State=FUTURE"
    )
    assert lines["v5p-1"] == (
        "NodeName=v5p-1-[0-15] Sockets=2 CoresPerSocket=52 ThreadsPerCore=2 CoreSpecCount=1 RealMemory=426972 "
        "Gres=tpu:v5p:4 Feature=v5p,tpu-v5p,topo-4x4x4,v5p-1,tpu,gcp Weight=100 State=FUTURE"
    )
    # CPU work in a partition that holds accelerators takes CPU nodes first, TPU hosts last.
    assert "Weight" not in lines["cpu"]


def test_aws_node_line() -> None:
    plan = plan_for("aws")
    [p5] = [g for g in plan.groups if g.machine.name == "p5.48xlarge"][:1]
    # test_plan_capacity's p5.48xlarge, less the EFS and FSx CSI node pods of the aws stack's storage.
    assert node_line(p5).startswith(
        f"NodeName={p5.hostlist} Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 CoreSpecCount=1 RealMemory=2022688 "
        "Gres=gpu:h100:8 "
    )


def test_default_partitions_with_def_mem_per_cpu_and_blocks_for_tpus() -> None:
    plan = plan_for("gcp")
    every = "h100-a-[0-15],h100-b-[0-15],cpu-[0-1],v5p-0-[0-15],v5p-1-[0-15]"
    # Partitions of GPU groups alone allocate whole nodes (health.exclusiveNodes defaults to true); the
    # default ones, which also hold CPU and TPU nodes, stay shared (a one-core job must not take an 8-GPU
    # node or a TPU host). Every partition holding a GPU group gives GPU jobs CPUs and memory per GPU.
    gpu = "DefCpuPerGPU=24 DefMemPerGPU=226587"
    assert partition_lines(plan) == [
        f"PartitionName=low Nodes={every} DefMemPerCPU=2072 {gpu} Default=NO PriorityTier=1 MaxTime=UNLIMITED State=UP",
        f"PartitionName=general Nodes={every} DefMemPerCPU=2072 {gpu} Default=YES PriorityTier=2 MaxTime=UNLIMITED "
        "State=UP",
        f"PartitionName=high Nodes={every} DefMemPerCPU=2072 {gpu} Default=NO PriorityTier=3 MaxTime=UNLIMITED State=UP",
        "PartitionName=cpu Nodes=cpu-[0-1] DefMemPerCPU=4005 Default=NO PriorityTier=2 MaxTime=UNLIMITED State=UP",
        f"PartitionName=h100 Nodes=h100-a-[0-15],h100-b-[0-15] DefMemPerCPU=8885 {gpu} Default=NO PriorityTier=2 "
        "MaxTime=UNLIMITED OverSubscribe=EXCLUSIVE State=UP",
        "PartitionName=tpu-v5p Nodes=v5p-0-[0-15],v5p-1-[0-15] DefMemPerCPU=2072 Default=NO PriorityTier=2 "
        "MaxTime=UNLIMITED Topology=blocks State=UP",
    ]


def test_per_gpu_defaults_come_from_the_leanest_gpu_group_of_a_partition() -> None:
    def with_l4(raw: dict[str, Any]) -> None:
        raw["pools"].append({"name": "l4", "kind": "gpu", "accelerator": {"type": "l4", "count": 2}, "nodes": 2})

    lines = {ln.split()[0]: ln for ln in partition_lines(plan_for("gcp", with_l4))}
    # g2-standard-24: 12 cores less 1 kept = 11, 11 // 2 = 5 whole cores = 10 CPUs per GPU (not 22 // 2 = 11,
    # which Slurm would round up to 12 CPUs per GPU job); RealMemory 85859 // 2 = 42929 MiB per GPU.
    assert lines["PartitionName=l4"] == (
        "PartitionName=l4 Nodes=l4-[0-1] DefMemPerCPU=3902 DefCpuPerGPU=10 DefMemPerGPU=42929 Default=NO "
        "PriorityTier=2 MaxTime=UNLIMITED OverSubscribe=EXCLUSIVE State=UP"
    )
    # The default partitions hold both GPU groups: the L4's shares, so no default overfills an L4 node.
    assert " DefMemPerCPU=2072 DefCpuPerGPU=10 DefMemPerGPU=42929 " in lines["PartitionName=general"]
    assert " DefCpuPerGPU=24 DefMemPerGPU=226587 " in lines["PartitionName=h100"]


def test_shared_nodes_keep_the_per_gpu_defaults_but_allocate_no_whole_nodes() -> None:
    def shared(raw: dict[str, Any]) -> None:
        raw["health"] = {"exclusiveNodes": False}

    lines = partition_lines(plan_for("gcp", shared))
    assert not [ln for ln in lines if "OverSubscribe" in ln]
    assert [ln.split()[0] for ln in lines if "DefMemPerGPU=226587" in ln] == [
        "PartitionName=low",
        "PartitionName=general",
        "PartitionName=high",
        "PartitionName=h100",
    ]


def test_a_failed_prolog_requeues_the_job_without_holding_it() -> None:
    def slurm_22_05(raw: dict[str, Any]) -> None:
        raw["image"]["slurmVersion"] = "22.05"
        raw["slurm"]["topology"] = "tree"

    def settings(text: str) -> dict[str, str]:
        return dict(
            ln.split("=", 1) for ln in text.splitlines() if ln and not ln.startswith(("#", "NodeName=", "Partition"))
        )

    modern = settings(render_slurm_conf(plan_for("gcp")))  # the gcp stack's image is 25.05
    assert modern["SchedulerParameters"] == "nohold_on_prolog_fail,batch_sched_delay=0,bf_interval=1"
    assert modern["PrologFlags"] == "Alloc,ForceRequeueOnFail"
    old = settings(render_slurm_conf(plan_for("gcp", slurm_22_05)))
    assert old["SchedulerParameters"] == "nohold_on_prolog_fail,batch_sched_delay=0,bf_interval=1"
    # 22.05 has no ForceRequeueOnFail and refuses to start on it ("fatal: PrologFlags invalid").
    assert old["PrologFlags"] == "Alloc"


def test_a_controller_restart_pushes_the_files_to_configless_workers() -> None:
    def params(v: str) -> str:
        conf = render_slurm_conf(plan_for("gcp", with_slurm(v)))
        return next(ln.split("=", 1)[1] for ln in conf.splitlines() if ln.startswith("SlurmctldParameters="))

    # 25.11 added reconfig_on_restart; before 23.11 push-config.sh asks for `scontrol reconfigure` instead.
    assert params("25.11") == params("26.05") == "enable_configless,reconfig_on_restart"
    assert params("25.05") == params("22.05") == "enable_configless"


def test_tpu_partitions_select_blocks_only_with_topology_yaml() -> None:
    plan = plan_for("gcp", _tree)
    assert not [ln for ln in partition_lines(plan) if "Topology=" in ln]


def test_declared_partitions() -> None:
    def declared(raw: dict[str, Any]) -> None:
        raw["slurm"]["partitions"] = [
            {"name": "gpu", "pools": ["h100-a", "h100-b"], "default": True, "priorityTier": 5, "maxTime": "2-00:00:00"},
            {"name": "spare", "pools": ["*"], "preemptMode": "REQUEUE"},
        ]

    lines = partition_lines(plan_for("gcp", declared))
    assert lines[0] == (
        "PartitionName=gpu Nodes=h100-a-[0-15],h100-b-[0-15] DefMemPerCPU=8885 DefCpuPerGPU=24 DefMemPerGPU=226587 "
        "Default=YES PriorityTier=5 MaxTime=2-00:00:00 OverSubscribe=EXCLUSIVE State=UP"
    )
    assert lines[1].startswith("PartitionName=spare Nodes=h100-a-[0-15],h100-b-[0-15],cpu-[0-1],v5p-0-[0-15],")
    # spare holds CPU and TPU nodes too: shared, never whole nodes
    assert lines[1].endswith(" PreemptMode=REQUEUE State=UP") and "Default=NO" in lines[1]


def test_gres_lines() -> None:
    assert gpu_files(1) == "/dev/nvidia0"
    assert gpu_files(8) == "/dev/nvidia[0-7]"
    assert _body(render_gres_conf(plan_for("gcp"))) == [
        "AutoDetect=off",
        "NodeName=h100-a-[0-15] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
        "NodeName=h100-b-[0-15] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
        "NodeName=v5p-0-[0-15] Name=tpu Type=v5p Count=4",
        "NodeName=v5p-1-[0-15] Name=tpu Type=v5p Count=4",
    ]
    # CPU-only clusters still get a valid gres.conf.
    assert _body(render_gres_conf(plan_for("local"))) == ["AutoDetect=off"]


def test_tree_topology_lines() -> None:
    assert _body(render_topology_conf(plan_for("local"))) == [
        "SwitchName=sw-cpu-a Nodes=cpu-a-[0-3]",
        "SwitchName=sw-cpu-b Nodes=cpu-b-0",
        "SwitchName=root Switches=sw-cpu-a,sw-cpu-b",
    ]


def test_block_topology_lines() -> None:
    assert _body(render_topology_conf(plan_for("gcp", _block))) == [
        "BlockName=bl-h100-a Nodes=h100-a-[0-15]",
        "BlockName=bl-h100-b Nodes=h100-b-[0-15]",
        "BlockName=bl-cpu Nodes=cpu-[0-1]",
        "BlockName=bl-v5p-0 Nodes=v5p-0-[0-15]",
        "BlockName=bl-v5p-1 Nodes=v5p-1-[0-15]",
    ]


def test_topology_yaml_has_the_fabric_tree_by_default_and_a_block_topology_for_tpus() -> None:
    doc = yaml.safe_load(render_topology_yaml(plan_for("gcp")))
    fabric, blocks = doc
    assert (fabric["topology"], fabric["cluster_default"]) == ("fabric", True)
    assert fabric["tree"]["switches"][-1] == {
        "switch": "root",
        "children": "sw-h100-a,sw-h100-b,sw-cpu,sw-v5p-0,sw-v5p-1",
    }
    assert (blocks["topology"], blocks["cluster_default"]) == ("blocks", False)
    assert {"block": "bl-v5p-0", "nodes": "v5p-0-[0-15]"} in blocks["block"]["blocks"]


def test_health_interval_comes_from_the_declaration() -> None:
    def every_minute(raw: dict[str, Any]) -> None:
        raw["health"] = {"intervalSeconds": 61}

    assert "HealthCheckInterval=300" in render_slurm_conf(plan_for("gcp")).splitlines()
    assert "HealthCheckInterval=61" in render_slurm_conf(plan_for("gcp", every_minute)).splitlines()


@pytest.mark.parametrize("release", ["25.11", "26.05"])
def test_slurm_conf_leaves_the_health_check_timeout_at_slurm_s_60_seconds(release: str) -> None:
    """26.05's HealthCheckTimeout would reach a 25.11 slurmd that does not know it (reconfig_on_restart)."""

    def set_up(raw: dict[str, Any]) -> None:
        raw["image"]["slurmVersion"] = release

    assert not [
        x for x in render_slurm_conf(plan_for("gcp", set_up)).splitlines() if x.startswith("HealthCheckTimeout")
    ]
