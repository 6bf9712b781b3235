"""Metrics from records: GPUs allocated / idle / unhealthy, jobs and queue waits, health checks per check."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from slonk_infra.ops.metrics import Metrics
from slonk_infra.ops.model import CheckOutcome, SlurmJob, SlurmNode, Verdict


def samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(m.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_gpus_jobs_waits_and_checks() -> None:
    m = Metrics()
    nodes = [
        SlurmNode("a", "MIXED", gpus=8, gpus_used=3, alloc_cpus=10),
        SlurmNode("b", "IDLE", frozenset({"DRAIN"}), reason="slonk: x", gpus=8),
        SlurmNode("c", "ALLOCATED", frozenset({"DRAIN"}), reason="slonk: x", gpus=8, gpus_used=8),
        SlurmNode("d", "DOWN", frozenset({"NOT_RESPONDING"}), reason="Not responding", gpus=8),
    ]
    jobs = [
        SlurmJob(1, "RUNNING", "h100", ("a",), submit_time=100, start_time=160),
        SlurmJob(2, "PENDING", "h100", (), submit_time=500),
        SlurmJob(3, "PENDING", "h100", (), submit_time=900),
    ]
    m.slurm(nodes, jobs, now=1000)
    m.started(jobs[:1])
    fail = CheckOutcome("gpu-ecc", False, "replace-machine", "x")
    ok = CheckOutcome("gpu-ecc", True)
    m.verdicts(
        {"a": Verdict(True, "none", "", "", 1.0, (ok,)), "b": Verdict(False, "replace-machine", "", "", 1.0, (fail,))}
    )
    s = samples(m)
    assert s[("slonk_gpus", (("status", "allocated"),))] == 11
    assert s[("slonk_gpus", (("status", "idle"),))] == 5
    assert s[("slonk_gpus", (("status", "unhealthy"),))] == 16
    assert s[("slonk_slurm_nodes", (("reason", "slonk: x"), ("state", "IDLE+DRAIN")))] == 1
    assert s[("slonk_slurm_nodes", (("reason", "none"), ("state", "MIXED")))] == 1
    assert s[("slonk_slurm_jobs", (("partition", "h100"), ("state", "PENDING")))] == 2
    assert s[("slonk_slurm_queue_wait_seconds", (("partition", "h100"),))] == 500
    assert s[("slonk_slurm_job_queue_wait_seconds_sum", (("partition", "h100"),))] == 60
    assert s[("slonk_health_checks", (("check", "gpu-ecc"), ("result", "fail")))] == 1
    assert s[("slonk_health_checks", (("check", "gpu-ecc"), ("result", "pass")))] == 1
    # A later tick replaces the snapshot series rather than adding to them.
    m.slurm(nodes[:1], [], now=1000)
    s = samples(m)
    assert ("slonk_slurm_nodes", (("reason", "slonk: x"), ("state", "IDLE+DRAIN"))) not in s
    assert s[("slonk_gpus", (("status", "unhealthy"),))] == 0


def test_node_series_follow_a_changed_record_among_reused_ones() -> None:
    """The node tallies are reused while every record is the same object as last tick, and only then."""
    m = Metrics()
    nodes = [SlurmNode(f"n{i}", "IDLE", gpus=8) for i in range(3)]
    m.slurm(nodes, [], now=0)
    m.slurm(list(nodes), [], now=0)  # a new list of the same records: the same figures
    assert samples(m)[("slonk_gpus", (("status", "idle"),))] == 24
    # One record replaced by an equal-looking but new one that is drained: the series must move.
    changed = [nodes[0], SlurmNode("n1", "IDLE", frozenset({"DRAIN"}), reason="slonk: x", gpus=8), nodes[2]]
    m.slurm(changed, [], now=0)
    s = samples(m)
    assert s[("slonk_gpus", (("status", "idle"),))] == 16
    assert s[("slonk_gpus", (("status", "unhealthy"),))] == 8
    assert s[("slonk_slurm_nodes", (("reason", "slonk: x"), ("state", "IDLE+DRAIN")))] == 1
    # Fewer records than last tick, the first ones the same objects: not taken for the last tick.
    m.slurm(changed[:1], [], now=0)
    assert samples(m)[("slonk_gpus", (("status", "idle"),))] == 8
