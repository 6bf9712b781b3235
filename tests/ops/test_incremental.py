"""Work skipped on unchanged records: the list adapters' record caches and reconcile's memo of quiet nodes.

Both must be invisible in what a tick decides: every reconcile scenario of ``test_sync`` is replayed with a
memo carried from tick to tick and its plans compared with the plans of a memo-less reconcile.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from slonk_infra.ops.kube_api import KubeApi, KubeError
from slonk_infra.ops.model import KubeNode, SlurmNode, Taint
from slonk_infra.ops.readbuffer import ReadBuffer
from slonk_infra.ops.slurm_records import node_from
from slonk_infra.ops.sync import Observed, Plan, ReconcileMemo, reconcile
from slonk_infra.ops.wire import SLURM_NODE, SLURM_NODES_RAW, DecodeError, RecordCache
from slonk_infra.vocab import REPLACE_MACHINE, SLURM_STATE
from testing.fakekube import TOKEN, FakeKube
from tests.ops import test_sync
from tests.ops.test_sync import T0, World, spec, verdict

# ----------------------------------------------------------------------------- reconcile with a memo


class TwinWorld(World):
    """A World whose every tick decides twice, with and without the memo, and insists on the same plan."""

    memo: ReconcileMemo

    def tick(self, dt: float = 15.0) -> Plan:
        if not hasattr(self, "memo"):
            self.memo = ReconcileMemo()
        self.now += dt
        obs = Observed(self.slurm, self.nodes, self.pods)
        plain = reconcile(obs, self.state, self.spec, self.now)
        remembered = reconcile(obs, self.state, self.spec, self.now, self.memo)
        assert remembered == plain
        self.apply(remembered)
        return remembered


SCENARIOS = [f for name, f in inspect.getmembers(test_sync, inspect.isfunction) if name.startswith("test_")]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_every_reconcile_scenario_decides_the_same_with_the_memo(
    scenario: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(test_sync, "World", TwinWorld)
    scenario()


def many(n: int) -> TwinWorld:
    w = TwinWorld()
    for i in range(n):
        w.add(f"h100-{i}")
    return w


def test_quiet_nodes_are_reused_and_a_change_among_them_is_seen() -> None:
    w = many(8)
    w.settle()
    w.settle()
    assert w.memo.reused == 8
    w.person_drains("h100-5", "bad cable")  # a new record for one node: decided again
    plan = w.tick()
    assert [p.name for p in plan.patches if p.unschedulable] == ["gke-h100-5"]
    assert w.memo.reused == 7
    w.settle()  # the patched pod and machine are new records: decided once more
    w.settle()
    assert w.memo.reused == 8  # drained and cordoned, and quiet again
    assert w.nodes["gke-h100-5"].annotations[SLURM_STATE] == "h100-5=IDLE+DRAIN"


def test_a_node_that_disappears_is_dropped_from_the_memo() -> None:
    w = many(3)
    w.settle()
    del w.pods["h100-1"]
    w.settle()
    assert set(w.memo.nodes) == {"h100-0", "h100-2"}


def test_the_clock_alone_can_bring_scheduled_maintenance_on_an_unchanged_machine() -> None:
    w = many(2)
    label = w.spec.signals.scheduled_maintenance_label
    lead = w.spec.signals.scheduled_maintenance_lead_seconds
    w.set_node("gke-h100-0", labels={label: str(int(T0 + lead + 3 * 15))})
    w.settle()
    w.settle()
    assert "h100-0" not in w.memo.nodes  # its outcome depends on the time: never reused
    plan = w.tick(dt=60.0)  # no record changed, the maintenance came within the lead time
    assert [u.nodes for u in plan.slurm] == [("h100-0",)]


def test_a_memo_made_under_other_settings_is_not_used() -> None:
    w = many(2)
    w.settle()
    w.settle()
    w.spec = w.spec.model_copy()  # equal settings, another object: the memo is not trusted
    w.settle()
    assert w.memo.reused == 0


def test_a_change_on_a_quiet_cluster_visits_only_the_nodes_it_concerns() -> None:
    w = many(200)
    w.settle()
    w.settle()
    assert (w.memo.reused, w.memo.visited) == (200, 0)  # nothing changed: no node visited
    w.person_drains("h100-7", "bad cable")
    w.tick()
    assert w.memo.visited == 1  # its Slurm record changed
    w.tick()
    assert w.memo.visited == 1  # its pod and machine were patched: their records changed
    w.set_node("gke-h100-9", unschedulable=True)
    plan = w.tick()
    assert [u.nodes for u in plan.slurm] == [("h100-9",)] and w.memo.visited == 1  # the node on that machine
    w.settle()
    w.settle()
    assert w.memo.visited == 0 and w.memo.reused == 200


def test_the_first_tick_and_a_list_that_grew_visit_every_node() -> None:
    w = many(10)
    w.tick()
    assert (w.memo.visited, w.memo.reused) == (10, 0)
    w.settle()
    w.add("h100-10")  # positions are kept, but the maps grew
    w.tick()
    assert (w.memo.visited, w.memo.reused) == (11, 10)  # every node visited, the quiet ones reused one by one


def _random_step(w: TwinWorld, rng: random.Random) -> None:  # noqa: C901  a menu of changes
    """One thing a day on a cluster brings, to a random node."""
    name = rng.choice(sorted(w.pods) or ["h100-0"])
    kname = f"gke-{name}"
    what = rng.randrange(15)
    gone = sorted(set(w.slurm) - set(w.pods))
    if what == 12 and gone:
        w.restart_pod(rng.choice(gone))  # a pod deleted by a remediation comes back
    elif what == 13 and kname in w.nodes:
        del w.nodes[kname]  # the machine left the cluster (the maps shrink)
    elif what == 14 and kname not in w.nodes:
        w.nodes[kname] = KubeNode(kname, uid=f"uid-{w.now}", provider_id=f"gce://p/z/{kname}", boot_id="b2")
    elif what == 0 and name in w.slurm:
        w.person_drains(name, rng.choice(["bad cable", "firmware"]))
    elif what == 1 and name in w.slurm:
        w.slurm[name] = SlurmNode(name, "IDLE", gpus=8)  # a person resumes it
    elif what == 2 and name in w.pods:
        w.annotate_pod(name, verdict(rng.choice(["restart-pod", "replace-machine", "needs-person"]), "xid 79"))
    elif what == 3 and name in w.pods:
        w.annotate_pod(name, verdict(t=w.now))
    elif what == 4 and kname in w.nodes:
        w.set_node(kname, unschedulable=not w.nodes[kname].unschedulable)
    elif what == 5 and kname in w.nodes:
        taints = () if w.nodes[kname].taints else (Taint("cloud.google.com/impending-node-termination"),)
        w.set_node(kname, taints=taints)
    elif what == 6 and kname in w.nodes:
        ready = w.nodes[kname].conditions.get("Ready", "True")
        w.set_node(kname, conditions={"Ready": "False" if ready == "True" else "True"})
    elif what == 7 and name in w.pods and name in w.slurm:
        w.restart_pod(name)  # a new pod object, at the end of the map
    elif what == 8 and kname in w.nodes:
        w.set_node(kname, boot_id=f"b{rng.randrange(1000)}", annotations={})  # the machine was replaced
    elif what == 9 and name in w.slurm:
        s = w.slurm[name]
        w.slurm[name] = dataclasses.replace(s, state=rng.choice(["IDLE", "ALLOCATED", "DOWN"]), alloc_cpus=0)
    elif what == 10 and kname in w.nodes:
        label = w.spec.signals.scheduled_maintenance_label
        w.set_node(kname, labels={label: str(int(w.now + rng.choice([60, 7200])))})
    elif what == 11 and kname in w.nodes and REPLACE_MACHINE not in w.nodes[kname].annotations:
        w.set_node(kname, annotations={**w.nodes[kname].annotations, "x": str(rng.random())})


@pytest.mark.parametrize("seed", range(8))
def test_random_days_decide_the_same_with_the_memo(seed: int) -> None:
    """Many ticks of random changes on a few dozen nodes: the memo's plans equal the plain ones every tick."""
    rng = random.Random(seed)
    w = many(24)
    w.spec = spec(maxActionsPerWindow=4, timeoutSeconds=1800)
    w.tick()
    partial = 0
    for _ in range(120):
        for _ in range(rng.choice([0, 0, 1, 1, 2, 4])):
            _random_step(w, rng)
        w.tick(dt=rng.choice([15.0, 15.0, 60.0, 900.0]))
        partial += w.memo.visited < sum(not p.deleting for p in w.pods.values())
    assert partial > 30, partial  # many ticks visited only some nodes: the incremental path was compared


# ----------------------------------------------------------------------------- the record caches


def slurm_answer(nodes: list[dict[str, Any]]) -> bytes:
    return json.dumps({"nodes": nodes, "errors": []}, indent=2).encode()


def test_unchanged_records_are_the_same_objects_and_changed_ones_are_read_again() -> None:
    cache = RecordCache(SLURM_NODE, node_from)
    first = [{"name": f"n{i}", "state": ["IDLE"], "gres": "gpu:h100:8(S:0-1)"} for i in range(3)]
    a = cache.records(SLURM_NODES_RAW.decode(slurm_answer(first)).nodes or [])
    assert cache.built == 3
    second = [first[0], {**first[1], "state": ["IDLE", "DRAIN"], "reason": "x"}]  # n2 is gone
    b = cache.records(SLURM_NODES_RAW.decode(slurm_answer(second)).nodes or [])
    assert cache.built == 1
    assert b[0] is a[0] and b[1] is not a[1]
    assert b[1].drained and b[1].reason == "x" and [n.name for n in b] == ["n0", "n1"]
    third = cache.records(SLURM_NODES_RAW.decode(slurm_answer(first)).nodes or [])
    assert cache.built == 2 and third[0] is a[0]  # n1 as it was and n2 were forgotten once they left the list
    assert third[2] == a[2] and third[2] is not a[2]


def test_a_field_the_records_do_not_read_changes_no_record() -> None:
    """A node's CPU load changes with every ping: the same record (and list) comes back, and the memo sees
    nothing new; a changed field that is read gives a new record."""
    cache = RecordCache(SLURM_NODE, node_from)
    nodes = [{"name": f"n{i}", "state": ["IDLE"], "cpu_load": 1} for i in range(3)]
    a = cache.records(SLURM_NODES_RAW.decode(slurm_answer(nodes)).nodes or [])
    nodes[1] = {**nodes[1], "cpu_load": 250}
    b = cache.records(SLURM_NODES_RAW.decode(slurm_answer(nodes)).nodes or [])
    assert cache.built == 1 and b is a  # read again, equal, so the very list of the last answer
    nodes[2] = {**nodes[2], "state": ["DOWN"]}
    c = cache.records(SLURM_NODES_RAW.decode(slurm_answer(nodes)).nodes or [])
    assert c is not b and c[:2] == b[:2] and c[0] is b[0] and c[1] is b[1] and c[2].state == "DOWN"


def test_an_item_one_byte_apart_is_read_again() -> None:
    """Items are known by a digest: two of one length that differ in one byte are two records."""
    cache = RecordCache(SLURM_NODE, node_from)
    idle = [{"name": "n0", "state": ["IDLE"]}]
    down = [{"name": "n0", "state": ["DOWN"]}]
    assert len(slurm_answer(idle)) == len(slurm_answer(down))
    a = cache.records(SLURM_NODES_RAW.decode(slurm_answer(idle)).nodes or [])
    b = cache.records(SLURM_NODES_RAW.decode(slurm_answer(down)).nodes or [])
    assert cache.built == 1 and b[0] is not a[0] and b[0].state != a[0].state


def test_records_outlive_the_buffer_their_answer_was_read_into() -> None:
    """The next tick's answer is read over the last one's bytes; the records kept must not change."""
    cache = RecordCache(SLURM_NODE, node_from)
    buffer = ReadBuffer(64)
    first = [{"name": f"n{i}", "state": ["IDLE"], "reason": f"r{i}"} for i in range(50)]
    kept = cache.records(SLURM_NODES_RAW.decode(buffer.fill(io.BytesIO(slurm_answer(first)))).nodes or [])
    second = [{"name": f"m{i}", "state": ["DOWN"], "reason": f"s{i}"} for i in range(50)]
    cache.records(SLURM_NODES_RAW.decode(buffer.fill(io.BytesIO(slurm_answer(second)))).nodes or [])
    assert [(n.name, n.reason) for n in kept] == [(f"n{i}", f"r{i}") for i in range(50)]


def test_an_item_that_is_not_a_record_fails_the_list() -> None:
    cache = RecordCache(SLURM_NODE, node_from)
    with pytest.raises(DecodeError):
        cache.records(SLURM_NODES_RAW.decode(b'{"nodes": [{"name": "n0"}, 7]}').nodes or [])


@pytest.fixture()
def kube() -> Iterator[tuple[FakeKube, KubeApi]]:
    with FakeKube() as fake:
        for i in range(3):
            fake.add_node(f"gke-{i}")
            fake.add_pod(f"h100-{i}", "slurm", f"gke-{i}", labels={"app": "w"})
        yield fake, KubeApi.connect(fake.url, TOKEN, "slurm")


def test_kubernetes_lists_reuse_records_of_unchanged_objects(kube: tuple[FakeKube, KubeApi]) -> None:
    fake, api = kube
    nodes = {n.name: n for n in api.list_nodes()}
    api.patch_node("gke-1", {"spec": {"unschedulable": True}})
    again = {n.name: n for n in api.list_nodes()}
    assert again["gke-0"] is nodes["gke-0"] and again["gke-2"] is nodes["gke-2"]
    assert isinstance(again["gke-1"], KubeNode) and again["gke-1"].unschedulable
    pods = api.list_pods("app=w")
    with fake.lock:
        del fake.pods[("slurm", "h100-2")]
    assert [p.name for p in api.list_pods("app=w")] == ["h100-0", "h100-1"]
    assert api.list_pods("app=w")[0] is pods[0]


def test_a_kubernetes_item_that_is_not_an_object_is_a_kube_error() -> None:
    api = KubeApi.connect("http://127.0.0.1:1", "token", "slurm")
    with pytest.raises(KubeError, match="not a list the controller can read"):
        api._records("list_nodes", api._nodes, msgspec.json.decode(b"[1]", type=list[msgspec.Raw]))
