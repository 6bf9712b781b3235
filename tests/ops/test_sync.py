"""The pure reconcile step (slonk_infra.ops.sync): every rule on hand-made records, and convergence.

``World`` holds records and applies a plan to them the way the APIs would, so each test can check
both what one tick decides and that the next tick, seeing the result, decides nothing more.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from slonk_infra.ops.config import OperationsSpec, RemediationSpec
from slonk_infra.ops.model import KubeNode, KubePod, SlurmNode, Taint
from slonk_infra.ops.remediation import RemediationState
from slonk_infra.ops.sync import Observed, Plan, reconcile
from slonk_infra.vocab import (
    CORDON_REASON,
    CORDONED_BY,
    GROUP_LABEL,
    HEALTH,
    REPLACE_MACHINE,
    SLURM_REASON,
    SLURM_STATE,
)

T0 = 1_800_000_000.0
FP = "sha256:" + "ab" * 32


def verdict(
    action: str = "none", reason: str = "", check: str = "gpu-ecc", t: float | None = None, fp: str = FP
) -> str:
    ok = action == "none"
    data: dict[str, object] = {
        "schema": "slonk-health/v1",
        "ok": ok,
        "action": action,
        "fingerprint": {"kind": "gpu-uuids", "value": fp},
        "results": [{"check": check, "ok": ok, "action": action, "reason": reason}],
    }
    if t is not None:
        data["time"] = t
    return json.dumps(data)


@dataclass
class World:
    """Records of both systems, and a plan applied to them as the APIs would."""

    slurm: dict[str, SlurmNode] = field(default_factory=dict)
    nodes: dict[str, KubeNode] = field(default_factory=dict)
    pods: dict[str, KubePod] = field(default_factory=dict)
    state: RemediationState = field(default_factory=RemediationState)
    spec: OperationsSpec = field(default_factory=OperationsSpec)
    now: float = T0

    def add(self, name: str, pool: str = "h100", pod_annotations: dict[str, str] | None = None) -> None:
        kname = f"gke-{name}"
        self.slurm[name] = SlurmNode(name, "IDLE", gpus=8)
        self.nodes[kname] = KubeNode(kname, uid=f"uid-{kname}", provider_id=f"gce://p/z/{kname}", boot_id="b1")
        self.pods[name] = KubePod(
            name,
            uid=f"pod-{name}-1",
            node_name=kname,
            labels={GROUP_LABEL: pool},
            annotations=dict(pod_annotations or {}),
            created=T0 - 100,
        )

    def tick(self, dt: float = 15.0) -> Plan:
        self.now += dt
        plan = reconcile(Observed(self.slurm, self.nodes, self.pods), self.state, self.spec, self.now)
        self.apply(plan)
        return plan

    def apply(self, plan: Plan) -> None:
        for upd in plan.slurm:
            for n in upd.nodes:
                s = self.slurm[n]
                if upd.state == "DRAIN":
                    self.slurm[n] = dataclasses.replace(
                        s, flags=s.flags | {"DRAIN"}, reason=upd.reason, reason_time=self.now
                    )
                else:
                    self.slurm[n] = dataclasses.replace(s, flags=s.flags - {"DRAIN"}, reason="", reason_time=0)
        for p in plan.patches:
            if p.kind == "node":
                node = self.nodes[p.name]
                ann = {k: v for k, v in {**node.annotations, **p.annotations}.items() if v is not None}
                unschedulable = node.unschedulable if p.unschedulable is None else p.unschedulable
                self.nodes[p.name] = dataclasses.replace(node, annotations=ann, unschedulable=unschedulable)
            else:
                pod = self.pods[p.name]
                ann = {k: v for k, v in {**pod.annotations, **p.annotations}.items() if v is not None}
                self.pods[p.name] = dataclasses.replace(pod, annotations=ann)
        for name in plan.delete_pods:
            del self.pods[name]
        self.state = plan.state

    def settle(self) -> Plan:
        """One more tick that must change nothing."""
        plan = self.tick()
        assert plan.empty, (plan.slurm, plan.patches, plan.delete_pods)
        return plan

    def person_drains(self, name: str, reason: str) -> None:
        s = self.slurm[name]
        self.slurm[name] = dataclasses.replace(s, flags=s.flags | {"DRAIN"}, reason=reason, reason_time=self.now)

    def annotate_pod(self, name: str, health: str) -> None:
        pod = self.pods[name]
        self.pods[name] = dataclasses.replace(pod, annotations={**pod.annotations, HEALTH: health})

    def set_node(self, kname: str, **changes: object) -> None:
        self.nodes[kname] = dataclasses.replace(self.nodes[kname], **changes)  # type: ignore[arg-type]

    def restart_pod(self, name: str, annotations: dict[str, str] | None = None, node: str | None = None) -> None:
        """What the StatefulSet controller and the pod's slurmd do after a pod is deleted."""
        old = f"gke-{name}" if node is None else node
        self.slurm[name] = dataclasses.replace(self.slurm[name], slurmd_start=self.now)
        self.pods[name] = KubePod(
            name,
            uid=f"pod-{name}-{self.now}",
            node_name=old,
            labels={GROUP_LABEL: "h100"},
            annotations=dict(annotations or {}),
            created=self.now,
        )


def spec(**remediation: object) -> OperationsSpec:
    return OperationsSpec(remediation=RemediationSpec.model_validate(remediation))


def test_a_person_drain_cordons_and_annotates_and_is_never_lifted() -> None:
    w = World()
    w.add("h100-0")
    w.person_drains("h100-0", "bad cable, ticket 42")
    plan = w.tick()
    assert plan.slurm == []
    pod = w.pods["h100-0"]
    assert pod.annotations == {SLURM_STATE: "IDLE+DRAIN", SLURM_REASON: "bad cable, ticket 42"}
    node = w.nodes["gke-h100-0"]
    assert node.unschedulable and node.annotations[CORDONED_BY] == "slonk"
    assert node.annotations[SLURM_STATE] == "h100-0=IDLE+DRAIN"
    assert node.annotations[CORDON_REASON] == "h100-0: bad cable, ticket 42"
    w.settle()
    # Kubernetes signals come and go; the person's drain and reason stay.
    w.set_node("gke-h100-0", taints=(Taint("cloud.google.com/impending-node-termination"),))
    assert w.tick().slurm == []
    w.set_node("gke-h100-0", taints=())
    assert w.tick().slurm == []
    assert w.slurm["h100-0"].reason == "bad cable, ticket 42"


def test_the_person_resumes_and_the_machine_is_uncordoned() -> None:
    w = World()
    w.add("h100-0")
    w.person_drains("h100-0", "firmware update")
    w.tick()
    w.slurm["h100-0"] = SlurmNode("h100-0", "IDLE", gpus=8)
    w.tick()
    node, pod = w.nodes["gke-h100-0"], w.pods["h100-0"]
    assert not node.unschedulable and node.annotations == {} and pod.annotations == {}
    w.settle()


def test_a_cordon_drains_and_the_uncordon_resumes() -> None:
    w = World()
    w.add("h100-0")
    w.add("h100-1")
    w.set_node("gke-h100-1", unschedulable=True)
    plan = w.tick()
    assert [(u.nodes, u.state, u.reason) for u in plan.slurm] == [
        (("h100-1",), "DRAIN", "slonk: kubernetes node cordoned")
    ]
    assert CORDONED_BY not in w.nodes["gke-h100-1"].annotations  # a person's cordon stays theirs
    w.tick()  # the pod shows what Slurm reports, so one tick later
    assert w.pods["h100-1"].annotations[SLURM_REASON] == "slonk: kubernetes node cordoned"
    w.settle()
    w.set_node("gke-h100-1", unschedulable=False)
    plan = w.tick()
    assert [(u.nodes, u.state) for u in plan.slurm] == [(("h100-1",), "RESUME")]
    w.tick()
    assert w.pods["h100-1"].annotations == {}
    w.settle()


def test_a_drain_someone_else_sets_over_ours_is_preserved() -> None:
    w = World()
    w.add("h100-0")
    w.set_node("gke-h100-0", unschedulable=True)
    w.tick()
    w.person_drains("h100-0", "keep out: RMA")
    w.set_node("gke-h100-0", unschedulable=False)
    w.tick()
    assert w.slurm["h100-0"].reason == "keep out: RMA" and w.slurm["h100-0"].drained


def test_termination_and_maintenance_signals_name_their_source() -> None:
    cases = {
        "cloud.google.com/impending-node-termination": "slonk: node terminating (cloud.google.com/impending-node-termination)",
        "aws-node-termination-handler/spot-itn": "slonk: node terminating (aws-node-termination-handler/spot-itn)",
        "cloud.google.com/maintenance-window-started": "slonk: host maintenance (cloud.google.com/maintenance-window-started)",
    }
    for key, reason in cases.items():
        w = World()
        w.add("h100-0")
        w.set_node("gke-h100-0", taints=(Taint(key),))
        assert [u.reason for u in w.tick().slurm] == [reason]
        w.settle()
        w.set_node("gke-h100-0", taints=())
        assert [u.state for u in w.tick().slurm] == ["RESUME"]
    # The taint Kubernetes adds to every cordoned node (ours too) is not a signal by itself.
    w = World()
    w.add("h100-0")
    w.set_node("gke-h100-0", taints=(Taint("node.kubernetes.io/unschedulable"),))
    w.settle()


def test_maintenance_labels_and_conditions() -> None:
    w = World()
    w.add("h100-0")
    w.set_node("gke-h100-0", labels={"cloud.google.com/active-node-maintenance": "ONGOING"})
    assert "active-node-maintenance=ONGOING" in w.tick().slurm[0].reason
    w = World()
    w.add("h100-0")
    w.set_node("gke-h100-0", labels={"cloud.google.com/scheduled-maintenance-time": str(int(T0 + 10 * 86400))})
    w.settle()  # far away: nothing yet
    w.set_node("gke-h100-0", labels={"cloud.google.com/scheduled-maintenance-time": str(int(T0 + 1800))})
    assert "scheduled" in w.tick().slurm[0].reason
    w = World()
    w.add("h100-0")
    w.set_node("gke-h100-0", conditions={"Ready": "True", "AcceleratedHardwareReady": "False"})
    assert w.tick().slurm[0].reason == "slonk: node condition AcceleratedHardwareReady=False"


def test_down_alone_is_shown_but_does_not_cordon() -> None:
    w = World()
    w.add("h100-0")
    w.slurm["h100-0"] = SlurmNode("h100-0", "DOWN", frozenset({"NOT_RESPONDING"}), reason="Not responding")
    plan = w.tick()
    assert plan.slurm == []
    assert w.pods["h100-0"].annotations[SLURM_STATE] == "DOWN+NOT_RESPONDING"
    assert not w.nodes["gke-h100-0"].unschedulable
    w.settle()


def test_failing_health_drains_then_restarts_the_pod_then_the_node_comes_back() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "leftover process 4242")})
    plan = w.tick()
    assert [u.reason for u in plan.slurm] == ["slonk: health restart-pod: gpu-ecc: leftover process 4242"]
    assert plan.delete_pods == []  # drained first, acted on next tick
    plan = w.tick()
    assert plan.delete_pods == ["h100-0"]
    assert w.slurm["h100-0"].reason.startswith("slonk: remediation restart-pod")
    assert "h100-0" in w.state.active and w.state.history[FP]
    w.tick()  # no pod yet: nothing to do but wait
    w.restart_pod("h100-0", {HEALTH: verdict()})
    plan = w.tick()
    assert "h100-0" not in w.state.active
    assert [(u.nodes, u.state) for u in plan.slurm] == [(("h100-0",), "RESUME")]
    assert not w.slurm["h100-0"].drained and w.pods["h100-0"].annotations == {HEALTH: verdict()}
    w.settle()


def test_a_busy_node_is_drained_but_not_restarted() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "x")})
    w.slurm["h100-0"] = SlurmNode("h100-0", "ALLOCATED", alloc_cpus=8, gpus=8, gpus_used=8)
    w.tick()
    plan = w.tick()
    assert plan.delete_pods == [] and any(d.what == "waiting" for d in plan.decisions)


def test_a_machine_that_fails_again_is_kept_out() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "xid 13")})
    w.tick()
    w.tick()
    w.restart_pod("h100-0", {HEALTH: verdict()})
    w.tick()
    assert not w.slurm["h100-0"].drained
    w.now += 3600
    w.annotate_pod("h100-0", verdict("restart-pod", "xid 13 again", t=w.now))
    plan = w.tick()
    assert plan.delete_pods == []
    assert w.slurm["h100-0"].reason == "slonk: repeat offender sha256:abababab: gpu-ecc: xid 13 again"
    assert w.nodes["gke-h100-0"].unschedulable
    for _ in range(3):
        assert w.tick().delete_pods == []
    # Even a passing verdict does not bring it back within the window.
    w.annotate_pod("h100-0", verdict(t=w.now))
    w.settle()
    assert w.slurm["h100-0"].drained


def test_rate_limit_and_pool_fraction() -> None:
    w = World(spec=spec(max_actions_per_window=1, window_seconds=600, max_pool_fraction=1.0))
    for i in range(3):
        w.add(f"h100-{i}", pod_annotations={HEALTH: verdict("restart-pod", "x", fp=f"sha256:{i}")})
    w.tick()
    plan = w.tick()
    assert len(plan.delete_pods) == 1 and plan.deferred == {"rate": 2}
    assert w.tick().delete_pods == []  # still inside the window
    w.now += 600
    assert len(w.tick().delete_pods) == 1

    w = World(spec=spec(max_actions_per_window=100, max_pool_fraction=0.2))
    for i in range(10):
        w.add(f"h100-{i}", pod_annotations={HEALTH: verdict("restart-pod", "x", fp=f"sha256:{i}")})
    w.tick()
    plan = w.tick()
    assert len(plan.delete_pods) == 2 and plan.deferred == {"pool": 8}
    assert w.tick().delete_pods == []  # two still under repair
    # Small pools still heal one node at a time.
    w = World(spec=spec(max_pool_fraction=0.01))
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "x")})
    w.tick()
    assert w.tick().delete_pods == ["h100-0"]


def test_needs_person_keeps_it_drained_and_cordoned_until_a_passing_verdict() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("needs-person", "9 GPUs, 8 declared")})
    plan = w.tick()
    assert plan.slurm[0].reason == "slonk: health needs-person: gpu-ecc: 9 GPUs, 8 declared"
    assert w.nodes["gke-h100-0"].unschedulable
    w.settle()
    w.annotate_pod("h100-0", verdict(t=w.now))
    w.tick()
    assert not w.slurm["h100-0"].drained and not w.nodes["gke-h100-0"].unschedulable
    w.settle()


def test_replace_machine_cordons_marks_and_finishes_on_a_new_machine() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("replace-machine", "xid 79: fell off the bus")})
    w.tick()
    plan = w.tick()
    assert plan.delete_pods == ["h100-0"]
    node = w.nodes["gke-h100-0"]
    assert node.unschedulable and json.loads(node.annotations[REPLACE_MACHINE])["fingerprint"] == FP
    w.settle()
    # The pod comes back on the same, still cordoned machine only after it was repaired (new boot ID).
    w.nodes["gke-h100-new"] = KubeNode("gke-h100-new", uid="uid-new", boot_id="b9")
    w.restart_pod("h100-0", {HEALTH: verdict(fp="sha256:" + "cd" * 32)}, node="gke-h100-new")
    w.tick()
    assert "h100-0" not in w.state.active and not w.slurm["h100-0"].drained
    old = w.nodes["gke-h100-0"]
    assert not old.unschedulable and REPLACE_MACHINE not in old.annotations
    w.settle()


def test_health_checker_drains_need_a_newer_passing_verdict() -> None:
    w = World()
    w.add("h100-0")
    w.person_drains("h100-0", "slonk-health: gpu-ecc: 3 uncorrectable errors")
    w.tick()
    w.settle()  # no verdict at all: stays drained
    w.annotate_pod("h100-0", verdict(t=w.now - 60))
    w.settle()  # older than the drain
    w.annotate_pod("h100-0", verdict(t=w.now + 1))
    assert [u.state for u in w.tick().slurm] == ["RESUME"]


def test_a_stale_verdict_on_the_kubernetes_node_is_ignored() -> None:
    w = World()
    w.add("h100-0")
    w.set_node("gke-h100-0", annotations={HEALTH: verdict("restart-pod", "old", t=T0 - 1000)})
    w.settle()
    w.set_node("gke-h100-0", annotations={HEALTH: verdict("restart-pod", "new", t=T0 + 1)})
    assert "new" in w.tick().slurm[0].reason


def test_an_unfinished_remediation_needs_a_person() -> None:
    w = World(spec=spec(timeout_seconds=60))
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "x")})
    w.tick()
    w.tick()
    plan = w.tick(dt=120)
    assert any(d.what == "timeout" for d in plan.decisions)
    assert w.slurm["h100-0"].reason == "slonk: needs-person: restart-pod unfinished after 60s"


def test_terminating_pods_and_hidden_nodes_are_left_to_the_lifecycle_scripts() -> None:
    w = World()
    w.add("h100-0")
    w.add("h100-1")
    w.pods["h100-0"] = dataclasses.replace(w.pods["h100-0"], deleting=True)
    w.person_drains("h100-0", "pod terminating")
    del w.slurm["h100-1"]  # FUTURE: not listed
    w.set_node("gke-h100-1", unschedulable=True)
    w.settle()


def test_the_memory_survives_a_json_round_trip() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "x")})
    w.tick()
    w.tick()
    data = json.loads(json.dumps(w.state.to_json()))
    assert RemediationState.from_json(data) == w.state


def test_a_new_pod_counts_only_once_its_slurmd_registered_again() -> None:
    w = World()
    w.add("h100-0", pod_annotations={HEALTH: verdict("restart-pod", "x")})
    w.tick()
    w.tick()
    w.restart_pod("h100-0", {HEALTH: verdict()})
    # slurmctld has not noticed the old slurmd died: the record still looks responding, but from before.
    w.slurm["h100-0"] = dataclasses.replace(w.slurm["h100-0"], slurmd_start=T0 - 500)
    w.tick()
    assert "h100-0" in w.state.active and w.slurm["h100-0"].drained
    w.slurm["h100-0"] = dataclasses.replace(w.slurm["h100-0"], slurmd_start=w.now)
    w.tick()
    assert "h100-0" not in w.state.active and not w.slurm["h100-0"].drained
