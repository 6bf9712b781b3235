"""Records: the health verdict format (checked against slonk-health's own report), Slurm answers of both
REST generations, GRES counts, the job hardware record and the state file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slonk_infra.health.result import Action, CheckResult, Fingerprint, HealthReport
from slonk_infra.ops.model import KubeNode, KubePod, SlurmJob, VerdictError, parse_verdict
from slonk_infra.ops.records import JobRecord, StateStore
from slonk_infra.ops.remediation import KeptOut, Remediation, RemediationState
from slonk_infra.ops.signals import current_verdict
from slonk_infra.ops.slurm_records import gpu_count, job_from, node_from, number


def report(action: Action = "restart-pod") -> HealthReport:
    ok = action == "none"
    return HealthReport(
        mode="interval",
        node="h100-3",
        fingerprint=Fingerprint(kind="gpu-uuids", value="sha256:" + "1f" * 32),
        ok=ok,
        action=action,
        exit_code=0 if ok else 3,
        duration_ms=12,
        results=[
            CheckResult(check="gpu-count", ok=True, action="none", reason="8 GPUs"),
            CheckResult(check="gpu-processes", ok=ok, action=action, reason="pid 4242 holds 3 GiB on GPU 1"),
        ],
    )


def test_the_health_checkers_own_report_is_a_verdict() -> None:
    data = json.loads(report().model_dump_json(by_alias=True))
    data["time"] = "2026-11-23T01:00:00Z"
    v = parse_verdict(json.dumps(data))
    assert v.action == "restart-pod" and not v.ok and v.failing
    assert v.reason == "gpu-processes: pid 4242 holds 3 GiB on GPU 1"
    assert v.fingerprint == "sha256:" + "1f" * 32 and v.node == "h100-3"
    assert v.time == 1795395600.0
    assert [(c.check, c.ok) for c in v.checks] == [("gpu-count", True), ("gpu-processes", False)]
    passing = parse_verdict(report("none").model_dump_json(by_alias=True))
    assert passing.ok and not passing.failing and passing.time is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "not JSON"),
        ("[]", "not a JSON object"),
        ('{"schema": "other/v2"}', "is not slonk-health/v1"),
        ('{"action": "reboot"}', "action 'reboot' is not one of"),
        ('{"time": "yesterday"}', "neither epoch seconds nor RFC 3339"),
        ('{"results": [{"ok": false}]}', "results[0] is not a check result"),
    ],
)
def test_unreadable_verdicts_say_why(text: str, message: str) -> None:
    with pytest.raises(VerdictError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_verdict(text)


def test_which_verdict_counts() -> None:
    pod = KubePod("h100-3", uid="u", created=1000.0)
    fail = json.loads(report().model_dump_json(by_alias=True))
    # On the pod, no time is needed: the pod's creation stands in.
    v = current_verdict(
        KubePod("h100-3", created=1000.0, annotations={"slonk.dev/health": json.dumps(fail)}), None, None
    )
    assert v is not None and v.time == 1000.0 and v.source == "pod"
    # On the node, a verdict without a time or from before the pod is ignored.
    node = KubeNode("n", annotations={"slonk.dev/health": json.dumps(fail)})
    assert current_verdict(pod, node, None) is None
    node = KubeNode("n", annotations={"slonk.dev/health": json.dumps({**fail, "time": 999})})
    assert current_verdict(pod, node, None) is None
    node = KubeNode("n", annotations={"slonk.dev/health": json.dumps({**fail, "time": 1001})})
    v = current_verdict(pod, node, None)
    assert v is not None and v.source == "node"
    # A verdict about another node is not this pod's.
    other = KubePod("h100-4", created=1000.0, annotations={"slonk.dev/health": json.dumps(fail)})
    assert current_verdict(other, None, None) is None


def test_both_rest_generations_read_the_same() -> None:
    v38 = {
        "name": "h100-1",
        "state": "idle",
        "state_flags": ["DRAIN"],
        "reason": "slonk: x",
        "reason_changed_at": 1795395000,
        "cpus": 208,
        "alloc_cpus": 0,
        "gres": "gpu:h100:8(S:0-1)",
        "gres_used": "gpu:h100:0(IDX:N/A)",
        "partitions": ["low", "h100"],
        "slurmd_start_time": 1795394000,
    }
    v44 = {
        **v38,
        "state": ["IDLE", "DRAIN"],
        "reason_changed_at": {"set": True, "infinite": False, "number": 1795395000},
        "slurmd_start_time": {"set": True, "infinite": False, "number": 1795394000},
        "cpus": 208,
    }
    del v44["state_flags"]
    assert node_from(v38) == node_from(v44)
    n = node_from(v38)
    assert n.drained and not n.down and n.gpus == 8 and n.gpus_used == 0 and n.state_text == "IDLE+DRAIN"
    j38 = {
        "job_id": 7,
        "job_state": "RUNNING",
        "partition": "h100",
        "nodes": "h100-[0-1]",
        "submit_time": 5,
        "start_time": 9,
        "user_name": "alice",
        "name": "train",
    }
    j44 = {
        **j38,
        "job_state": ["RUNNING"],
        "submit_time": {"set": True, "number": 5},
        "start_time": {"set": True, "number": 9},
    }
    assert (
        job_from(j38)
        == job_from(j44)
        == SlurmJob(7, "RUNNING", "h100", ("h100-0", "h100-1"), 5.0, 9.0, "train", "alice")
    )
    assert job_from({"job_id": 8, "job_state": ["PENDING"], "nodes": ""}).nodes == ()


def test_gres_and_numbers() -> None:
    assert gpu_count("gpu:h100:3(IDX:0,2-3),nic:1") == 3
    assert gpu_count("gpu:2,gpu:a100:1") == 3
    assert gpu_count("tpu:4") == 0 and gpu_count("N/A") == 0 and gpu_count("") == 0
    assert number({"set": False, "number": 5}) == 0.0 and number({"infinite": True, "set": True}) == 0.0
    assert number(True) == 0.0 and number("x") == 0.0


def test_the_job_record_appends_once_per_job_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "jobs.jsonl"
    jobs = [
        SlurmJob(1, "RUNNING", "h100", ("h100-0",), 10, 20, "a", "u"),
        SlurmJob(2, "PENDING", "h100", (), 11, 0, "b", "u"),
    ]
    machines = {"h100-0": ("sha256:aa", "gke-0")}
    rec = JobRecord(path)
    (line,) = rec.record(jobs, machines)
    assert line["nodes"] == {"h100-0": {"fingerprint": "sha256:aa", "kubeNode": "gke-0"}}
    assert rec.record(jobs, machines) == []
    again = JobRecord(path)  # a restarted controller
    assert again.record(jobs, machines) == []
    assert len(path.read_text().splitlines()) == 1


def test_the_state_file_round_trips_and_is_rewritten_only_on_change(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    state = RemediationState(
        active={"h100-0": Remediation("h100-0", "restart-pod", "sha256:aa", "x", 10.0, pool="h100", pod_uid="p")},
        history={"sha256:aa": [10.0]},
        pods={"sha256:aa": "p"},
        kept_out={"sha256:bb": KeptOut("sha256:bb", "h100-1", "again", 20.0)},
        actions=[10.0],
    )
    store.save(state)
    mtime = (tmp_path / "state.json").stat().st_mtime_ns
    store.save(state)
    assert (tmp_path / "state.json").stat().st_mtime_ns == mtime
    assert StateStore(tmp_path).load() == state
    assert StateStore(None).load() == RemediationState()
