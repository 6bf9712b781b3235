"""One sync tick with I/O: list both sides, reconcile, apply, remember, record, measure.

Per tick: ``GET nodes`` and ``GET jobs`` on slurmrestd, ``list nodes`` and ``list pods`` on
Kubernetes, then one Slurm call per (state, reason) change and one Kubernetes request per object
that must change. Nothing is changed unless both sides were read: a partial view must not look
like "nothing keeps this node out".
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slonk_infra.ops.config import OperationsSpec
from slonk_infra.ops.kube_api import KubeApi, KubeError
from slonk_infra.ops.metrics import Metrics
from slonk_infra.ops.model import SlurmJob
from slonk_infra.ops.records import JobRecord, StateStore
from slonk_infra.ops.slurm_rest import SlurmError, SlurmRest
from slonk_infra.ops.sync import Observed, Plan, reconcile

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
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    nodes: int = 0
    pods: int = 0


class Controller:
    """Holds the clients, the memory and the metrics; :meth:`tick` runs one round."""

    def __init__(
        self,
        spec: OperationsSpec,
        slurm: SlurmRest,
        kube: KubeApi,
        store: StateStore | None = None,
        jobs: JobRecord | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spec, self.slurm, self.kube, self.clock = spec, slurm, kube, clock
        self.store = store or StateStore(None)
        self.jobs = jobs or JobRecord(None)
        self.metrics = metrics or Metrics()
        self.state = self.store.load()
        self.last_tick_end = 0.0

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
            obs = Observed({n.name: n for n in nodes}, {n.name: n for n in knodes}, {p.name: p for p in pods})
            plan = reconcile(obs, self.state, self.spec, now)
            report.plan = plan
            self._apply(plan, report)
            self.state = plan.state
            self.store.save(self.state)
            report.new_jobs = self.jobs.record(jobs, plan.machines)
            for entry in report.new_jobs:
                log.info("job hardware %s", entry)
            started = {e["job"] for e in report.new_jobs}
            m.started(j for j in jobs if j.job_id in started)
            m.verdicts(plan.verdicts)
            m.active.set(len(self.state.active))
            m.kept_out.set(len(self.state.kept_out))
            for d in plan.decisions:
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
