"""The Prometheus endpoint (prometheus-client): Slurm and Kubernetes as the controller saw them each tick.

Series (all prefixed ``slonk_``):

=================================================  ==============================================
``slurm_nodes{state,reason}``                      nodes per state (``IDLE+DRAIN``) and reason
``gpus{status}``                                   GPUs allocated / idle / unhealthy (out of service)
``slurm_jobs{state,partition}``                    jobs per state and partition
``slurm_queue_wait_seconds{partition}``            wait of the oldest pending job
``slurm_job_queue_wait_seconds{partition}``        histogram of submit-to-start waits
``slurm_reachable``, ``kube_reachable``            1 when the last tick's calls succeeded
``health_checks{check,result}``                    worker pods per health check and pass/fail
``remediations_active``, ``machines_kept_out``     repairs in progress, repeat offenders held
``remediation_deferred_total{limit}``              actions held back by the rate or pool limit
``decisions_total{decision}``                      drain, resume, cordon, restart-pod, deferred, ...
``api_calls_total{api,kind}``                      requests to slurmrestd and Kubernetes
``sync_tick_seconds``, ``sync_tick_cpu_seconds``   wall-time histogram / CPU time of the last tick
``sync_last_success_timestamp_seconds``            end of the last tick that reached both APIs
``cloud_calls_total{call,outcome}``                cloud calls (pool_size, pool_ready, pool_change, grow, remove,
                                                   replace) by outcome (ok, error)
``machine_replacements_total{call}``               replacements the cloud accepted, by its API call
``replace_delay_seconds``                          histogram: failing verdict to the cloud's replace call
``pool_machines{pool,kind}``                       machines (Kubernetes nodes) and replicas of pools whose
                                                   counts differed this tick
=================================================  ==============================================
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slonk_infra.ops.model import SlurmJob, SlurmNode, Verdict

# Verdict -> drain -> idle -> cloud call: ticks (15 s) to the remediation timeout (30 min) and beyond.
REPLACE_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 4 * 3600)
WAIT_BUCKETS = (1, 10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 72 * 3600)
MAX_REASON_LABEL = 60


def _reason(text: str) -> str:
    text = " ".join(text.split())
    return text[:MAX_REASON_LABEL] if text else "none"


class Metrics:
    """Every series of the endpoint, in a registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self._last_nodes: tuple[list[SlurmNode], tuple[Tally[tuple[str, str]], Tally[str]]] = ([], (Tally(), Tally()))
        self.nodes = Gauge("slonk_slurm_nodes", "Slurm nodes by state and reason.", ["state", "reason"], registry=r)
        self.gpus = Gauge("slonk_gpus", "GPUs by status: allocated, idle, unhealthy.", ["status"], registry=r)
        self.jobs = Gauge("slonk_slurm_jobs", "Slurm jobs by state and partition.", ["state", "partition"], registry=r)
        self.oldest_wait = Gauge(
            "slonk_slurm_queue_wait_seconds", "Wait of the oldest pending job.", ["partition"], registry=r
        )
        self.waits = Histogram(
            "slonk_slurm_job_queue_wait_seconds",
            "Submit-to-start wait of jobs seen starting.",
            ["partition"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.slurm_up = Gauge("slonk_slurm_reachable", "1 when slurmrestd and slurmctld answered.", registry=r)
        self.kube_up = Gauge("slonk_kube_reachable", "1 when the Kubernetes API answered.", registry=r)
        self.health = Gauge(
            "slonk_health_checks", "Worker pods by health check and result.", ["check", "result"], registry=r
        )
        self.active = Gauge("slonk_remediations_active", "Remediations in progress.", registry=r)
        self.kept_out = Gauge("slonk_machines_kept_out", "Machines held out as repeat offenders.", registry=r)
        self.deferred = Counter(
            "slonk_remediation_deferred", "Remediations held back by a limit.", ["limit"], registry=r
        )
        self.decisions = Counter("slonk_decisions", "Decisions of the sync step.", ["decision"], registry=r)
        self.calls = Counter("slonk_api_calls", "API requests.", ["api", "kind"], registry=r)
        self.tick = Histogram("slonk_sync_tick_seconds", "Wall time of a sync tick.", registry=r)
        self.tick_cpu = Gauge("slonk_sync_tick_cpu_seconds", "CPU time of the last sync tick.", registry=r)
        self.last_success = Gauge(
            "slonk_sync_last_success_timestamp_seconds", "End of the last tick that reached both APIs.", registry=r
        )
        self.cloud_calls = Counter(
            "slonk_cloud_calls", "Calls to the cloud's machine API by outcome.", ["call", "outcome"], registry=r
        )
        self.replacements = Counter(
            "slonk_machine_replacements", "Machine replacements the cloud accepted, by call.", ["call"], registry=r
        )
        self.replace_delay = Histogram(
            "slonk_replace_delay_seconds",
            "Seconds from a failing replace-machine verdict to the cloud's replace call.",
            buckets=REPLACE_BUCKETS,
            registry=r,
        )
        self.pool_machines = Gauge(
            "slonk_pool_machines",
            "Machines (kind=nodes) and worker replicas (kind=replicas) of pools whose counts differ.",
            ["pool", "kind"],
            registry=r,
        )

    def slurm(self, nodes: Sequence[SlurmNode], jobs: Iterable[SlurmJob], now: float) -> None:
        """Node, GPU and job series from one tick's lists."""
        by_state, gpus = self._node_tallies(nodes)
        self.nodes.clear()
        for (state, reason), count in by_state.items():
            self.nodes.labels(state, reason).set(count)
        for status, count in gpus.items():
            self.gpus.labels(status).set(count)
        by_job: Tally[tuple[str, str]] = Tally()
        oldest: dict[str, float] = {}
        for j in jobs:
            by_job[(j.state, j.partition)] += 1
            if j.state == "PENDING" and j.submit_time:
                oldest[j.partition] = max(oldest.get(j.partition, 0.0), now - j.submit_time)
        self.jobs.clear()
        for (state, partition), count in by_job.items():
            self.jobs.labels(state, partition).set(count)
        self.oldest_wait.clear()
        for partition, wait in oldest.items():
            self.oldest_wait.labels(partition).set(wait)

    def _node_tallies(self, nodes: Sequence[SlurmNode]) -> tuple[Tally[tuple[str, str]], Tally[str]]:
        """Nodes by (state, reason) and GPUs by status; the last tick's when its records are the same objects
        (the record cache hands back the same object for an unchanged node, so a quiet cluster costs one
        identity comparison per node here)."""
        last_nodes, last = self._last_nodes
        if len(last_nodes) == len(nodes) and all(a is b for a, b in zip(last_nodes, nodes, strict=True)):
            return last
        by_state: Tally[tuple[str, str]] = Tally()
        gpus: Tally[str] = Tally({"allocated": 0, "idle": 0, "unhealthy": 0})
        for n in nodes:
            by_state[(n.state_text, _reason(n.reason))] += 1
            used = min(n.gpus_used, n.gpus)
            gpus["allocated"] += used
            gpus["unhealthy" if n.out else "idle"] += n.gpus - used
        self._last_nodes = (list(nodes), (by_state, gpus))
        return by_state, gpus

    def started(self, jobs: Iterable[SlurmJob]) -> None:
        """Queue waits of jobs seen running for the first time."""
        for j in jobs:
            if j.start_time and j.submit_time:
                self.waits.labels(j.partition).observe(max(0.0, j.start_time - j.submit_time))

    def verdicts(self, verdicts: Mapping[str, Verdict]) -> None:
        """Health-check results over the worker pods."""
        counts: Tally[tuple[str, str]] = Tally()
        for v in verdicts.values():
            for c in v.checks:
                counts[(c.check, "pass" if c.ok else "fail")] += 1
        self.health.clear()
        for (check, result), count in counts.items():
            self.health.labels(check, result).set(count)

    def count_calls(self, api: str, calls: Mapping[str, int]) -> None:
        """Adds a tick's request counts."""
        for kind, n in calls.items():
            if n:
                self.calls.labels(api, kind).inc(n)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
