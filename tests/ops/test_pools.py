"""Pool sizing through the real tick (slonk_infra.ops.controller + pools) against the in-memory cloud.

The cloud stand-in (slonk_infra.ops.memory) follows the documented calls: deleteInstances /
TerminateInstanceInAutoScalingGroup(ShouldDecrementDesiredCapacity) remove that machine and lower the
target by one; resize / UpdateNodegroupConfig raise it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from slonk_infra.ops.config import CloudSection, OperationsSpec
from slonk_infra.ops.controller import Controller, TickReport
from slonk_infra.ops.memory import World
from slonk_infra.ops.model import SlurmJob
from slonk_infra.ops.pools import REMOVAL_TIMEOUT
from slonk_infra.vocab import POOL_LABEL


def section(world: World, **extra: Any) -> CloudSection:
    return CloudSection(
        kind=world.cloud_kind,
        cluster="demo",
        location="us-central1" if world.cloud_kind == "gcp" else "us-east-1",
        node_pools={g: g for g in world.cloud.pools},
        **extra,
    )


def controller(world: World, spec: OperationsSpec | None = None, **extra: Any) -> Controller:
    return Controller(
        spec or OperationsSpec(enabled=True),
        world.slurm,
        world.kube,
        clock=world.clock,
        cloud=world.cloud,
        cloud_section=section(world, **extra),
    )


def tick(world: World, ctl: Controller, dt: float = 15.0) -> TickReport:
    world.now += dt
    report = ctl.tick()
    assert report.slurm_ok and report.kube_ok, report.errors
    return report


@pytest.fixture(params=["gcp", "aws"])
def world(request: pytest.FixtureRequest) -> World:
    w = World(cloud_kind=request.param)
    w.add_pool("h100", 4)
    w.add_pool("cpu", 2, gpus=0, machine_type="n2-standard-32")
    return w


def test_steady_state_makes_no_cloud_call_and_one_statefulset_list(world: World) -> None:
    ctl = controller(world)
    for _ in range(3):
        report = tick(world, ctl)
        assert report.cloud_calls == {}
        assert report.kube_calls == {"list_nodes": 1, "list_pods": 1, "list_statefulsets": 1}
        assert report.slurm_calls == {"list_nodes": 1, "list_jobs": 1}
    assert world.cloud.log == []


def test_scale_in_removes_only_the_emptied_machines_one_call_each(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    kept = {world.kube.pods[f"h100-{i}"].node_name for i in range(2)}
    gone = {world.kube.pods[f"h100-{i}"].node_name for i in (2, 3)}
    # The StatefulSet goes to 2 replicas but its pods of ordinals 2 and 3 are still terminating (preStop).
    world.kube.sets["h100"] = dataclasses.replace(world.kube.sets["h100"], replicas=2)
    for i in (2, 3):
        world.kube.pods[f"h100-{i}"] = dataclasses.replace(world.kube.pods[f"h100-{i}"], deleting=True)
    report = tick(world, ctl)
    assert world.cloud.calls("remove") == [] and report.cloud_calls == {"pool_size": 1}
    assert any(d.what == "scale-in-waiting" for d in report.cloud_decisions)
    # The pods are gone: their machines, and only theirs, go; one call per machine; the target follows.
    world.scale("h100", 2)
    tick(world, ctl)
    removed = world.cloud.calls("remove")
    assert {world.node_name(m.instance) for m in removed} == gone and len(removed) == 2
    assert world.cloud.pools["h100"].target == 2
    assert {n for n in world.kube.nodes if world.kube.nodes[n].labels.get(POOL_LABEL) == "h100"} == kept
    world.cloud.log.clear()
    for _ in range(2):
        assert tick(world, ctl).cloud_calls == {}
    assert world.cloud.pools["cpu"].target == 2


def test_a_machine_whose_slurm_node_runs_a_job_is_never_removed(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    busy_machine = world.kube.pods["h100-3"].node_name
    world.slurm.jobs = [SlurmJob(7, "RUNNING", "h100", nodes=("h100-3",))]
    world.scale("h100", 3)  # the pod is gone (e.g. force-deleted from a lost kubelet) but the job still runs
    for _ in range(3):
        report = tick(world, ctl)
    assert world.cloud.calls("remove") == []
    assert busy_machine in world.kube.nodes
    assert any("runs a job" in d.why for d in report.cloud_decisions)
    world.slurm.jobs = []
    tick(world, ctl)
    assert [world.node_name(m.instance) for m in world.cloud.calls("remove")] == [busy_machine]


def test_a_machine_carrying_a_kept_worker_is_never_removed(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    # More machines than replicas (a person resized the pool up), but every one of them carries a kept pod.
    world.cloud.grow("h100", 6)
    world.boot(age=3600)
    world.scale("h100", 4)
    world.schedule()
    tick(world, ctl)
    holders = {p.node_name for p in world.kube.pods.values() if p.pool == "h100"}
    removed = {world.node_name(m.instance) for m in world.cloud.calls("remove")}
    assert len(removed) == 2 and not removed & holders
    assert world.cloud.pools["h100"].target == 4


def test_a_machine_that_just_joined_is_not_removed(world: World) -> None:
    ctl = controller(world, OperationsSpec(enabled=True, scale_in_grace_seconds=600))
    tick(world, ctl)
    world.cloud.grow("h100", 5)
    world.boot(age=0)  # joined now, its pod not scheduled yet
    report = tick(world, ctl)
    assert world.cloud.calls("remove") == []
    assert any("joined less than 600s ago" in d.why for d in report.cloud_decisions)
    world.now += 600
    tick(world, ctl)
    assert len(world.cloud.calls("remove")) == 1 and world.cloud.pools["h100"].target == 4


def test_growth_is_at_once_and_waits_for_a_pool_that_cannot_launch(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    world.cloud.pools["h100"].ready = False  # a Capacity Block not active yet
    world.scale("h100", 6)
    report = tick(world, ctl)
    assert world.cloud.calls("grow") == [] and any(d.what == "grow-deferred" for d in report.cloud_decisions)
    world.cloud.pools["h100"].ready = True
    tick(world, ctl)
    assert world.cloud.calls("grow") == [("h100", 6)]
    # Booting: the cloud already targets 6, so no second grow while the machines join.
    tick(world, ctl)
    assert world.cloud.calls("grow") == [("h100", 6)]
    world.boot()
    world.schedule()
    world.cloud.log.clear()
    assert tick(world, ctl).cloud_calls == {}
    assert all(p.node_name for p in world.kube.pods.values())


def test_removals_per_tick_are_capped_and_never_below_replicas(world: World) -> None:
    ctl = controller(world, OperationsSpec(enabled=True, max_removals_per_tick=1))
    tick(world, ctl)
    world.scale("h100", 1)
    tick(world, ctl)
    assert len(world.cloud.calls("remove")) == 1
    tick(world, ctl)
    tick(world, ctl)
    tick(world, ctl)
    assert len(world.cloud.calls("remove")) == 3 and world.cloud.pools["h100"].target == 1
    assert sum(1 for n in world.kube.nodes.values() if n.labels.get(POOL_LABEL) == "h100") == 1


def test_a_removal_the_cloud_did_not_carry_out_counts_again_after_the_timeout(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    world.scale("h100", 3)
    world.cloud.world = None  # the cloud accepts the call but the Node never leaves
    tick(world, ctl)
    (first,) = world.cloud.calls("remove")
    world.cloud.pools["h100"].target += 1  # and its target did not drop either
    world.cloud.pools["h100"].machines.append(first.instance)
    assert tick(world, ctl).cloud_calls == {}  # remembered as leaving: not counted, no call
    world.now += REMOVAL_TIMEOUT
    tick(world, ctl)
    assert world.cloud.calls("remove") == [first, first]


def test_a_failed_cloud_call_is_reported_and_tried_next_tick(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    world.scale("h100", 3)
    world.cloud.fail["remove"] = 1
    report = tick(world, ctl)
    assert any("cloud remove" in e for e in report.errors)
    tick(world, ctl)
    assert len(world.cloud.calls("remove")) == 2 and world.cloud.pools["h100"].target == 3
    text = ctl.metrics.render().decode()
    assert 'slonk_cloud_calls_total{call="remove",outcome="error"} 1.0' in text
    assert 'slonk_cloud_calls_total{call="remove",outcome="ok"} 1.0' in text


def test_no_cloud_section_or_cloud_actions_off_makes_no_cloud_call(world: World) -> None:
    for ctl in (
        Controller(OperationsSpec(enabled=True), world.slurm, world.kube, clock=world.clock, cloud=world.cloud),
        controller(world, OperationsSpec(enabled=True, cloud_actions=False)),
    ):
        world.scale("h100", 2)
        report = tick(world, ctl)
        assert report.kube_calls == {"list_nodes": 1, "list_pods": 1}
        assert world.cloud.log == []


def test_no_removal_while_the_cloud_updates_the_pool_and_nothing_to_do_after(world: World) -> None:
    # EKS managed node group update (or GKE surge upgrade): the cloud raises the target by 2 and launches
    # 2 machines that stay empty while it drains the old ones; they outlive scaleInGraceSeconds.
    ctl = controller(world, OperationsSpec(enabled=True, scale_in_grace_seconds=600))
    tick(world, ctl)
    surge = world.cloud.start_update("h100", 2)
    world.boot(age=3600)
    world.schedule()
    listed = [n for n in world.kube.nodes.values() if n.labels.get(POOL_LABEL) == "h100"]
    assert len(listed) == 4 + 2 and world.cloud.pools["h100"].target == 6
    for _ in range(3):
        report = tick(world, ctl, dt=600)
        assert world.cloud.calls("remove") == [] and world.cloud.calls("grow") == []
        assert report.cloud_calls == {"pool_size": 1, "pool_change": 1}
        (held,) = [d for d in report.cloud_decisions if d.what == "pool-changing"]
        assert held.node == "h100" and ("UPDATING" in held.why or "RECONCILING" in held.why)
    assert all(world.node_name(i) in world.kube.nodes for i in surge)
    assert 'slonk_decisions_total{decision="pool-changing"} 3.0' in ctl.metrics.render().decode()
    # The update is over: target back to 4, the surge gone; the counts agree, so no cloud call at all.
    world.cloud.finish_update("h100")
    world.cloud.log.clear()
    for _ in range(2):
        assert tick(world, ctl).cloud_calls == {}
    assert world.cloud.pools["h100"].target == 4 and world.cloud.log == []


def test_removals_resume_once_the_pool_is_stable(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    world.cloud.pools["h100"].changing = "instance group us-central1-a/g is not stable (recreating 1)"
    world.scale("h100", 3)
    report = tick(world, ctl)
    assert world.cloud.calls("remove") == []
    assert any(d.what == "pool-changing" and "recreating 1" in d.why for d in report.cloud_decisions)
    world.cloud.pools["h100"].changing = ""
    tick(world, ctl)
    assert len(world.cloud.calls("remove")) == 1 and world.cloud.pools["h100"].target == 3


def test_no_grow_while_the_cloud_changes_the_pool(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    world.cloud.pools["h100"].changing = "node group h100 is UPDATING"
    world.scale("h100", 6)
    report = tick(world, ctl)
    assert world.cloud.calls("grow") == [] and world.cloud.calls("pool_ready") == []
    assert any(d.what == "pool-changing" for d in report.cloud_decisions)
    world.cloud.pools["h100"].changing = ""
    tick(world, ctl)
    assert world.cloud.calls("grow") == [("h100", 6)]


def test_a_failed_stability_check_removes_nothing(world: World) -> None:
    ctl = controller(world)
    tick(world, ctl)
    world.scale("h100", 3)
    world.cloud.fail["pool_change"] = 1
    report = tick(world, ctl)
    assert world.cloud.calls("remove") == [] and any("cloud pool_change" in e for e in report.errors)
    tick(world, ctl)
    assert len(world.cloud.calls("remove")) == 1
