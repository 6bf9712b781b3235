"""The list decoders read only what the records use, and give the same records the whole answer gave.

Compared against the standard library's decoding of the same bytes (what the controller did before), on
both slurmrestd generations and on the fake Kubernetes API's objects; a field the decoders leave out or
misread would make the records differ.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from slonk_infra.ops import kube_api, slurm_records
from slonk_infra.ops.model import KubeNode, KubePod, Taint, WorkerSet
from slonk_infra.ops.readbuffer import ReadBuffer
from slonk_infra.ops.wire import KUBE_NODES, KUBE_PODS, KUBE_STATEFULSETS, SLURM_JOBS, SLURM_NODES, decode
from testing.fakekube import FakeKube

NODE_V38 = {
    "name": "h100-1",
    "state": "idle",
    "state_flags": ["DRAIN"],
    "reason": "slonk: x",
    "reason_changed_at": 1795395000,
    "cpus": 208,
    "alloc_cpus": 0,
    "gres": "gpu:h100:8(S:0-1)",
    "gres_used": "gpu:h100:0(IDX:N/A)",
    "partitions": "low,h100",
    "slurmd_start_time": 1795394000,
    "features": "h100,gpu",  # read by nobody: skipped
}
NODE_V45 = {
    "name": "h100-2",
    "state": ["DOWN", "NOT_RESPONDING"],
    "reason": "no pod",
    "reason_changed_at": {"set": True, "infinite": False, "number": 1795395000},
    "cpus": {"set": True, "infinite": False, "number": 208},
    "alloc_cpus": 16,
    "gres": "gpu:h100:8(S:0-1)",
    "gres_used": "gpu:h100:2(IDX:0-1)",
    "partitions": ["low", "general"],
    "comment": "slonk",
    "slurmd_start_time": {"set": False, "infinite": False, "number": 0},
    "energy": {"average_watts": 0, "current_watts": {"set": True, "number": 0}},
    "tres": "cpu=208,gres/gpu=8",
}
JOB_V45 = {
    "job_id": 7,
    "job_state": ["RUNNING"],
    "partition": "h100",
    "nodes": "h100-[0-1]",
    "submit_time": {"set": True, "number": 5},
    "start_time": {"set": True, "number": 9},
    "user_name": "alice",
    "name": "train",
    "gres_detail": ["gpu:h100:8(IDX:0-7)"],
}


def _as_json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, indent=2).encode()


@pytest.mark.parametrize("record", [NODE_V38, NODE_V45], ids=["v0.0.38", "v0.0.45"])
def test_slurm_nodes_decode_to_the_records_the_whole_answer_gives(record: dict[str, Any]) -> None:
    raw = _as_json({"nodes": [record], "meta": {"plugin": {}}, "errors": [], "warnings": []})
    whole = [slurm_records.node_from(n) for n in json.loads(raw)["nodes"]]
    answer = SLURM_NODES.decode(raw)
    assert answer.errors == []
    assert [slurm_records.node_from(n) for n in answer.nodes or ()] == whole
    assert whole[0].name == record["name"] and whole[0].gpus == 8


def test_slurm_jobs_and_errors_decode() -> None:
    raw = _as_json({"jobs": [JOB_V45], "errors": [{"error": "x", "description": "bad"}]})
    answer = SLURM_JOBS.decode(raw)
    assert answer.errors == [{"error": "x", "description": "bad"}]
    (job,) = [slurm_records.job_from(j) for j in answer.jobs or ()]
    assert job == slurm_records.job_from(JOB_V45)
    assert job.nodes == ("h100-0", "h100-1") and job.start_time == 9.0


def test_a_node_record_without_a_name_is_refused_as_before() -> None:
    with pytest.raises(KeyError):
        slurm_records.node_from({"state": "idle"})


def test_kubernetes_lists_decode_to_the_records_of_the_objects() -> None:
    kube = FakeKube()  # its object builders only: the server is never started
    try:
        node = kube.add_node(
            "gke-h100-0",
            labels={"pool": "h100"},
            annotations={"a": "b"},
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, {"key": "k", "effect": "E"}],
            conditions={"Ready": "False", "GpuHealthy": "True"},
            unschedulable=True,
            boot_id="boot-7",
        )
        pod = kube.add_pod("h100-0", "slurm", "gke-h100-0", labels={"x": "y"}, phase="Pending")
        pod["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
        nodes = KUBE_NODES.decode(_as_json({"kind": "NodeList", "items": [node]})).items or []
        pods = KUBE_PODS.decode(_as_json({"kind": "PodList", "items": [pod]})).items or []
    finally:
        kube.server.server_close()
    (record,) = [kube_api.node_from(n) for n in nodes]
    assert record == kube_api.node_from(node)
    assert record == KubeNode(
        name="gke-h100-0",
        uid=node["metadata"]["uid"],
        unschedulable=True,
        taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"), Taint("k", "", "E")),
        labels={"pool": "h100"},
        annotations={"a": "b"},
        conditions={"Ready": "False", "GpuHealthy": "True"},
        provider_id="gce://proj/zone/gke-h100-0",
        boot_id="boot-7",
        created=record.created,
    )
    assert record.created > 0  # creationTimestamp: the scale-in grace period counts from it
    (pod_record,) = [kube_api.pod_from(p) for p in pods]
    assert pod_record == kube_api.pod_from(pod)
    assert isinstance(pod_record, KubePod)
    assert (pod_record.node_name, pod_record.phase, pod_record.deleting) == ("gke-h100-0", "Pending", True)
    assert pod_record.created > 0 and pod_record.labels == {"x": "y"}


def test_a_byte_that_is_not_utf8_in_a_reason_does_not_fail_the_list() -> None:
    """slurmrestd sends names and reasons as typed (scontrol ... Reason=$'caf\\xe9'): the record keeps U+FFFD."""
    raw = _as_json({"nodes": [{**NODE_V45, "reason": "cafXX"}]}).replace(b"cafXX", b"caf\xe9")
    (node,) = [slurm_records.node_from(n) for n in decode(SLURM_NODES, raw).nodes or ()]
    assert node.reason == "caf\ufffd" and node.name == "h100-2"


def test_worker_statefulsets_decode_to_their_group_and_replicas() -> None:
    """apps/v1 StatefulSetList as the API sends it; replicas left out means 1 (the API's default)."""
    answer = {
        "kind": "StatefulSetList",
        "items": [
            {
                "metadata": {"name": "h100-a", "labels": {"slonk.dev/group": "h100-a"}},
                "spec": {"replicas": 12, "serviceName": "slurm-workers", "template": {}},
                "status": {"replicas": 14, "readyReplicas": 11},
            },
            {"metadata": {"name": "cpu"}, "spec": {}},
        ],
    }
    items = KUBE_STATEFULSETS.decode(_as_json(answer)).items or []
    assert [kube_api.worker_set_from(i) for i in items] == [
        WorkerSet("h100-a", "h100-a", 12),
        WorkerSet("cpu", "cpu", 1),
    ]

    released: list[bool] = []

    class Response(io.BytesIO):
        """A urllib3 response as the client hands it over: read into the caller's buffer, then released."""

        length_remaining = None  # chunked: no length known before the read

        def release_conn(self) -> None:
            released.append(True)

    calls: list[tuple[Any, ...]] = []

    def list_namespaced_stateful_set(*args: Any, **kwargs: Any) -> Response:
        calls.append((args, kwargs))
        return Response(_as_json(answer))

    api = kube_api.KubeApi.__new__(kube_api.KubeApi)
    api.namespace, api.calls, api.timeout = "slurm", __import__("collections").Counter(), kube_api.TIMEOUT
    api._buffer = ReadBuffer(16)  # smaller than the answer: it grows
    api.apps = type("Apps", (), {"list_namespaced_stateful_set": staticmethod(list_namespaced_stateful_set)})()
    sets = api.list_statefulsets("app.kubernetes.io/component=worker")
    assert [s.replicas for s in sets] == [12, 1] and api.calls == {"list_statefulsets": 1} and released == [True]
    ((args, kwargs),) = calls
    assert args == ("slurm",) and kwargs["label_selector"] == "app.kubernetes.io/component=worker"
    assert kwargs["resource_version"] == "0"
