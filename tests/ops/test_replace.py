"""Machine replacement through the cloud (replace-machine verdicts), through the real tick, against the
in-memory cloud (slonk_infra.ops.memory): once per remediation, after cordon and drain, remembered across
restarts, retried with backoff, never for a repeat offender."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from slonk_infra.ops.config import CloudSection, OperationsSpec
from slonk_infra.ops.controller import Controller, TickReport
from slonk_infra.ops.kube_api import KubeError
from slonk_infra.ops.memory import World
from slonk_infra.ops.records import StateStore
from slonk_infra.ops.remediation import Remediation, RemediationState
from slonk_infra.ops.replace import MAX_BACKOFF, backoff, due
from slonk_infra.vocab import HEALTH
from tests.ops.test_sync import FP, verdict

FAULTY = "a3-megagpu-8g"


def make(world: World, tmp_path: Path | None = None, faulty: tuple[str, ...] = (FAULTY,)) -> Controller:
    section = CloudSection(
        kind=world.cloud_kind,
        cluster="demo",
        location="us-central1",
        node_pools={g: g for g in world.cloud.pools},
        faulty_host_machine_types=list(faulty),
    )
    return Controller(
        OperationsSpec(enabled=True),
        world.slurm,
        world.kube,
        store=StateStore(tmp_path) if tmp_path else None,
        clock=world.clock,
        cloud=world.cloud,
        cloud_section=section,
    )


def tick(world: World, ctl: Controller, dt: float = 15.0) -> TickReport:
    world.now += dt
    report = ctl.tick()
    assert report.slurm_ok and report.kube_ok
    return report


def fail_machine(world: World, name: str, fp: str = FP) -> str:
    """A replace-machine verdict on the pod; returns its machine's Node name."""
    pod = world.kube.pods[name]
    world.kube.pods[name] = dataclasses.replace(
        pod, annotations={HEALTH: verdict("replace-machine", "xid 79: fell off the bus", t=world.now, fp=fp)}
    )
    return pod.node_name


def world_of(cloud: str, machine_type: str = FAULTY) -> World:
    w = World(cloud_kind=cloud)  # type: ignore[arg-type]
    w.add_pool("h100", 4, machine_type=machine_type)
    return w


@pytest.mark.parametrize(
    ("cloud", "machine_type", "call"),
    [
        ("gcp", FAULTY, "reportHostAsFaulty"),
        ("gcp", "a2-highgpu-8g", "recreateInstances"),
        ("aws", "p5.48xlarge", "SetInstanceHealth"),
    ],
)
def test_one_cloud_call_after_cordon_and_drain_then_the_pod_returns(
    cloud: str, machine_type: str, call: str, tmp_path: Path
) -> None:
    world = world_of(cloud, machine_type)
    ctl = make(world, tmp_path)
    tick(world, ctl)
    bad = fail_machine(world, "h100-1")
    tick(world, ctl)  # drain
    assert world.slurm.nodes["h100-1"].drained and world.cloud.calls("replace") == []
    report = tick(world, ctl)  # idle and drained: cordon, delete the pod, then the cloud
    assert world.kube.deleted == ["h100-1"]
    # GKE keeps the instance (its Node stays, cordoned); the ASG terminates it (its Node leaves).
    assert world.kube.nodes[bad].unschedulable if cloud == "gcp" else bad not in world.kube.nodes
    ((machine, faulty),) = world.cloud.calls("replace")
    assert world.node_name(machine.instance) == bad and faulty == (call == "reportHostAsFaulty")
    assert report.cloud_calls == {"replace": 1}
    saved = json.loads((tmp_path / "state.json").read_text())["active"]["h100-1"]
    assert saved["cloud_call"] == call and saved["cloud_attempts"] == 1
    # The StatefulSet's new pod waits: the old machine stays cordoned until it is another machine.
    world.schedule()
    assert not world.kube.pods["h100-1"].node_name
    for _ in range(2):
        tick(world, ctl)
        world.schedule()
    if cloud == "gcp":
        assert world.kube.nodes[bad].unschedulable and not world.kube.pods["h100-1"].node_name
    world.boot()
    tick(world, ctl)  # replaced: the cordon is lifted
    world.schedule()
    assert world.kube.pods["h100-1"].node_name
    tick(world, ctl)
    assert "h100-1" not in ctl.state.active and not world.slurm.nodes["h100-1"].drained
    assert len(world.cloud.calls("replace")) == 1
    text = ctl.metrics.render().decode()
    assert f'slonk_machine_replacements_total{{call="{call}"}} 1.0' in text
    assert 'slonk_cloud_calls_total{call="replace",outcome="ok"} 1.0' in text
    # verdict at t, drain one tick later, the call the tick after: 30 s
    assert "slonk_replace_delay_seconds_sum 30.0" in text


def test_the_call_is_made_once_and_a_restart_does_not_repeat_it(tmp_path: Path) -> None:
    world = world_of("gcp")
    ctl = make(world, tmp_path)
    tick(world, ctl)
    fail_machine(world, "h100-2")
    tick(world, ctl)
    tick(world, ctl)
    assert len(world.cloud.calls("replace")) == 1
    again = make(world, tmp_path)  # a new controller process, same state volume
    for _ in range(3):
        assert tick(world, again).cloud_calls == {}
    assert len(world.cloud.calls("replace")) == 1


def test_a_failed_call_is_retried_with_backoff_never_twice_a_tick() -> None:
    world = world_of("gcp")
    ctl = make(world)
    tick(world, ctl)
    fail_machine(world, "h100-0")
    tick(world, ctl)
    world.cloud.fail["replace"] = 3
    per_tick = [tick(world, ctl).cloud_calls["replace"] for _ in range(8)]
    assert max(per_tick) == 1
    # 1st fails; retried next tick (2nd fails); then after 30 s (3rd fails); then after 60 s (accepted).
    assert per_tick == [1, 1, 0, 1, 0, 0, 0, 1]
    assert ctl.state.active["h100-0"].cloud_attempts == 4 and ctl.state.active["h100-0"].cloud_call
    assert 'slonk_cloud_calls_total{call="replace",outcome="error"} 3.0' in ctl.metrics.render().decode()


def test_a_repeat_offender_gets_no_second_replace() -> None:
    world = world_of("gcp")
    ctl = make(world)
    tick(world, ctl)
    fail_machine(world, "h100-3")
    tick(world, ctl)
    tick(world, ctl)
    world.boot()
    tick(world, ctl)
    world.schedule()
    tick(world, ctl)
    assert "h100-3" not in ctl.state.active
    # The same hardware (fingerprint) fails again on the new pod within the repeat window: kept out.
    fail_machine(world, "h100-3")
    for _ in range(4):
        tick(world, ctl)
    assert "repeat offender" in world.slurm.nodes["h100-3"].reason
    assert len(world.cloud.calls("replace")) == 1


def test_without_a_cloud_the_repair_still_cordons_and_waits() -> None:
    world = world_of("gcp")
    ctl = Controller(OperationsSpec(enabled=True), world.slurm, world.kube, clock=world.clock)
    tick(world, ctl)
    bad = fail_machine(world, "h100-1")
    tick(world, ctl)
    tick(world, ctl)
    assert world.kube.nodes[bad].unschedulable and world.cloud.log == []
    assert ctl.state.active["h100-1"].cloud_call == ""


def test_backoff_and_due_are_bounded() -> None:
    assert backoff(1) <= 15 and backoff(2) == 30 and backoff(50) == MAX_BACKOFF
    state = RemediationState()
    state.active["a"] = Remediation("a", "replace-machine", "fp", "x", 0.0, timed_out=True)
    state.active["b"] = Remediation("b", "restart-pod", "fp", "x", 0.0)
    state.active["c"] = Remediation("c", "replace-machine", "fp", "x", 0.0, cloud_next=100.0)
    assert due(state, 50.0) == [] and [r.node for r in due(state, 100.0)] == ["c"]


def test_no_cloud_call_while_the_cordon_did_not_reach_the_api() -> None:
    world = world_of("gcp")
    ctl = make(world)
    tick(world, ctl)
    bad = fail_machine(world, "h100-0")
    tick(world, ctl)
    patch = world.kube.patch_node

    def refuse(name: str, body: dict[str, object]) -> None:
        raise KubeError(f"patch_node {name}: HTTP 500")

    world.kube.patch_node = refuse  # type: ignore[method-assign]
    report = tick(world, ctl)
    assert world.cloud.calls("replace") == [] and any(d.what == "replace-waiting" for d in report.cloud_decisions)
    world.kube.patch_node = patch  # type: ignore[method-assign]
    tick(world, ctl)
    assert world.kube.nodes[bad].unschedulable and len(world.cloud.calls("replace")) == 1
