"""Benchmark of the operations controller's cloud path: a failing replace-machine verdict to the cloud's call.

Usage (any machine; no Slurm, no cluster, no cloud; the repository containing this file is imported)::

    python benchmarks/ops_replace.py                 # 4,096 nodes, 5 samples, 2 s loop
    python benchmarks/ops_replace.py --quick         # 64 nodes, 1 sample, 0.2 s loop: what the tests run
    python benchmarks/ops_replace.py --nodes 512 --samples 3 --json out.json

What runs: the real :class:`~slonk_infra.ops.controller.Controller` tick (reconcile, remediation, the
replace bookkeeping, pool sizing with its StatefulSet list) against the in-memory sides of
:mod:`slonk_infra.ops.memory`: Slurm and Kubernetes records of one GPU pool of N nodes, and the
in-memory cloud, which records each call (GKE: a3-megagpu-8g, so the call is reportHostAsFaulty).
What it leaves out: slurmrestd and the API server (benchmarks/sync.py times those lists at 4,096
nodes) and the cloud's own latency.

Figures (see benchmarks/README.md):

- **ticks from verdict to cloud call**: a verdict seen on one tick drains the node; the next tick, the
  node drained and idle, cordons it, deletes its pod and calls the cloud.
- **tick code, verdict -> cloud call**: the wall time of those ticks, back to back (median, max).
- **verdict -> cloud call with a loop**: the controller loops every ``--interval`` s in a thread; the
  verdict is put on the pod at a random moment, and the time until the cloud sees the call is taken
  (median, max): about one to two intervals plus the ticks.
- **steady tick**: one tick with nothing to change, its requests and cloud calls (none).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Run as a file, this directory and not the checkout is on the path: import the library from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slonk_infra.ops.config import CloudSection, OperationsSpec, RemediationSpec
from slonk_infra.ops.controller import Controller
from slonk_infra.ops.memory import World
from slonk_infra.vocab import HEALTH

POOL = "h100"


def verdict(fp: str, t: float) -> str:
    """A replace-machine verdict as slonk-health publishes it."""
    return json.dumps(
        {
            "schema": "slonk-health/v1",
            "ok": False,
            "action": "replace-machine",
            "fingerprint": {"kind": "gpu-uuids", "value": fp},
            "results": [{"check": "gpu-xid", "ok": False, "action": "replace-machine", "reason": "xid 79"}],
            "time": t,
        }
    )


def make(nodes: int) -> tuple[World, Controller]:
    """A world of one pool of ``nodes`` idle nodes, and a controller acting on it in real time."""
    world = World(cloud_kind="gcp", now=time.time())
    world.add_pool(POOL, nodes)
    spec = OperationsSpec(
        enabled=True,
        remediation=RemediationSpec(max_actions_per_window=10_000, max_pool_fraction=1.0),
    )
    section = CloudSection(
        kind="gcp",
        cluster="bench",
        location="us-central1",
        node_pools={POOL: POOL},
        faulty_host_machine_types=["a3-megagpu-8g"],
    )
    ctl = Controller(spec, world.slurm, world.kube, cloud=world.cloud, cloud_section=section)
    ctl.tick()
    return world, ctl


def mark(world: World, index: int) -> None:
    """Puts a failing verdict on worker ``index`` (a fresh fingerprint: no repeat offender)."""
    name = f"{POOL}-{index}"
    pod = world.kube.pods[name]
    world.kube.pods[name] = dataclasses.replace(pod, annotations={HEALTH: verdict(f"sha256:{index:064x}", time.time())})


def back_to_back(nodes: int, samples: int) -> dict[str, Any]:
    """Ticks and tick-code time from a verdict to the cloud call, ticking without pause."""
    world, ctl = make(nodes)
    walls, ticks = [], []
    for i in range(samples):
        before = len(world.cloud.calls("replace"))
        mark(world, i)
        t0, n = time.perf_counter(), 0
        while len(world.cloud.calls("replace")) == before and n < 10:
            ctl.tick()
            n += 1
        walls.append(time.perf_counter() - t0)
        ticks.append(n)
    steady = ctl.tick()
    steady_wall = []
    for _ in range(max(3, samples)):
        steady_wall.append(ctl.tick().wall_seconds)
    return {
        "ticks": ticks,
        "tick_code_s": walls,
        "steady_kube_calls": dict(steady.kube_calls),
        "steady_slurm_calls": dict(steady.slurm_calls),
        "steady_cloud_calls": dict(steady.cloud_calls),
        "steady_tick_s": statistics.median(steady_wall),
        "calls": [c for c, _ in world.cloud.log],
        "replace_calls": sorted({ctl.state.active[f"{POOL}-{i}"].cloud_call for i in range(samples)}),
    }


def looped(nodes: int, samples: int, interval: float) -> list[float]:
    """Seconds from a verdict put on a pod to the cloud call, with the controller looping every ``interval``."""
    world, ctl = make(nodes)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            report = ctl.tick()
            stop.wait(max(0.0, interval - report.wall_seconds))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    out = []
    try:
        for i in range(samples):
            time.sleep(random.uniform(0, interval))
            before = len(world.cloud.calls("replace"))
            t0 = time.perf_counter()
            mark(world, i)
            while len(world.cloud.calls("replace")) == before:
                if time.perf_counter() - t0 > 20 * interval + 30:
                    raise RuntimeError("no cloud call")
                time.sleep(0.005)
            out.append(time.perf_counter() - t0)
    finally:
        stop.set()
        thread.join()
    return out


def machine() -> str:
    """The machine, as the other figures name it."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    except OSError:
        mem = 0.0
    return f"{model or platform.processor()}, {os.cpu_count()} CPUs, {mem:.1f} GiB, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--quick", action="store_true", help="64 nodes, 1 sample, 0.2 s loop")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.samples, args.interval = 64, 1, 0.2
    fast = back_to_back(args.nodes, args.samples)
    loop = looped(args.nodes, args.samples, args.interval)
    rows = [
        ("nodes in the pool", str(args.nodes)),
        ("cloud call made", ", ".join(fast["replace_calls"])),
        ("ticks from verdict to cloud call", "/".join(str(t) for t in fast["ticks"])),
        (
            "tick code, verdict -> cloud call ms (median / max)",
            f"{statistics.median(fast['tick_code_s']) * 1e3:.1f} / {max(fast['tick_code_s']) * 1e3:.1f}",
        ),
        (
            f"verdict -> cloud call s, {args.interval:g} s loop (median / max)",
            f"{statistics.median(loop):.2f} / {max(loop):.2f}",
        ),
        ("steady tick ms", f"{fast['steady_tick_s'] * 1e3:.1f}"),
        (
            "Kubernetes requests per steady tick",
            ", ".join(f"{k} {v}" for k, v in sorted(fast["steady_kube_calls"].items())),
        ),
        ("cloud calls per steady tick", str(sum(fast["steady_cloud_calls"].values()))),
    ]
    print(f"Measured on {machine()}\n")
    print("| figure | value |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"machine": machine(), "args": vars(args) | {"json": str(args.json)}, **fast, "looped_s": loop},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
