"""Benchmark of the operations controller: one sync tick at thousands of nodes, and state-change latency.

Usage (root, after tools/install-slurm.sh; the repository containing this file is imported)::

    python benchmarks/sync.py                    # 4,096 nodes, every installed Slurm flavor
    python benchmarks/sync.py --nodes 512 --flavor chroot --samples 3
    python benchmarks/sync.py --quick            # 64 nodes, 1 sample: what the test suite runs
    python benchmarks/sync.py --json out.json    # also write the raw figures

What runs: a real slurmctld (testing/slurmlab, the rendered files of a one-pool declaration with
``restApi`` and ``maxNodes`` = N) with 4 real slurmd; the other N-4 node records are made visible
as DOWN "no pod" so the nodes list carries N records; real slurmrestd with JWT auth; the fake
Kubernetes API of testing/fakekube.py, holding N nodes and N worker pods, in a child process
(so the controller's CPU time is its own); the controller in this process. Nothing is asserted.

Figures (see benchmarks/README.md): per steady tick the wall and CPU time, the requests to each
API, the nodes reconcile looked at, the wall time of each list call and of reconcile alone over every
node; the CPU time of a tick right after one node's drain or resume; and the time from a change on one
side to its reflection on the other, with the controller looping every ``--interval`` seconds.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Run as a file, this directory and not the checkout is on the path: import the library from this
# checkout (never from another installed copy) and the harnesses, which are not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kubernetes.client as k8s

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.ops.config import OperationsSpec
from slonk_infra.ops.controller import Controller
from slonk_infra.ops.kube_api import KubeApi
from slonk_infra.ops.main import settle_heap
from slonk_infra.ops.metrics import Metrics
from slonk_infra.ops.slurm_rest import ScontrolWriter, SlurmRest, TokenSigner
from slonk_infra.ops.sync import Observed, reconcile
from slonk_infra.slurm import render_slurm_files
from slonk_infra.vocab import APP, COMPONENT, GROUP_LABEL, NAME_LABEL, WORKER_COMPONENT
from testing.slurmlab import (
    Flavor,
    RestD,
    SlurmLab,
    available_flavors,
    flavor_version,
    leftover_pids,
    stand_in_health_check,
)

ROOT = Path(__file__).resolve().parents[1]
NS = "slurm"
STARTED = 4
FLAVOR_VERSIONS = {"host": ("22.05", "tree"), "chroot": ("25.05", "yaml")}
LABELS = {NAME_LABEL: APP, COMPONENT: WORKER_COMPONENT, GROUP_LABEL: "h100"}

# The fake API server, in a child process: populated, prints its URL, serves until stdin closes.
FAKE_SERVER = """
import json, sys
from testing.fakekube import FakeKube
n, labels = int(sys.argv[1]), json.loads(sys.argv[2])
with FakeKube() as kube:
    for i in range(n):
        kube.add_node(f"gke-h100-{i}", labels={"cloud.google.com/gke-nodepool": "h100"})
        kube.add_pod(f"h100-{i}", "slurm", f"gke-h100-{i}", labels=labels)
    print(kube.url, flush=True)
    sys.stdin.read()
"""


def declaration(version: str, topology: str, nodes: int) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["image"]["slurmVersion"] = version
    pool = {"name": "h100", "kind": "gpu", "accelerator": {"type": "h100", "count": 8}}
    raw["pools"] = [{**pool, "nodes": STARTED, "maxNodes": nodes}]
    raw["tpuSlices"] = []
    raw["slurm"] = {"topology": topology, "restApi": True}
    return raw


@contextmanager
def fake_kube(nodes: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE_SERVER, str(nodes), json.dumps(LABELS)],
        cwd=ROOT,  # python -c puts the working directory on the path: the checkout, holding the harness
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url:
            raise RuntimeError("the fake API server did not start")
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def cpu_of(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_pid(lab: SlurmLab, rest: RestD) -> int:
    """slurmrestd's PID as this machine sees it (in the chroot flavor it runs in a PID namespace)."""
    if lab.flavor == "host":
        return rest.pid
    for pid in leftover_pids([lab.workdir], lab.env_tag):
        status = Path(f"/proc/{pid}/status").read_text()
        nspids = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
        if nspids and nspids[-1] == str(rest.pid):
            return pid
    return 0


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def timed(fn: Callable[[], Any], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def wait_for(check: Callable[[], bool], timeout: float = 120.0, poll: float = 0.05) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if check():
            return time.perf_counter() - start
        time.sleep(poll)
    raise TimeoutError("state change not reflected")


def measure(
    flavor: Flavor, nodes: int, samples: int, interval: float, latency_runs: bool = True, profile: Path | None = None
) -> dict[str, Any]:
    version, topology = FLAVOR_VERSIONS[flavor]
    plan = build_plan(declaration(version, topology, nodes))
    files = stand_in_health_check(render_slurm_files(plan).all())
    started = [f"h100-{i}" for i in range(STARTED)]
    out: dict[str, Any] = {"flavor": flavor, "slurm": flavor_version(flavor), "nodes": nodes}
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as work:
        t0 = time.perf_counter()
        with SlurmLab(files, flavor, Path(work) / "lab", initial_nodes=started, start_timeout=120) as lab:
            out["lab_start_s"] = round(time.perf_counter() - t0, 2)
            lab.run(["scontrol", "update", f"NodeName=h100-[{STARTED}-{nodes - 1}]", "State=DOWN", "Reason=no pod"])
            with RestD(lab) as rest, fake_kube(nodes) as url:
                scontrol = None
                if flavor == "host":
                    scontrol = ScontrolWriter(env={"SLURM_CONF": str(lab.conf_dir / "slurm.conf")})
                slurm = SlurmRest(rest.url, TokenSigner(rest.jwt_key, "root"), scontrol=scontrol)
                kube = KubeApi.connect(url, "fake-token", NS)
                spec = OperationsSpec()
                ctl = Controller(spec, slurm, kube, metrics=Metrics())
                ctl.tick()  # probes the API, settles annotations
                settle_heap()  # what slonk-ops does after its first tick
                out.update(steady(ctl, samples, host_pid(lab, rest)))
                out.update(one_change(ctl, lab, samples))
                out.update(parts(ctl, spec, samples))
                if profile is not None:
                    out["profile"] = profiled(ctl, profile / f"tick-{flavor}-{nodes}.pstats")
                if latency_runs:
                    out.update(latency(ctl, lab, url, samples, interval))
    return out


def steady(ctl: Controller, samples: int, restd_pid: int) -> dict[str, Any]:
    reports = []
    restd_cpu = []
    decoded = []
    visited = []
    faults = []
    for _ in range(samples):
        before = cpu_of(restd_pid) if restd_pid else 0.0
        minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        reports.append(ctl.tick())
        # Pages the tick's allocations mapped afresh (each zeroed by the kernel and faulted in): the
        # cost that grew faster than the record count before the list answers had buffers of their own.
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt)
        if restd_pid:
            restd_cpu.append(cpu_of(restd_pid) - before)
        decoded.append(records_decoded(ctl))
        visited.append(ctl.memo.visited)
    # Quiet ticks: no change planned and no record decoded again. The lab's slurmctld flags its thousands of
    # unreachable records NOT_RESPONDING in waves, so some ticks re-read records that changed.
    quiet = [r.cpu_seconds for r, d in zip(reports, decoded, strict=True) if d == 0 and r.plan and r.plan.empty]
    last = reports[-1]
    assert all(r.slurm_ok and r.kube_ok for r in reports), [r.errors for r in reports]
    return {
        "listed_nodes": last.nodes,
        "listed_pods": last.pods,
        "tick_wall_s": med([r.wall_seconds for r in reports]),
        "tick_cpu_s": med([r.cpu_seconds for r in reports]),
        "tick_cpu_each_s": [round(r.cpu_seconds, 4) for r in reports],
        "records_decoded_each": decoded,
        "nodes_visited_each": visited,
        "page_faults_each": faults,
        "tick_cpu_quiet_s": med(quiet) if quiet else None,
        "slurm_calls": dict(last.slurm_calls),
        "kube_calls": dict(last.kube_calls),
        "changes": sum(len(r.plan.slurm) + len(r.plan.patches) for r in reports if r.plan),
        "slurmrestd_cpu_s": med(restd_cpu) if restd_cpu else None,
    }


def one_change(ctl: Controller, lab: SlurmLab, samples: int) -> dict[str, Any]:
    """Ticks that each follow one change: a person drains a started node, or resumes it. Each such tick
    decides that node again and patches its pod and machine; the tick after it sees those patches."""
    cpu, visited = [], []
    for i in range(samples):
        if i % 2 == 0:
            lab.run(["scontrol", "update", "NodeName=h100-0", "State=DRAIN", "Reason=bench"], check=True)
        else:
            lab.run(["scontrol", "update", "NodeName=h100-0", "State=RESUME"], check=True)
        report = ctl.tick()
        assert report.plan is not None and not report.plan.empty, "the change was not seen"
        cpu.append(report.cpu_seconds)
        visited.append(ctl.memo.visited)
        ctl.tick()  # sees its own patches
    return {"tick_cpu_changed_s": med(cpu), "nodes_visited_changed": visited}


def records_decoded(ctl: Controller) -> int:
    """Records the last tick decoded again (list items that were not byte for byte the last answer's)."""
    # The benchmark looks inside the clients: their record caches count what each call decoded.
    caches = [
        getattr(side, name, None) for side, name in ((ctl.slurm, "_nodes"), (ctl.kube, "_nodes"), (ctl.kube, "_pods"))
    ]
    return sum(int(c.built) for c in caches if c is not None)


def parts(ctl: Controller, spec: OperationsSpec, samples: int) -> dict[str, Any]:
    nodes = ctl.slurm.list_nodes()
    knodes = ctl.kube.list_nodes()
    pods = ctl.kube.list_pods(spec.worker_selector)
    obs = Observed({n.name: n for n in nodes}, {n.name: n for n in knodes}, {p.name: p for p in pods})
    return {
        "get_nodes_s": med(timed(ctl.slurm.list_nodes, samples)),
        "get_jobs_s": med(timed(ctl.slurm.list_jobs, samples)),
        "list_kube_nodes_s": med(timed(ctl.kube.list_nodes, samples)),
        "list_pods_s": med(timed(lambda: ctl.kube.list_pods(spec.worker_selector), samples)),
        "reconcile_s": med(timed(lambda: reconcile(obs, ctl.state, spec, time.time()), samples)),
    }


def profiled(ctl: Controller, path: Path) -> str:
    """One more steady tick under cProfile; the statistics go to ``path``, the top functions are returned.

    slurmctld may flag the unreachable records NOT_RESPONDING between two ticks, which makes a tick patch
    thousands of annotations: such a tick is thrown away and the next one profiled (up to five tries).
    """
    for _ in range(5):
        prof = cProfile.Profile(time.process_time)  # CPU time: waiting for the servers is not the controller's cost
        prof.enable()
        report = ctl.tick()
        prof.disable()
        if report.plan is not None and report.plan.empty:
            break
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.dump_stats(path)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    return text.getvalue()


def latency(ctl: Controller, lab: SlurmLab, url: str, samples: int, interval: float) -> dict[str, Any]:
    """Changes made by hand while the controller loops; each timed until the other side shows it."""
    conf = k8s.Configuration()
    conf.host = url
    conf.api_key = {"authorization": "fake-token"}
    conf.api_key_prefix = {"authorization": "Bearer"}
    core = k8s.CoreV1Api(k8s.ApiClient(conf))

    def kube_node(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(core.read_node(name, _preload_content=False).data)
        return data

    def cordoned(name: str) -> bool:
        return bool(kube_node(name)["spec"].get("unschedulable"))

    def drained(name: str) -> bool:
        shown = lab.run(["scontrol", "show", "node", name, "-o"], check=True).stdout
        return "DRAIN" in shown.split("State=", 1)[1].split()[0]

    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            report = ctl.tick()
            stop.wait(max(0.0, interval - report.wall_seconds))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    times: dict[str, list[float]] = {
        "drain_to_cordon": [],
        "resume_to_uncordon": [],
        "cordon_to_drain": [],
        "uncordon_to_resume": [],
    }
    try:
        for _ in range(samples):
            lab.run(["scontrol", "update", "NodeName=h100-1", "State=DRAIN", "Reason=bench"], check=True)
            times["drain_to_cordon"].append(wait_for(lambda: cordoned("gke-h100-1")))
            lab.run(["scontrol", "update", "NodeName=h100-1", "State=RESUME"], check=True)
            times["resume_to_uncordon"].append(wait_for(lambda: not cordoned("gke-h100-1")))
            core.patch_node("gke-h100-2", {"spec": {"unschedulable": True}})
            times["cordon_to_drain"].append(wait_for(lambda: drained("h100-2")))
            core.patch_node("gke-h100-2", {"spec": {"unschedulable": False}})
            times["uncordon_to_resume"].append(wait_for(lambda: not drained("h100-2")))
    finally:
        stop.set()
        thread.join(timeout=120)
    return {"interval_s": interval, **{k: {"median": med(v), "max": max(v)} for k, v in times.items()}}


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = Path("/proc/meminfo").read_text().split()[1]
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(int(mem) / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def table(results: list[dict[str, Any]]) -> str:
    def ms(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 1000:.0f}"

    head = ["figure", *(f"{r['flavor']} ({r['slurm']}), {r['nodes']} nodes" for r in results)]
    rows: list[tuple[str, list[str]]] = [
        ("nodes / pods listed per tick", [f"{r['listed_nodes']} / {r['listed_pods']}" for r in results]),
        (
            "Slurm requests per steady tick",
            [", ".join(f"{k} {v}" for k, v in sorted(r["slurm_calls"].items())) for r in results],
        ),
        (
            "Kubernetes requests per steady tick",
            [", ".join(f"{k} {v}" for k, v in sorted(r["kube_calls"].items())) for r in results],
        ),
        ("tick wall ms (median)", [ms(r["tick_wall_s"]) for r in results]),
        ("tick CPU ms, controller (median)", [ms(r["tick_cpu_s"]) for r in results]),
        (
            "tick CPU ms, quiet ticks (median)",
            [ms(r["tick_cpu_quiet_s"]) if r["tick_cpu_quiet_s"] is not None else "none quiet" for r in results],
        ),
        ("records decoded again per tick", [" ".join(map(str, r["records_decoded_each"])) for r in results]),
        ("nodes visited by reconcile per tick", [" ".join(map(str, r["nodes_visited_each"])) for r in results]),
        ("tick CPU ms after one drain or resume (median)", [ms(r["tick_cpu_changed_s"]) for r in results]),
        ("nodes visited by those ticks", [" ".join(map(str, r["nodes_visited_changed"])) for r in results]),
        ("page faults per tick, controller", [" ".join(map(str, r["page_faults_each"])) for r in results]),
        ("slurmrestd CPU ms per tick", [ms(r["slurmrestd_cpu_s"]) for r in results]),
        ("GET nodes ms", [ms(r["get_nodes_s"]) for r in results]),
        ("GET jobs ms", [ms(r["get_jobs_s"]) for r in results]),
        ("list Kubernetes nodes ms", [ms(r["list_kube_nodes_s"]) for r in results]),
        ("list pods ms", [ms(r["list_pods_s"]) for r in results]),
        ("reconcile alone ms, every node (no memo)", [ms(r["reconcile_s"]) for r in results]),
    ]
    if any("interval_s" not in r for r in results):  # --no-latency
        return _lines(head, rows)
    rows.append(("loop interval s", [f"{r['interval_s']:g}" for r in results]))
    for key, label in (
        ("drain_to_cordon", "Slurm drain -> cordon s (median / max)"),
        ("resume_to_uncordon", "Slurm resume -> uncordon s"),
        ("cordon_to_drain", "cordon -> Slurm drain s"),
        ("uncordon_to_resume", "uncordon -> Slurm resume s"),
    ):
        rows.append((label, [f"{r[key]['median']:.2f} / {r[key]['max']:.2f}" for r in results]))
    return _lines(head, rows)


def _lines(head: list[str], rows: list[tuple[str, list[str]]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join([label, *cells]) + " |" for label, cells in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=[4096],
        help="Slurm node records, Kubernetes nodes and pods (one run each)",
    )
    ap.add_argument("--flavor", choices=["auto", "host", "chroot"], default="auto", help="auto: every one installed")
    ap.add_argument("--samples", type=int, default=5, help="ticks / latency rounds to take the median of")
    ap.add_argument("--interval", type=float, default=2.0, help="controller loop interval for the latency runs")
    ap.add_argument("--quick", action="store_true", help="64 nodes, 1 sample, first flavor installed")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    ap.add_argument("--no-latency", action="store_true", help="steady ticks only: skip the state-change latency runs")
    ap.add_argument("--profile", type=Path, help="profile one more steady tick (cProfile); .pstats files go here")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.samples, args.interval = [64], 1, 0.5
    flavors: list[Flavor] = available_flavors() if args.flavor == "auto" else [args.flavor]
    if args.quick:
        flavors = flavors[:1]
    if not flavors:
        raise SystemExit("no Slurm flavor installed: run tools/install-slurm.sh as root")
    if min(args.nodes) <= STARTED + 1:
        raise SystemExit(f"--nodes must be above {STARTED + 1}")
    results = [
        measure(f, n, args.samples, args.interval, not args.no_latency, args.profile)
        for f in flavors
        for n in args.nodes
    ]
    info = machine()
    print(f"Machine: {info['cpu']}, {info['nproc']} CPUs, {info['memory_gib']} GiB, Python {info['python']}\n")
    print(table(results))
    for r in results:
        if "profile" in r:
            print(f"\nProfile of one steady tick, {r['flavor']}, {r['nodes']} nodes:\n{r['profile']}")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "results": results}, indent=1))


if __name__ == "__main__":
    main()
