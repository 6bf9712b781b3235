"""One reconcile step, pure: Slurm nodes + Kubernetes nodes and worker pods + memory -> actions.

Worker pod ``<group>-<i>`` is Slurm node ``<group>-<i>``; the pod's ``spec.nodeName`` is the
machine. For each pod that is not terminating and whose Slurm node is listed:

1. **Slurm -> Kubernetes.** A node out of service (DRAIN or DOWN) is shown on its pod and
   Kubernetes node (``slonk.dev/slurm-state`` / ``slonk.dev/slurm-reason``). A drain set by anyone
   else (a person, slurmctld, a prolog) also cordons the Kubernetes node, marked
   ``slonk.dev/cordoned-by: slonk``. DOWN alone does not cordon: a dead slurmd is often a pod
   being replaced, and a cordon would keep its replacement off the machine.
2. **Kubernetes -> Slurm.** The most urgent of: a repeat-offender hold, a remediation in progress,
   a failing health verdict, a termination or maintenance taint/label, a failing node condition,
   a person's cordon, becomes the drain reason ``<prefix> <why>``. A node drained for a reason
   without one of the controller's prefixes is never touched (foreign drain). When nothing asks
   for it any more, only drains with the controller's own prefix are lifted; the health checker's
   (``slonk-health:``) are lifted only after a newer passing verdict.
3. **Remediation** (:mod:`slonk_infra.ops.remediation`) once the node is drained by the
   controller for a failing verdict and idle, within the limits.

Each pod and Kubernetes node is patched only when what it shows differs from what it should.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import heapq
import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress, count
from operator import is_not
from typing import Literal

from slonk_infra.ops import remediation as rem_mod
from slonk_infra.ops.config import OperationsSpec
from slonk_infra.ops.model import (
    CORDONED_BY_US,
    KubeNode,
    KubePod,
    SlurmNode,
    Verdict,
    instance_fingerprint,
    short,
)
from slonk_infra.ops.remediation import KeptOut, Remediation, RemediationState
from slonk_infra.ops.signals import current_verdict, kube_signal
from slonk_infra.vocab import CORDON_REASON, CORDONED_BY, REPLACE_MACHINE, SLURM_REASON, SLURM_STATE

MAX_REASON = 200  # what fits on one line of sinfo -R
MAX_ANNOTATION = 1024


@dataclass(frozen=True)
class Observed:
    """One tick's view of both systems."""

    slurm_nodes: Mapping[str, SlurmNode]
    kube_nodes: Mapping[str, KubeNode]
    pods: Mapping[str, KubePod]


@dataclass(frozen=True)
class SlurmUpdate:
    """One node-state change for a set of Slurm nodes (one API call or one scontrol)."""

    nodes: tuple[str, ...]
    state: Literal["DRAIN", "RESUME"]
    reason: str = ""


@dataclass(frozen=True)
class ObjectPatch:
    """A merge patch of a Kubernetes node or pod: annotations (None removes) and the cordon."""

    kind: Literal["node", "pod"]
    name: str
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    unschedulable: bool | None = None

    def body(self) -> dict[str, object]:
        """The JSON merge patch."""
        out: dict[str, object] = {}
        if self.annotations:
            out["metadata"] = {"annotations": dict(self.annotations)}
        if self.unschedulable is not None:
            out["spec"] = {"unschedulable": self.unschedulable}
        return out


@dataclass(frozen=True)
class Decision:
    """What was decided about one Slurm node, for logs and metrics."""

    node: str
    what: str
    why: str


@dataclass
class Plan:
    """Everything one tick will do, and the memory after it."""

    slurm: list[SlurmUpdate]
    patches: list[ObjectPatch]
    delete_pods: list[str]
    decisions: list[Decision]
    deferred: Counter[str]
    state: RemediationState
    machines: dict[str, tuple[str, str]] = field(default_factory=dict)  # Slurm node -> (fingerprint, kube node)
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # Slurm node -> current verdict

    @property
    def empty(self) -> bool:
        """Nothing to change."""
        return not (self.slurm or self.patches or self.delete_pods)


def _cut(text: str, limit: int = MAX_REASON) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fingerprint_of(name: str, verdict: Verdict | None, node: KubeNode | None) -> str:
    """The machine's identity: the verdict's fingerprint, else the cloud instance, else the node name."""
    if verdict is not None and verdict.fingerprint:
        return verdict.fingerprint
    return instance_fingerprint(node) or f"node:{name}"


@dataclass(frozen=True)
class _NodeOutcome:
    """What a quiet node (no change, decision, remediation, hold or failing verdict) added to a tick."""

    pod: KubePod
    knode: KubeNode | None
    slurm: SlurmNode
    fingerprint: str
    verdict: Verdict | None
    out: bool  # listed on its machine's slurm-state annotation
    cordon: str | None  # its line of its machine's cordon reason


@dataclass
class ReconcileMemo:
    """What the previous :func:`reconcile` decided, kept by the caller so that the next one decides only what changed.

    A node is quiet when its tick made no change, decision or patch for it and no remediation, hold or
    failing verdict concerns it. Its outcome depends only on its pod, machine and Slurm records (the
    adapters return the very same record objects for unchanged items) and on the settings, so while those
    are the same objects the outcome is reused. Outcomes that depend on the clock are never kept: a
    machine with the scheduled-maintenance label, a failing verdict (repeat-offender windows), a running
    remediation (timeouts). A machine whose inputs (its record, the nodes shown on it, its cordon reasons)
    are equal to the previous tick's and that needed no patch then needs none now.

    Which records changed is found without visiting them: the observed maps' keys and values are compared
    position by position with the previous tick's, by identity (:func:`_changed`, a C-level pass). Only the
    nodes named there, the nodes on changed machines, the nodes that were not quiet and those a
    remediation or hold concerns are decided; every other node keeps its outcome without being looked at.
    When a map grew or shrank (positions moved) every node is visited, reusing quiet outcomes one by one.

    The plan is the same with or without a memo; only the work differs. ``reused`` counts the nodes whose
    outcome was taken again by the last call, ``visited`` the nodes it looked at.
    """

    spec: OperationsSpec | None = None
    nodes: dict[str, _NodeOutcome] = field(default_factory=dict)  # quiet node -> its outcome
    machines: dict[str, tuple[object, ...]] = field(default_factory=dict)  # quiet machine -> its inputs
    reused: int = 0
    visited: int = 0
    # The previous tick's observed maps (keys, values), its whole plan.machines / verdicts, the nodes it
    # decided without keeping an outcome, the machines they (or orphans) wrote on, and the machines whose
    # inputs it did not keep.
    seen: tuple[tuple[list[str], list[object]], ...] | None = None
    placed: dict[str, tuple[str, str]] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    loud: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    loud_machines: set[str] = field(default_factory=set)
    # Indexes of the quiet outcomes: the nodes on each machine, the nodes of each machine fingerprint.
    on_machine: dict[str, set[str]] = field(default_factory=dict)
    by_fingerprint: dict[str, set[str]] = field(default_factory=dict)

    def clear(self, spec: OperationsSpec | None = None) -> None:
        """Forgets everything (another spec, or a reconcile that raised half way)."""
        fresh = ReconcileMemo(spec)
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(fresh, f.name))


def _views(obs: Observed) -> tuple[tuple[list[str], list[object]], ...]:
    return tuple((list(m), list(m.values())) for m in (obs.slurm_nodes, obs.kube_nodes, obs.pods))


def _changed(before: tuple[list[str], list[object]], now: tuple[list[str], list[object]]) -> set[str] | None:
    """The keys whose entry differs by position (old and new key), or None when the map grew or shrank."""
    (keys0, values0), (keys1, values1) = before, now
    if len(keys0) != len(keys1):
        return None
    at = set(compress(count(), map(is_not, values1, values0)))
    at.update(compress(count(), map(is_not, keys1, keys0)))
    return {keys0[i] for i in at} | {keys1[i] for i in at}


class _Tick:
    """The mutable working set of one :func:`reconcile` call."""

    def __init__(
        self, obs: Observed, state: RemediationState, spec: OperationsSpec, now: float, memo: ReconcileMemo
    ) -> None:
        self.obs, self.spec, self.now = obs, spec, now
        # Outcomes of the last call are valid only under the same settings.
        if memo.spec is not spec:
            memo.clear(spec)
        self.memo = memo
        # The pool-sizing memory (a list per machine) is never changed here, and the controller replaces
        # rather than edits it: shared, not copied, which at 4,096 machines is most of the copy's cost.
        shared: dict[int, object] = {id(state.hosts): state.hosts, id(state.removals): state.removals}
        self.state = copy.deepcopy(state, shared)
        self.state.prune(now, spec.remediation)
        self.drains: dict[str, list[str]] = defaultdict(list)
        self.resumes: list[str] = []
        self.cordons: dict[str, list[str]] = defaultdict(list)  # kube node -> why
        self.out_on: dict[str, list[tuple[str, SlurmNode]]] = defaultdict(list)  # kube node -> Slurm nodes out
        self.replace_notes: dict[str, str] = {}  # kube node -> replace-machine annotation
        self.patches: list[ObjectPatch] = []
        self.deletes: list[str] = []
        self.decisions: list[Decision] = []
        self.deferred: Counter[str] = Counter()
        self.machines: dict[str, tuple[str, str]] = {}
        self.verdicts: dict[str, Verdict] = {}
        self.loud: set[str] = set()  # nodes decided this tick whose outcome is not kept
        self.touched: set[str] = set()  # machines those nodes (and orphans) wrote on
        self.stale: set[str] = set()  # machines whose inputs may differ from the last tick's
        self.decided: set[str] = set()  # nodes visited this tick (their contributions are in out_on/cordons)
        self.carried = 0  # quiet nodes not visited: their outcomes stay in the memo
        self.replays = 0  # visited nodes whose last outcome was taken again

    @functools.cached_property
    def pool_sizes(self) -> Counter[str]:
        """Worker pods per pool; counted only when a remediation asks (every pod is visited)."""
        return Counter(p.pool for p in self.obs.pods.values())

    def note(self, node: str, what: str, why: str) -> None:
        self.decisions.append(Decision(node, what, why))

    # ------------------------------------------------------------------ which nodes to visit
    def dirty(self, views: tuple[tuple[list[str], list[object]], ...]) -> set[str] | None:
        """The nodes this tick must visit, or None for every node (the first tick, or a map grew or shrank)."""
        m = self.memo
        if m.seen is None:
            return None
        slurm, kube, pods = (_changed(a, b) for a, b in zip(m.seen, views, strict=True))
        if slurm is None or kube is None or pods is None:
            return None
        names = slurm | pods | m.loud | set(self.state.active)
        for kname in kube:
            names.update(m.on_machine.get(kname, ()))
        for fp in self.state.kept_out:
            names.update(m.by_fingerprint.get(fp, ()))
        if 2 * len(names) > len(self.obs.pods):
            return None  # most nodes changed: one pass over all is cheaper than forgetting each
        self.stale = kube | m.touched | m.loud_machines
        self.machines, self.verdicts = m.placed, m.verdicts  # carried; the visited nodes' entries are redone
        return names

    def forget(self, name: str) -> _NodeOutcome | None:
        """Takes a node's outcome (if it had one) out of the memo and out of this tick's results."""
        m = self.memo
        self.machines.pop(name, None)
        self.verdicts.pop(name, None)
        last = m.nodes.pop(name, None)
        if last is not None:
            where = last.pod.node_name
            self.stale.add(where)
            _discard(m.on_machine, where, name)
            _discard(m.by_fingerprint, last.fingerprint, name)
        return last

    def keep(self, name: str, outcome: _NodeOutcome) -> None:
        m = self.memo
        m.nodes[name] = outcome
        m.on_machine.setdefault(outcome.pod.node_name, set()).add(name)
        m.by_fingerprint.setdefault(outcome.fingerprint, set()).add(name)

    def visit_all(self) -> None:
        """Every node, in name order; the last tick's outcomes are reused one by one."""
        m = self.memo
        before = m.nodes
        # Outcomes are kept anew; the last tick's are reused one by one.
        m.nodes, m.on_machine, m.by_fingerprint = {}, {}, {}
        for name in sorted(self.obs.pods):
            pod = self.obs.pods[name]
            if not pod.deleting:
                self.node(name, pod, before.get(name))

    def visit(self, dirty: set[str]) -> None:
        """Only the ``dirty`` nodes, in the order a full pass would visit them; the rest keep their outcomes."""
        memo, pods = self.memo, self.obs.pods
        lasts = {name: self.forget(name) for name in dirty}
        self.carried = len(memo.nodes)
        todo = sorted(dirty)  # a sorted list is a heap
        while todo:
            name = heapq.heappop(todo)
            pod = pods.get(name)
            if pod is None or pod.deleting:
                continue
            held = len(self.state.kept_out)
            self.node(name, pod, lasts[name])
            if len(self.state.kept_out) != held:
                # A machine held out just now: a full pass would decide, not reuse, every later node on it.
                fp = self.machines[name][0]
                for later in sorted(n for n in memo.by_fingerprint.get(fp, ()) if n > name and n not in lasts):
                    lasts[later] = self.forget(later)
                    self.carried -= 1
                    heapq.heappush(todo, later)

    # ------------------------------------------------------------------ per Slurm node
    def node(self, name: str, pod: KubePod, last: _NodeOutcome | None) -> None:
        self.decided.add(name)
        slurm = self.obs.slurm_nodes.get(name)
        knode = self.obs.kube_nodes.get(pod.node_name)
        if (
            last is not None
            and last.pod is pod
            and last.knode is knode
            and last.slurm is slurm
            and name not in self.state.active
            and last.fingerprint not in self.state.kept_out
        ):
            self._replay(name, last)
            return
        marks = (len(self.decisions), len(self.patches))
        out, cordon, where = self._decide(name, pod, slurm, knode)
        wrote = {w for w in (pod.node_name if out else "", where) if w}  # the machines it shows itself on
        self.stale |= wrote
        if slurm is not None and self._quiet(name, slurm, knode, marks):
            fp, _ = self.machines[name]
            self.keep(name, _NodeOutcome(pod, knode, slurm, fp, self.verdicts.get(name), out, cordon))
        else:
            self.loud.add(name)
            self.touched |= wrote

    def _quiet(self, name: str, slurm: SlurmNode, knode: KubeNode | None, marks: tuple[int, int]) -> bool:
        """Whether a node's outcome just decided depends on its records alone (and may be reused)."""
        if marks != (len(self.decisions), len(self.patches)) or name in self.state.active:
            return False
        verdict = self.verdicts.get(name)
        if (verdict is not None and verdict.failing) or self.machines[name][0] in self.state.kept_out:
            return False
        label = self.spec.signals.scheduled_maintenance_label
        return not (knode is not None and label and label in knode.labels)  # else the signal depends on the clock

    def _replay(self, name: str, last: _NodeOutcome) -> None:
        """A quiet node's outcome of the previous tick, added again."""
        pod = last.pod
        self.machines[name] = (last.fingerprint, pod.node_name)
        if last.verdict is not None:
            self.verdicts[name] = last.verdict
        if last.out:
            self.out_on[pod.node_name].append((pod.name, last.slurm))
        if last.cordon is not None:
            self.cordons[pod.node_name].append(last.cordon)
        self.keep(name, last)
        self.replays += 1

    def _decide(  # noqa: C901  the decision table for one node, kept whole
        self, name: str, pod: KubePod, slurm: SlurmNode | None, knode: KubeNode | None
    ) -> tuple[bool, str | None, str]:
        """Decides one node; returns whether it is shown as out on its machine, its cordon line, if any, and the
        machine that line goes on ('' for none)."""
        spec, prefix = self.spec, self.spec.reason_prefix
        verdict = current_verdict(pod, knode, slurm)
        fp = fingerprint_of(name, verdict, knode)
        self.machines[name] = (fp, pod.node_name)
        if verdict is not None:
            self.verdicts[name] = verdict
        rem = self.state.active.get(name)
        if rem is not None and rem_mod.finished(rem, pod, knode, slurm, fp):
            del self.state.active[name]
            self.note(name, "remediated", f"{rem.action} finished")
            rem = None
        if slurm is None:
            return False, None, ""  # FUTURE (hidden) or unknown: the pod's own entrypoint brings it into Slurm
        failing = verdict is not None and verdict.failing
        held = self.state.kept_out.get(fp)
        if (
            failing
            and held is None
            and verdict is not None
            and rem is None
            and rem_mod.repeat_offender(self.state, fp, pod.uid, self.now, spec.remediation)
        ):
            held = KeptOut(fingerprint=fp, node=name, reason=verdict.reason, since=self.now)
            self.state.kept_out[fp] = held
            self.note(name, "kept-out", f"{short(fp)} failed again: {verdict.reason}")
        desired, cordon = self._desired(name, fp, knode, verdict, rem, held)

        after = slurm
        owned = slurm.reason.startswith(spec.all_owned_prefixes)
        if slurm.out and slurm.reason and not owned:
            # Foreign: a person's (or slurmctld's) decision. Never changed; a drain cordons.
            cordon, desired = slurm.drained, slurm.reason
        elif desired is not None:
            if not slurm.drained or slurm.reason != desired:
                after = self._drain(name, slurm, desired)
            elif failing and verdict is not None and rem is None and held is None:
                acted = self._remediate(name, pod, slurm, knode, verdict, fp)
                if acted is not None:
                    after, desired = self._drain(name, slurm, acted), acted
                    cordon = cordon or verdict.action == "replace-machine"
        elif slurm.drained and owned:
            newer_pass = verdict is not None and not verdict.failing and (verdict.time or 0) > slurm.reason_time
            if slurm.reason.startswith(prefix) or newer_pass:
                self.resumes.append(name)
                self.note(name, "resume", f"nothing keeps it out (was: {slurm.reason})")
                after = dataclasses.replace(
                    slurm, flags=slurm.flags - {"DRAIN"}, reason="" if not slurm.down else slurm.reason
                )
        if pod.name not in self.deletes:  # a pod being deleted needs no annotation
            self._reflect(pod, after)
        if pod.node_name and after.out:
            self.out_on[pod.node_name].append((pod.name, after))
        where = self._cordon_at(pod, rem, held) if cordon else ""
        if where:
            self.cordons[where].append(f"{name}: {desired}")
        return bool(pod.node_name) and after.out, f"{name}: {desired}" if where else None, where

    def _cordon_at(self, pod: KubePod, rem: Remediation | None, held: KeptOut | None) -> str:
        """The machine a node's cordon goes on ('' for none): its pod's, or the one under a replace-machine repair."""
        if (
            rem is None
            or rem.action != "replace-machine"
            or not rem.kube_node
            or pod.node_name not in ("", rem.kube_node)
        ):
            return pod.node_name
        # The new pod waits (unscheduled) for the repaired machine: keep the old one cordoned until the
        # cloud (or a person) has replaced it, then let the pod back onto it.
        return "" if held is None and self._replaced(rem) else rem.kube_node

    def _replaced(self, rem: Remediation) -> bool:
        """A replace-machine repair whose machine is another one now (and that has not timed out)."""
        return not rem.timed_out and rem_mod.machine_changed(rem, self.obs.kube_nodes.get(rem.kube_node))

    def orphan(self, rem: Remediation) -> None:
        """A remediation whose pod is gone or going: keep its drain reason, annotations and cordon."""
        slurm = self.obs.slurm_nodes.get(rem.node)
        desired, cordon = self._desired(rem.node, rem.fingerprint, None, None, rem, None)
        if slurm is not None and desired is not None:
            if slurm.out and slurm.reason and not slurm.reason.startswith(self.spec.all_owned_prefixes):
                return
            if not slurm.drained or slurm.reason != desired:
                slurm = self._drain(rem.node, slurm, desired)
            if rem.kube_node:
                self.out_on[rem.kube_node].append((rem.node, slurm))
                self.touched.add(rem.kube_node)
        if rem.action == "replace-machine" and self._replaced(rem):
            cordon = False
        if cordon and rem.kube_node:
            self.cordons[rem.kube_node].append(f"{rem.node}: {desired}")
            self.touched.add(rem.kube_node)

    def _desired(
        self,
        name: str,
        fp: str,
        knode: KubeNode | None,
        verdict: Verdict | None,
        rem: Remediation | None,
        held: KeptOut | None,
    ) -> tuple[str | None, bool]:
        """(drain reason wanted, whether the machine should be cordoned too), most urgent first."""
        prefix = self.spec.reason_prefix
        if held is not None:
            return _cut(f"{prefix} repeat offender {short(fp)}: {held.reason}"), True
        if rem is not None and rem.timed_out:
            timeout = self.spec.remediation.timeout_seconds
            return _cut(f"{prefix} needs-person: {rem.action} unfinished after {timeout}s"), True
        if rem is not None:
            return _cut(f"{prefix} remediation {rem.action}: {rem.reason}"), rem.action == "replace-machine"
        if verdict is not None and verdict.failing:
            return _cut(f"{prefix} health {verdict.action}: {verdict.reason}"), verdict.action == "needs-person"
        signal = kube_signal(knode, self.spec.signals, self.now)
        return (_cut(f"{prefix} {signal}"), False) if signal else (None, False)

    def _drain(self, name: str, slurm: SlurmNode, reason: str) -> SlurmNode:
        self.drains[reason].append(name)
        self.note(name, "drain", reason)
        return dataclasses.replace(slurm, flags=slurm.flags | {"DRAIN"}, reason=reason)

    def _reflect(self, pod: KubePod, slurm: SlurmNode) -> None:
        want = {SLURM_STATE: slurm.state_text, SLURM_REASON: slurm.reason} if slurm.out else {}
        diff = _annotation_diff(pod.annotations, want, (SLURM_STATE, SLURM_REASON))
        if diff:
            self.patches.append(ObjectPatch("pod", pod.name, diff))

    def _remediate(
        self, name: str, pod: KubePod, slurm: SlurmNode, knode: KubeNode | None, verdict: Verdict, fp: str
    ) -> str | None:
        """Starts the verdict's action if allowed; returns the new drain reason (None: nothing started)."""
        spec = self.spec.remediation
        if verdict.action == "needs-person" or not spec.enabled:
            return None
        if slurm.busy:
            self.note(name, "waiting", "jobs still running on the drained node")
            return None
        blocked = rem_mod.blocked_by(self.state, pod.pool, self.pool_sizes[pod.pool], self.now, spec)
        if blocked is not None:
            self.deferred[blocked[0]] += 1
            self.note(name, "deferred", blocked[1])
            return None
        rem = Remediation(
            node=name,
            action=verdict.action,
            fingerprint=fp,
            reason=verdict.reason,
            started=self.now,
            pool=pod.pool,
            pod_uid=pod.uid,
            kube_node=pod.node_name,
            kube_node_uid=knode.uid if knode else "",
            boot_id=knode.boot_id if knode else "",
            provider_id=knode.provider_id if knode else "",
            machine_type=knode.machine_type if knode else "",
            verdict_time=verdict.time if verdict.time is not None else self.now,
        )
        rem_mod.start(self.state, rem)
        self.deletes.append(name)
        self.note(name, verdict.action, verdict.reason)
        if rem.action == "replace-machine" and pod.node_name:
            self.replace_notes[pod.node_name] = json.dumps(
                {
                    "reason": verdict.reason,
                    "fingerprint": fp,
                    "requestedAt": int(self.now),
                    "providerID": knode.provider_id if knode else "",
                },
                sort_keys=True,
            )
        return _cut(f"{self.spec.reason_prefix} remediation {rem.action}: {rem.reason}")

    # ------------------------------------------------------------------ per Kubernetes node
    def kube_nodes(self, every: bool) -> None:
        """The machine pass: every machine, or only those whose inputs may have changed."""
        replacing = {r.kube_node for r in self.state.active.values() if r.action == "replace-machine"}
        self.touched.update(replacing)  # a machine that stops being replaced is looked at again next tick
        m = self.memo
        before = m.machines
        if every:
            names: list[str] | set[str] = sorted(self.obs.kube_nodes)
            m.machines = {}
        else:
            names = self.stale | set(self.out_on) | set(self.cordons) | set(self.replace_notes) | replacing
            names = sorted(names)
        loud: set[str] = set()
        for kname in names:
            last = before.get(kname) if every else before.pop(kname, None)
            knode = self.obs.kube_nodes.get(kname)
            if knode is None:
                continue
            listed = self.out_on.get(kname)
            why = self.cordons.get(kname)
            if not every:
                listed, why = self._with_quiet(kname, listed, why)
            # Most machines have no node out and no cordon: skip sorting empty lists there.
            out = sorted(listed) if listed else []
            inputs = (
                knode,
                tuple(out),
                self.replace_notes.get(kname),
                kname in replacing,
                tuple(sorted(why)) if why else (),
            )
            if last == inputs:
                m.machines[kname] = inputs  # nothing to patch then, nothing now
                continue
            marks = (len(self.decisions), len(self.patches))
            self._machine(kname, knode, out, why, replacing)
            if marks == (len(self.decisions), len(self.patches)):
                m.machines[kname] = inputs
            else:
                loud.add(kname)
        m.loud_machines = loud if every else (m.loud_machines - set(names)) | loud

    def _with_quiet(
        self, kname: str, listed: list[tuple[str, SlurmNode]] | None, why: list[str] | None
    ) -> tuple[list[tuple[str, SlurmNode]] | None, list[str] | None]:
        """A machine's nodes out and cordon lines: this tick's visited nodes' and the quiet ones' kept outcomes."""
        for name in self.memo.on_machine.get(kname, ()):
            if name in self.decided:
                continue  # visited this tick: already in out_on / cordons
            o = self.memo.nodes[name]
            if o.out:
                listed = [*(listed or ()), (o.pod.name, o.slurm)]
            if o.cordon is not None:
                why = [*(why or ()), o.cordon]
        return listed, why

    def _machine(
        self,
        kname: str,
        knode: KubeNode,
        out: list[tuple[str, SlurmNode]],
        why: list[str] | None,
        replacing: set[str],
    ) -> None:
        want: dict[str, str] = {}
        if out:
            want[SLURM_STATE] = _cut(",".join(f"{n}={s.state_text}" for n, s in out), MAX_ANNOTATION)
            want[SLURM_REASON] = _cut("; ".join(f"{n}: {s.reason}" for n, s in out), MAX_ANNOTATION)
        keys = [SLURM_STATE, SLURM_REASON, REPLACE_MACHINE]
        if kname in self.replace_notes:
            want[REPLACE_MACHINE] = self.replace_notes[kname]
        elif kname in replacing and REPLACE_MACHINE in knode.annotations:
            want[REPLACE_MACHINE] = knode.annotations[REPLACE_MACHINE]
        unschedulable: bool | None = None
        if why:
            keys += [CORDONED_BY, CORDON_REASON]
            if not knode.unschedulable or knode.cordoned_by_us:
                want[CORDONED_BY] = CORDONED_BY_US
                want[CORDON_REASON] = _cut("; ".join(sorted(set(why))), MAX_ANNOTATION)
                unschedulable = True if not knode.unschedulable else None
                if not knode.unschedulable:
                    self.note(kname, "cordon", want[CORDON_REASON])
            else:
                # Someone else's cordon already keeps pods off; leave it theirs.
                keys = keys[:-2]
        elif knode.cordoned_by_us:
            keys += [CORDONED_BY, CORDON_REASON]
            unschedulable = False if knode.unschedulable else None
            self.note(kname, "uncordon", "nothing keeps the machine out")
        diff = _annotation_diff(knode.annotations, want, tuple(keys))
        if diff or unschedulable is not None:
            self.patches.append(ObjectPatch("node", kname, diff, unschedulable))


def _annotation_diff(
    have: Mapping[str, str], want: Mapping[str, str], managed: tuple[str, ...]
) -> dict[str, str | None]:
    """Merge-patch annotations turning ``have`` into ``want`` on the ``managed`` keys only."""
    diff: dict[str, str | None] = {}
    for key in managed:
        if key in want and have.get(key) != want[key]:
            diff[key] = want[key]
        elif key not in want and key in have:
            diff[key] = None
    return diff


def reconcile(
    obs: Observed, state: RemediationState, spec: OperationsSpec, now: float, memo: ReconcileMemo | None = None
) -> Plan:
    """Decides one tick. Pure: the inputs are not modified; the new memory is in the plan.

    ``memo`` (kept by the caller from tick to tick) only saves work: it is updated with this tick's outcomes,
    and the plan is the same without it. A reconcile that raises leaves it empty.
    """
    memo = memo if memo is not None else ReconcileMemo()
    try:
        return _reconcile(obs, state, spec, now, memo)
    except BaseException:
        memo.clear()
        raise


def _reconcile(obs: Observed, state: RemediationState, spec: OperationsSpec, now: float, memo: ReconcileMemo) -> Plan:
    tick = _Tick(obs, state, spec, now, memo)
    timeout = spec.remediation.timeout_seconds
    for rem in tick.state.active.values():
        if not rem.timed_out and now - rem.started > timeout:
            rem.timed_out = True
            tick.note(rem.node, "timeout", f"{rem.action} unfinished after {timeout}s")
    views = _views(obs)
    dirty = tick.dirty(views)
    if dirty is None:
        tick.visit_all()
    else:
        tick.visit(dirty)
    for name in sorted(tick.state.active):
        if name not in obs.pods or obs.pods[name].deleting:
            tick.orphan(tick.state.active[name])
    tick.kube_nodes(every=dirty is None)
    memo.seen, memo.loud, memo.touched = views, tick.loud, tick.touched
    memo.placed, memo.verdicts = tick.machines, tick.verdicts
    memo.reused, memo.visited = tick.carried + tick.replays, len(tick.decided)
    slurm = [SlurmUpdate(tuple(sorted(names)), "DRAIN", reason) for reason, names in sorted(tick.drains.items())]
    if tick.resumes:
        slurm.append(SlurmUpdate(tuple(sorted(tick.resumes)), "RESUME"))
    return Plan(
        slurm=slurm,
        patches=tick.patches,
        delete_pods=tick.deletes,
        decisions=tick.decisions,
        deferred=tick.deferred,
        state=tick.state,
        # Copies: the memo's own maps are edited in place by the next tick.
        machines=dict(tick.machines),
        verdicts=dict(tick.verdicts),
    )


def _discard(index: dict[str, set[str]], key: str, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]
