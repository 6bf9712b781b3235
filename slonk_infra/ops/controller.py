"""One sync tick with I/O: list both sides, reconcile, apply, remember, record, measure.

Per tick: ``GET nodes`` and ``GET jobs`` on slurmrestd, ``list nodes`` and ``list pods`` on
Kubernetes, then one Slurm call per (state, reason) change and one Kubernetes request per object
that must change. Nothing is changed unless both sides were read: a partial view must not look
like "nothing keeps this node out".

With a cloud (gcp/aws, ``cloudActions``), also ``list statefulsets`` once per tick, and cloud calls
only for what differs: a pool whose machines and replicas differ (:mod:`slonk_infra.ops.pools`), a
replace-machine remediation whose cloud call is due (:mod:`slonk_infra.ops.replace`). A steady
cluster makes no cloud call. A cloud failure is reported and tried again on a later tick; it never
stops the tick.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from slonk_infra.ops import pools as pools_mod
from slonk_infra.ops import replace as replace_mod
from slonk_infra.ops.cloud import CloudCallError, CloudMachines, CloudPools, machine_of
from slonk_infra.ops.config import CloudSection, OperationsSpec
from slonk_infra.ops.kube_api import KubeError
from slonk_infra.ops.metrics import Metrics
from slonk_infra.ops.model import KubeNode, KubePod, SlurmJob, SlurmNode, WorkerSet
from slonk_infra.ops.records import JobRecord, StateStore
from slonk_infra.ops.slurm_rest import SlurmError
from slonk_infra.ops.sync import Decision, Observed, Plan, ReconcileMemo, reconcile

T = TypeVar("T")


class SlurmSide(Protocol):
    """What a tick asks of Slurm (:class:`~slonk_infra.ops.slurm_rest.SlurmRest`; tests use stand-ins)."""

    calls: Counter[str]

    def list_nodes(self) -> list[SlurmNode]: ...
    def list_jobs(self) -> list[SlurmJob]: ...
    def update_nodes(self, names: Sequence[str], state: str, reason: str = "") -> None: ...


class KubeSide(Protocol):
    """What a tick asks of Kubernetes (:class:`~slonk_infra.ops.kube_api.KubeApi`; tests use stand-ins)."""

    calls: Counter[str]

    def list_nodes(self, selector: str = "") -> list[KubeNode]: ...
    def list_pods(self, selector: str) -> list[KubePod]: ...
    def list_statefulsets(self, selector: str) -> list[WorkerSet]: ...
    def patch_node(self, name: str, body: dict[str, Any]) -> None: ...
    def patch_pod(self, name: str, body: dict[str, Any]) -> None: ...
    def delete_pod(self, name: str) -> None: ...


def cloud_pools(section: CloudSection) -> CloudPools:
    """The cloud adapter's view of the config's cloud section."""
    return CloudPools(
        cloud=section.kind,
        cluster=section.cluster,
        location=section.location,
        node_pools=dict(section.node_pools),
        capacity_blocks=dict(section.capacity_blocks),
    )


log = logging.getLogger("slonk_infra.ops")


@dataclass
class TickReport:
    """What one tick did and cost."""

    slurm_ok: bool = False
    kube_ok: bool = False
    plan: Plan | None = None
    errors: list[str] = field(default_factory=list)
    slurm_calls: Counter[str] = field(default_factory=Counter)
    kube_calls: Counter[str] = field(default_factory=Counter)
    new_jobs: list[dict[str, Any]] = field(default_factory=list)
    cloud_calls: Counter[str] = field(default_factory=Counter)
    unpatched_nodes: set[str] = field(default_factory=set)  # Kubernetes nodes whose patch (a cordon) failed
    cloud_decisions: list[Decision] = field(default_factory=list)
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    nodes: int = 0
    pods: int = 0


class Controller:
    """Holds the clients, the memory and the metrics; :meth:`tick` runs one round."""

    def __init__(
        self,
        spec: OperationsSpec,
        slurm: SlurmSide,
        kube: KubeSide,
        store: StateStore | None = None,
        jobs: JobRecord | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        cloud: CloudMachines | None = None,
        cloud_section: CloudSection | None = None,
    ) -> None:
        self.spec, self.slurm, self.kube, self.clock = spec, slurm, kube, clock
        self.store = store or StateStore(None)
        self.jobs = jobs or JobRecord(None)
        self.metrics = metrics or Metrics()
        self.state = self.store.load()
        self.last_tick_end = 0.0
        # No cloud section (local) or cloudActions off: no cloud call, ever.
        acting = cloud is not None and cloud_section is not None and spec.cloud_actions
        self.cloud = cloud if acting else None
        self.pools = cloud_pools(cloud_section) if acting and cloud_section is not None else None
        self.faulty_types = frozenset(cloud_section.faulty_host_machine_types if cloud_section else ())
        self._last_failure: BaseException | None = None
        self.memo = ReconcileMemo()  # quiet nodes' outcomes of the last tick, reused while their records are
        self._last_view: tuple[list[SlurmNode], list[KubeNode], list[KubePod], Observed] | None = None

    @property
    def sizes_pools(self) -> bool:
        """Whether each tick lists the worker StatefulSets and sizes the cloud pools to them."""
        return self.cloud is not None and self.pools is not None and bool(self.pools.node_pools)

    def tick(self) -> TickReport:  # noqa: PLR0915  one tick reads in order: fetch, decide, act, report
        """Lists, reconciles and applies once; never raises for API failures (they are reported)."""
        wall0, cpu0 = time.perf_counter(), time.process_time()
        slurm_before, kube_before = Counter(self.slurm.calls), Counter(self.kube.calls)
        report = TickReport()
        now = self.clock()
        jobs: list[SlurmJob] = []
        try:
            nodes = self.slurm.list_nodes()
            jobs = self.slurm.list_jobs()
            report.slurm_ok = True
        except SlurmError as exc:
            report.errors.append(f"slurm: {exc}")
        try:
            knodes = self.kube.list_nodes(self.spec.node_selector)
            pods = self.kube.list_pods(self.spec.worker_selector)
            sets = self.kube.list_statefulsets(self.spec.worker_selector) if self.sizes_pools else []
            report.kube_ok = True
        except KubeError as exc:
            report.errors.append(f"kubernetes: {exc}")
        m = self.metrics
        m.slurm_up.set(int(report.slurm_ok))
        m.kube_up.set(int(report.kube_ok))
        if report.slurm_ok:
            m.slurm(nodes, jobs, now)
        if report.slurm_ok and report.kube_ok:
            report.nodes, report.pods = len(nodes), len(pods)
            obs = self._observed(nodes, knodes, pods)
            plan = reconcile(obs, self.state, self.spec, now, self.memo)
            report.plan = plan
            self._apply(plan, report)
            self.state = plan.state
            self._replace_machines(report)
            self._size_pools(report, obs, jobs, sets, now)
            self.store.save(self.state)
            report.new_jobs = self.jobs.record(jobs, plan.machines)
            for entry in report.new_jobs:
                log.info("job hardware %s", entry)
            started = {e["job"] for e in report.new_jobs}
            m.started(j for j in jobs if j.job_id in started)
            m.verdicts(plan.verdicts)
            m.active.set(len(self.state.active))
            m.kept_out.set(len(self.state.kept_out))
            for d in [*plan.decisions, *report.cloud_decisions]:
                m.decisions.labels(d.what).inc()
                log.info("%s %s: %s", d.what, d.node, d.why)
            for limit, n in plan.deferred.items():
                m.deferred.labels(limit).inc(n)
            m.last_success.set(self.clock())
        for err in report.errors:
            log.warning("%s", err)
        report.slurm_calls = Counter(self.slurm.calls) - slurm_before
        report.kube_calls = Counter(self.kube.calls) - kube_before
        m.count_calls("slurm", report.slurm_calls)
        m.count_calls("kubernetes", report.kube_calls)
        report.wall_seconds = time.perf_counter() - wall0
        report.cpu_seconds = time.process_time() - cpu0
        m.tick.observe(report.wall_seconds)
        m.tick_cpu.set(report.cpu_seconds)
        self.last_tick_end = time.time()
        return report

    def _observed(self, nodes: list[SlurmNode], knodes: list[KubeNode], pods: list[KubePod]) -> Observed:
        """The tick's view; the last one again when every list is the very list of the last tick (the
        clients return their last list when no record in it changed), which saves building three maps."""
        last = self._last_view
        if last is not None and last[0] is nodes and last[1] is knodes and last[2] is pods:
            return last[3]
        obs = Observed({n.name: n for n in nodes}, {n.name: n for n in knodes}, {p.name: p for p in pods})
        self._last_view = (nodes, knodes, pods, obs)
        return obs

    def _apply(self, plan: Plan, report: TickReport) -> None:
        # Slurm first: a node is drained before its machine is cordoned or its pod deleted.
        for upd in plan.slurm:
            try:
                self.slurm.update_nodes(upd.nodes, upd.state, upd.reason)
            except SlurmError as exc:
                report.errors.append(f"slurm {upd.state} {','.join(upd.nodes)}: {exc}")
        for patch in plan.patches:
            try:
                if patch.kind == "node":
                    self.kube.patch_node(patch.name, patch.body())
                else:
                    self.kube.patch_pod(patch.name, patch.body())
            except KubeError as exc:
                report.errors.append(f"patch {patch.kind} {patch.name}: {exc}")
                if patch.kind == "node":
                    report.unpatched_nodes.add(patch.name)
        for name in plan.delete_pods:
            try:
                self.kube.delete_pod(name)
            except KubeError as exc:
                report.errors.append(f"delete pod {name}: {exc}")
                # Not started after all: forget it so the next tick can try again.
                rem = plan.state.active.pop(name, None)
                if rem is not None:
                    times = plan.state.history.get(rem.fingerprint, [])
                    if rem.started in times:
                        times.remove(rem.started)
                    if rem.started in plan.state.actions:
                        plan.state.actions.remove(rem.started)

    # ------------------------------------------------------------------ cloud
    def _call(self, report: TickReport, name: str, call: Callable[..., T], *args: Any) -> tuple[bool, T | None]:
        """One cloud call, counted and reported; (False, None) when it raised."""
        report.cloud_calls[name] += 1
        self._last_failure = None
        try:
            value = call(*args)
        except Exception as exc:  # the cloud SDKs raise many types; a failure must not stop the tick
            self._last_failure = exc
            self.metrics.cloud_calls.labels(name, "error").inc()
            report.errors.append(f"cloud {name} {' '.join(str(a) for a in args)}: {exc}")
            return False, None
        self.metrics.cloud_calls.labels(name, "ok").inc()
        return True, value

    def _replace_machines(self, report: TickReport) -> None:
        """The cloud call of each replace-machine remediation that is due (after its cordon, drain and pod delete)."""
        if self.cloud is None:
            return
        cloud = self.cloud
        for rem in replace_mod.due(self.state, self.clock()):
            if rem.kube_node in report.unpatched_nodes:
                # Its cordon did not reach the API: the cloud is asked only once the machine is cordoned.
                report.cloud_decisions.append(Decision(rem.node, "replace-waiting", "the cordon failed; next tick"))
                continue
            machine = machine_of(rem.provider_id)
            if machine is None or self.pools is None or machine.cloud != self.pools.cloud:
                rem.cloud_call = "none"  # nothing the cloud can address: stays cordoned for a person
                report.cloud_decisions.append(
                    Decision(rem.node, "replace-skipped", f"providerID {rem.provider_id!r} names no cloud machine")
                )
                continue
            faulty = replace_mod.faulty_host(rem, self.faulty_types)
            replace_mod.attempt(rem, self.clock())
            self.store.save(self.state)  # written down before the call: a restart does not repeat it at once
            ok, call = self._call(report, "replace", cloud.replace, machine, faulty)
            if not ok or call is None:
                replace_mod.failed(rem, report.errors[-1] if report.errors else "failed")
                report.cloud_decisions.append(
                    Decision(rem.node, "replace-failed", f"attempt {rem.cloud_attempts}; retry after backoff")
                )
                continue
            at = self.clock()
            replace_mod.accepted(rem, call, at)
            self.metrics.replacements.labels(call).inc()
            self.metrics.replace_delay.observe(max(0.0, at - rem.verdict_time))
            report.cloud_decisions.append(Decision(rem.node, "replace-call", f"{call} {machine.instance}"))

    def _size_pools(
        self, report: TickReport, obs: Observed, jobs: Sequence[SlurmJob], sets: Sequence[WorkerSet], now: float
    ) -> None:
        """Grows pools below their replicas; removes emptied machines of pools above them."""
        if not self.sizes_pools or self.cloud is None or self.pools is None:
            return
        cloud, pools = self.cloud, self.pools
        pools_mod.remember_hosts(self.state, obs.pods.values(), obs.kube_nodes)
        views = pools_mod.survey(pools.node_pools, sets, obs.kube_nodes, self.state, now)
        self.metrics.pool_machines.clear()
        busy = pools_mod.busy_slurm_nodes(obs.slurm_nodes.values(), jobs)
        budget = self.spec.max_removals_per_tick
        for view in views:
            self.metrics.pool_machines.labels(view.group, "nodes").set(view.listed)
            self.metrics.pool_machines.labels(view.group, "replicas").set(view.replicas)
            ok, size = self._call(report, "pool_size", cloud.pool_size, view.pool)
            if not ok or size is None:
                continue
            if size < view.replicas:
                self._grow(report, view, size)
            elif view.listed > view.replicas and size > view.replicas:
                budget -= self._shrink(report, view, size, obs.pods, busy, budget, now)
            else:
                report.cloud_decisions.append(
                    Decision(
                        view.group, "pool-waiting", f"{view.listed} machines, {view.replicas} replicas, cloud {size}"
                    )
                )

    def _settled(self, report: TickReport, view: pools_mod.PoolView) -> bool:
        """Whether the cloud leaves the pool alone now (``pool_change``); asked right before a grow or a
        removal, never on a steady pool. While the cloud changes it (an EKS node group UPDATING, a GKE node
        pool RECONCILING or a MIG not stable) its surge machines look empty and extra: the pool is neither
        grown nor shrunk this tick, and the decision ``pool-changing`` says what the cloud is doing."""
        assert self.cloud is not None
        ok, change = self._call(report, "pool_change", self.cloud.pool_change, view.pool)
        if not ok:
            return False
        if change:
            why = f"{change}; no grow or removal until it is stable ({view.listed} machines, {view.replicas} replicas)"
            report.cloud_decisions.append(Decision(view.group, pools_mod.POOL_CHANGING, why))
            return False
        return True

    def _grow(self, report: TickReport, view: pools_mod.PoolView, size: int) -> None:
        assert self.cloud is not None
        if not self._settled(report, view):
            return
        ok, ready = self._call(report, "pool_ready", self.cloud.pool_ready, view.pool)
        if not ok:
            return
        if not ready:
            why = f"cannot launch machines yet (cloud {size}, replicas {view.replicas})"
            report.cloud_decisions.append(Decision(view.group, "grow-deferred", why))
            return
        ok, _ = self._call(report, "grow", self.cloud.grow, view.pool, view.replicas)
        if ok:
            report.cloud_decisions.append(Decision(view.group, "grow", f"{size} -> {view.replicas} machines"))

    def _shrink(
        self,
        report: TickReport,
        view: pools_mod.PoolView,
        size: int,
        pods: Mapping[str, KubePod],
        busy: frozenset[str],
        budget: int,
        now: float,
    ) -> int:
        """Removes up to the allowed number of emptied machines; returns how many the cloud accepted."""
        assert self.cloud is not None and self.pools is not None
        allowed = pools_mod.removals_allowed(view, size, budget)
        chosen, held = pools_mod.candidates(view, self.pools.cloud, pods.values(), busy, self.state, self.spec, now)
        if chosen[:allowed] and not self._settled(report, view):
            return 0
        removed = 0
        for c in chosen[:allowed]:
            ok, _ = self._call(report, "remove", self.cloud.remove, c.machine)
            gone = isinstance(self._last_failure, CloudCallError) and self._last_failure.not_found
            if ok or gone:  # a machine the cloud no longer has is as good as removed
                self.state.removals[c.node.name] = now
                removed += 1
                report.cloud_decisions.append(Decision(c.node.name, "remove", f"pool {view.group}: empty machine"))
        if removed < allowed:
            # Machines carrying a worker are the normal case; say why each other one stays.
            notes = {n: why for n, why in held.items() if not why.startswith("worker pod ") or "waits" in why}
            for name, why in sorted(notes.items()):
                report.cloud_decisions.append(Decision(name, "scale-in-waiting", f"pool {view.group}: {why}"))
            if not notes:
                report.cloud_decisions.append(
                    Decision(view.group, "scale-in-waiting", f"{len(held)} machines still carry worker pods")
                )
        return removed
