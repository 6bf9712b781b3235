"""What one operations tick spends turning list answers into records, at N nodes (default 4,096).

The answers are made here: a slurmrestd v0.0.45 node list shaped as 26.05 sends it (every field, pretty
printed, about 2.7 KB a node) and the fake Kubernetes API's node and pod lists (testing/fakekube.py, as
benchmarks/sync.py serves them). Two figures per answer, process CPU, median of --samples:

- ``json.loads only``: the standard library decoding the whole answer, which the controller did before
  reading a dozen fields from it (a lower bound of that path: the reading came on top);
- ``wire + records``: the whole answer through slonk_infra.ops.wire's decoders (only the fields the records
  use) and every record read: the cost before the record cache, and about that of an answer whose every
  record changed;
- ``unchanged answer``: what a steady tick costs the controller: the same answer again, each item left as
  its bytes and its record taken from the previous answer's (:class:`~slonk_infra.ops.wire.RecordCache`).

    python benchmarks/decode.py [--nodes 4096] [--samples 9]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a file, this directory and not the checkout is on the path: import the library from this
# checkout and the harness, which is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slonk_infra.ops import kube_api, slurm_records
from slonk_infra.ops.wire import (
    KUBE_NODE,
    KUBE_NODES,
    KUBE_POD,
    KUBE_PODS,
    KUBE_RAW_LIST,
    SLURM_NODE,
    SLURM_NODES,
    SLURM_NODES_RAW,
    RecordCache,
)
from testing.fakekube import FakeKube


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def slurm_node(i: int) -> dict[str, Any]:
    """A v0.0.45 node record with the fields 26.05 sends (values as a DOWN, pod-less node has them)."""
    features = ["h100-a", "gpu", "h100", "gcp"]
    return {
        "architecture": "x86_64", "burstbuffer_network_address": "", "boards": 1, "boot_time": _number(1764110000),
        "cluster_name": "slonk-gcp", "cores": 52, "specialized_cores": 0, "cpu_binding": 0, "cpu_load": 0,
        "free_mem": _number(0), "cpus": 208, "effective_cpus": 208, "specialized_cpus": "",
        "energy": {"average_watts": 0, "base_consumed_energy": 0, "consumed_energy": 0,
                   "current_watts": _number(0), "previous_consumed_energy": 0, "last_collected": 0},
        "external_sensors": {}, "extra": "", "power": {}, "features": features, "active_features": features,
        "gpu_spec": "", "gres": "gpu:h100:8(S:0-1)", "gres_drained": "N/A", "gres_used": "gpu:h100:0(IDX:N/A)",
        "instance_id": "", "instance_type": "", "last_busy": _number(1764110000), "mcs_label": "",
        "specialized_memory": 0, "name": f"h100-a-{i}", "next_state_after_reboot": ["INVALID"],
        "address": f"10.0.{i // 256}.{i % 256}", "hostname": f"h100-a-{i}", "state": ["DOWN", "NOT_RESPONDING"],
        "operating_system": "Linux 6.8.0", "owner": None, "partitions": ["low", "general", "high", "h100"],
        "port": 6818, "real_memory": 1843200, "res_cores_per_gpu": 0, "comment": "", "reason": "no pod",
        "reason_changed_at": _number(1764110000), "reason_set_by_user": "slurm", "resume_after": _number(0),
        "reservation": "", "alloc_memory": 0, "alloc_cpus": 0, "alloc_idle_cpus": 208, "tres_used": "",
        "tres_weighted": 0.0, "slurmd_start_time": _number(0), "sockets": 2, "threads": 2, "temporary_disk": 0,
        "weight": 1, "tres": "cpu=208,mem=1800G,billing=208,gres/gpu=8", "version": "26.05.5",
    }  # fmt: skip


def answers(nodes: int) -> dict[str, bytes]:
    """The three list answers as the controller receives them."""
    kube = FakeKube()  # its object builders only: the server is never started
    try:
        for i in range(nodes):
            kube.add_node(f"gke-h100-{i}", labels={"cloud.google.com/gke-nodepool": "h100"})
            kube.add_pod(f"h100-a-{i}", "slurm", f"gke-h100-{i}", labels={"app.kubernetes.io/component": "worker"})
        kube_nodes = {"kind": "NodeList", "items": list(kube.nodes.values())}
        pods = {"kind": "PodList", "items": list(kube.pods.values())}
    finally:
        kube.server.server_close()
    slurm = {"nodes": [slurm_node(i) for i in range(nodes)], "errors": [], "warnings": []}
    return {
        "slurm nodes": json.dumps(slurm, indent=2).encode(),
        "kubernetes nodes": json.dumps(kube_nodes).encode(),
        "pods": json.dumps(pods).encode(),
    }


def slurm_list(body: bytes) -> object:
    """The controller's Slurm node records from the answer."""
    return [slurm_records.node_from(n) for n in SLURM_NODES.decode(body).nodes or ()]


def kube_nodes(body: bytes) -> object:
    """The controller's Kubernetes node records from the answer."""
    return [kube_api.node_from(n) for n in KUBE_NODES.decode(body).items or ()]


def kube_pods(body: bytes) -> object:
    """The controller's pod records from the answer."""
    return [kube_api.pod_from(p) for p in KUBE_PODS.decode(body).items or ()]


def cached(name: str) -> Callable[[bytes], object]:
    """The controller's steady path for one answer: items as bytes, records from a warmed cache."""
    if name == "slurm nodes":
        slurm = RecordCache(SLURM_NODE, slurm_records.node_from)
        return lambda body: slurm.records(SLURM_NODES_RAW.decode(body).nodes or ())
    kube = (
        RecordCache(KUBE_NODE, kube_api.node_from)
        if name == "kubernetes nodes"
        else RecordCache(KUBE_POD, kube_api.pod_from)
    )
    return lambda body: kube.records(KUBE_RAW_LIST.decode(body).items or ())


def _call(fn: Callable[[bytes], object], body: bytes) -> Callable[[], object]:
    return lambda: fn(body)


def cpu_ms(fn: Callable[[], object], samples: int) -> float:
    """Median process CPU of ``fn`` in milliseconds."""
    times = []
    for _ in range(samples):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--samples", type=int, default=9)
    args = parser.parse_args()
    raw = answers(args.nodes)
    readers: dict[str, Callable[[bytes], object]] = {
        "slurm nodes": slurm_list,
        "kubernetes nodes": kube_nodes,
        "pods": kube_pods,
    }
    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(
        f"\n| answer ({args.nodes} records) | MB | json.loads only, ms | wire + records, ms | unchanged answer, ms |"
        "\n|---|---|---|---|---|"
    )
    totals = [0.0, 0.0, 0.0]
    for name, body in raw.items():
        whole = cpu_ms(_call(json.loads, body), args.samples)
        wire = cpu_ms(_call(readers[name], body), args.samples)
        steady = cached(name)
        steady(body)  # the previous tick's answer
        again = cpu_ms(_call(steady, body), args.samples)
        totals[0] += whole
        totals[1] += wire
        totals[2] += again
        print(f"| {name} | {len(body) / 1e6:.1f} | {whole:.0f} | {wire:.0f} | {again:.0f} |")
    print(f"| all three | | {totals[0]:.0f} | {totals[1]:.0f} | {totals[2]:.0f} |")


if __name__ == "__main__":
    main()
