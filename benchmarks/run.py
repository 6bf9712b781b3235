"""Benchmark of slonk-infra: validation, Slurm rendering, the Pulumi program under mocks, real slurmctld.

Usage (from anywhere; the repository containing this file is imported, not an installed copy)::

    python benchmarks/run.py                 # everything; prints Markdown tables
    python benchmarks/run.py --quick         # S and a tiny sweep only (what the test suite runs)
    python benchmarks/run.py --json out.json # also write the raw figures

Figures per declaration (see benchmarks/README.md for exact definitions): validation time
(``build_plan``), Slurm file rendering time (``render_slurm_files``), the whole Pulumi program under
the mock runtime (wall time, peak memory, resources by type, dependency-graph depth), the floor (as
many minimal resources under the same runner, in the same process) and the program/floor ratio, the
end-to-end ``slonk-infra render`` wall time, and for L-gcp the time a real slurmctld takes to accept
the rendered files and report every node record. Nothing here asserts a timing; targets are reported.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Run as a file, this directory and not the checkout is on the path: import the library from this
# checkout (never from another installed copy) and the harnesses, which are not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulumi
import yaml

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import CONFIG_KEY, PROJECT, load_stack_config
from slonk_infra.offline.heap import few_full_collections
from slonk_infra.offline.render import ProgramRun, run_program, write_render
from slonk_infra.offline.runner import Registration, run_offline
from slonk_infra.slurm import render_slurm_files

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "stacks"
DECLARATIONS = Path(__file__).resolve().parent / "declarations"
FLOOR_TYPE = "slonk-bench:index:Floor"

# Sweeps: node count at a fixed pool count, pool count at a fixed node count (nodes split evenly).
SWEEP_CLOUDS = ("gcp", "aws", "local")
NODE_SWEEP_POOLS, NODE_SWEEP = 8, (8, 64, 512, 4096)
POOL_SWEEP_NODES, POOL_SWEEP = 1024, (1, 8, 64, 512)
QUICK_CLOUDS = ("gcp",)
QUICK_NODE_SWEEP_POOLS, QUICK_NODE_SWEEP = 2, (2, 8)
QUICK_POOL_SWEEP_NODES, QUICK_POOL_SWEEP = 8, (1, 2)

# Targets (reported, never asserted).
TARGET_PROGRAM_OVER_FLOOR = 1.5
TARGET_E2E_S = 6.0
TARGET_SLURM_S = 0.2
L_CASES = ("L-gcp", "L-aws")

COLUMNS = (
    "declaration",
    "cloud",
    "pools",
    "TPU slices",
    "Slurm nodes",
    "validate ms",
    "Slurm files ms",
    "program s",
    "peak RSS Δ MiB",
    "resources",
    "registrations",
    "depth d+p",
    "depth d+p+prov",
    "floor s",
    "program/floor",
    "payload floor s",
    "program/payload floor",
    "end-to-end s",
)


# -- declarations -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One declaration to measure: the whole stack ``config:`` mapping and, if any, its stack file."""

    name: str
    kind: str  # "reference", "node sweep" or "pool sweep"
    stack: str
    config: dict[str, Any]
    path: Path | None = None

    @property
    def declaration(self) -> dict[str, Any]:
        raw: dict[str, Any] = self.config[CONFIG_KEY]
        return raw


def reference_cases() -> list[Case]:
    """S = the local stack, M = the gcp example stack, L-gcp / L-aws from benchmarks/declarations."""
    out = []
    for name, path in (
        ("S", STACKS / "Pulumi.local.yaml"),
        ("M", STACKS / "Pulumi.gcp.yaml"),
        ("L-gcp", DECLARATIONS / "Pulumi.L-gcp.yaml"),
        ("L-aws", DECLARATIONS / "Pulumi.L-aws.yaml"),
    ):
        out.append(Case(name, "reference", f"bench-{name.lower()}", load_stack_config(str(path)), path))
    return out


def sweep_config(cloud: str, pools: int, nodes_per_pool: int) -> dict[str, Any]:
    """The cloud's example stack with its pools replaced by ``pools`` copies of its first pool, no TPUs."""
    config = copy.deepcopy(load_stack_config(cloud, STACKS))
    decl = config[CONFIG_KEY]
    template = {k: v for k, v in decl["pools"][0].items() if k not in ("maxNodes", "reservation")}
    decl["name"] = f"sweep-{cloud}"
    decl["pools"] = [{**template, "name": f"p{i:03d}", "nodes": nodes_per_pool} for i in range(pools)]
    decl.pop("tpuSlices", None)
    return config


def sweep_cases(quick: bool) -> list[Case]:
    """Node sweep at a fixed pool count, then pool sweep at a fixed node count, per cloud."""
    clouds = QUICK_CLOUDS if quick else SWEEP_CLOUDS
    node_pools, node_points = (QUICK_NODE_SWEEP_POOLS, QUICK_NODE_SWEEP) if quick else (NODE_SWEEP_POOLS, NODE_SWEEP)
    pool_nodes, pool_points = (QUICK_POOL_SWEEP_NODES, QUICK_POOL_SWEEP) if quick else (POOL_SWEEP_NODES, POOL_SWEEP)
    out = []
    for cloud in clouds:
        for nodes in node_points:
            name = f"nodes-{cloud}-{nodes}"
            out.append(Case(name, "node sweep", name, sweep_config(cloud, node_pools, nodes // node_pools)))
        for pools in pool_points:
            name = f"pools-{cloud}-{pools}"
            out.append(Case(name, "pool sweep", name, sweep_config(cloud, pools, pool_nodes // pools)))
    return out


# -- measurement helpers --------------------------------------------------------------------------------


def repeat(fn: Callable[[], float], max_runs: int, budget_s: float, collect: bool = True) -> list[float]:
    """Call ``fn`` (which returns the seconds it measured) up to ``max_runs`` times within ``budget_s``.

    ``collect`` runs a full garbage collection before each call (about 0.1 s here, so not for short calls).
    """
    times: list[float] = []
    while len(times) < max_runs:
        if collect:
            gc.collect()
        times.append(fn())
        if sum(times) >= budget_s:
            break
    return times


def clock(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class FloorResource(pulumi.CustomResource):
    """The cheapest resource the mock runner can register: no SDK types, no outputs read."""

    def __init__(self, name: str, props: Mapping[str, Any] | None = None) -> None:
        super().__init__(FLOOR_TYPE, name, dict(props or {}))


def floor_seconds(count: int) -> float:
    """Wall time of ``count`` bare resources under the same runner (``run_offline``) as the program."""
    start = time.perf_counter()
    with few_full_collections():  # the collector settings run_program runs under
        run_offline(lambda: [FloorResource(f"floor-{i}") for i in range(count)], project=PROJECT, stack="floor")
    return time.perf_counter() - start


def payload_floor_seconds(inputs: Sequence[Mapping[str, Any]]) -> float:
    """Like :func:`floor_seconds`, but each bare resource carries the inputs a program resource had."""
    start = time.perf_counter()
    with few_full_collections():
        run_offline(
            lambda: [FloorResource(f"floor-{i}", props) for i, props in enumerate(inputs)],
            project=PROJECT,
            stack="floor",
        )
    return time.perf_counter() - start


def graph_depth(registrations: Sequence[Registration], providers: bool) -> int:
    """Resources on the longest chain of edges: ``dependencies`` and ``parent`` (and provider references).

    The root Stack is not a registration, so edges to it are not counted; a lone resource has depth 1.
    """
    urns = {r.urn for r in registrations}
    edges: dict[str, set[str]] = {}
    for r in registrations:
        out = edges.setdefault(r.urn, set())
        out.update(d for d in r.dependencies if d in urns)
        if r.parent in urns:
            out.add(r.parent)
        if providers and r.provider:
            ref = r.provider.rsplit("::", 1)[0]  # "<urn>::<id>"
            if ref in urns:
                out.add(ref)
    memo: dict[str, int] = {}

    def longest(urn: str, path: frozenset[str]) -> int:
        if urn not in memo:
            nxt = [longest(d, path | {urn}) for d in edges[urn] if d not in path]
            memo[urn] = 1 + max(nxt, default=0)
        return memo[urn]

    return max((longest(u, frozenset()) for u in edges), default=0)


# Runs the measured command and reports its exit code, wall time and peak RSS. The command is started
# from this small process because a child's ru_maxrss also counts the RSS of the process it was forked
# from (the kernel keeps the pre-exec high-water mark), and this benchmark's own process is large.
LAUNCHER = r"""
import json, resource, subprocess, sys, time
report, timeout, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
start = time.perf_counter()
try:
    rc = subprocess.run(argv, timeout=timeout).returncode
except subprocess.TimeoutExpired:
    rc = 124
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(report, "w") as f:
    json.dump({"rc": rc, "wall": wall, "maxrss_kib": peak}, f)
"""


def run_child(argv: Sequence[str], timeout: float) -> tuple[int, float, float, str]:
    """Run a command; return (exit code, wall seconds from its start to its exit, its peak RSS MiB, output)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    with tempfile.TemporaryDirectory(prefix="slonk-bench-child-") as tmp:
        report = Path(tmp) / "report.json"
        log = Path(tmp) / "output.txt"
        with log.open("wb") as out:
            subprocess.run(
                [sys.executable, "-c", LAUNCHER, str(report), str(timeout), *argv],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                check=False,
                timeout=timeout + 60,
            )
        text = log.read_text(errors="replace")
        if not report.exists():
            return 1, 0.0, 0.0, text
        data = json.loads(report.read_text())
    return int(data["rc"]), float(data["wall"]), data["maxrss_kib"] / 1024, text


# -- per-declaration figures ----------------------------------------------------------------------------


@dataclass
class Figures:
    """Everything measured for one declaration (times in seconds, memory in MiB)."""

    name: str
    kind: str
    cloud: str
    pools: int
    tpu_slices: int
    slurm_nodes: int
    validate_s: float
    validate_runs: int
    slurm_s: float
    slurm_runs: int
    program_s: float
    program_runs: list[float]
    registrations: int
    resources: int
    by_type: dict[str, int]
    depth: int
    depth_with_providers: int
    floor_s: float
    payload_floor_s: float
    peak_rss_delta_mib: float | None = None
    e2e_s: float | None = None
    e2e_runs: list[float] = field(default_factory=list)
    e2e_peak_rss_mib: float | None = None

    @property
    def over_floor(self) -> float:
        return self.program_s / self.floor_s

    @property
    def over_payload_floor(self) -> float:
        return self.program_s / self.payload_floor_s


def measure(case: Case, quick: bool) -> Figures:
    """In-process figures of one declaration."""
    decl = case.declaration
    gc.collect()
    validate = repeat(lambda: clock(lambda: build_plan(decl)), 7, 1.0, collect=False)
    plan = build_plan(decl)
    slurm = repeat(lambda: clock(lambda: render_slurm_files(plan)), 7, 2.0, collect=False)

    last: list[ProgramRun] = []

    def program() -> float:
        last.clear()
        run = run_program(case.stack, case.config)
        last.append(run)
        return run.seconds

    program_runs = repeat(program, 1 if quick else 5, 5.0)
    run = last[0]
    registrations = run.registrations
    counts = run.counts()
    n = len(registrations)
    floor = repeat(lambda: floor_seconds(n), 1 if quick else 5, 5.0)
    inputs = [r.inputs for r in registrations]
    payload = repeat(lambda: payload_floor_seconds(inputs), 1 if quick else 5, 5.0)
    return Figures(
        name=case.name,
        kind=case.kind,
        cloud=str(decl["cloud"]),
        pools=len(plan.declaration.pools),
        tpu_slices=sum(1 for g in plan.groups if g.kind == "tpu"),
        slurm_nodes=sum(g.slurm_nodes for g in plan.groups),
        validate_s=statistics.median(validate),
        validate_runs=len(validate),
        slurm_s=statistics.median(slurm),
        slurm_runs=len(slurm),
        program_s=statistics.median(program_runs),
        program_runs=program_runs,
        registrations=n,
        resources=sum(counts.values()),
        by_type=dict(sorted(counts.items())),
        depth=graph_depth(registrations, providers=False),
        depth_with_providers=graph_depth(registrations, providers=True),
        floor_s=statistics.median(floor),
        payload_floor_s=statistics.median(payload),
    )


def _status_mib(key: str) -> float:
    """A ``/proc/self/status`` memory field (VmRSS, VmHWM) in MiB."""
    match = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no {key} in /proc/self/status")
    return int(match.group(1)) / 1024


def memory_probe(case_file: Path) -> None:
    """Child-process side of the memory figure: warm up, then the peak-RSS growth of one program run.

    Peak RSS is the kernel's high-water mark of this process's memory (VmHWM, what getrusage's ru_maxrss
    reports for a process that was not started by a larger one). It is reset to the current RSS through
    /proc/self/clear_refs after the warm-up where the kernel allows it; otherwise the delta of VmHWM.
    """
    data = json.loads(case_file.read_text(encoding="utf-8"))
    config: dict[str, Any] = data["config"]
    cloud = config[CONFIG_KEY]["cloud"]
    # Imports and the provider SDK modules the program loads lazily are not the program's memory: a
    # one-pool, one-node declaration of the same cloud loads them first.
    run_program(f"warm-{cloud}", sweep_config(cloud, 1, 1))
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
        method, before = "VmHWM after the run - VmRSS before it (high-water mark reset)", _status_mib("VmRSS")
    except OSError:
        method, before = "VmHWM after the run - VmHWM before it", _status_mib("VmHWM")
    run = run_program(data["stack"], config)
    delta = _status_mib("VmHWM") - before
    print(
        json.dumps({"peak_rss_delta_mib": delta, "method": method, "registrations": len(run.registrations)}), flush=True
    )


def measure_memory(case: Case) -> float | None:
    """Peak-RSS growth of one program run, measured in a fresh child process (see memory_probe)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"stack": case.stack, "config": case.config}, f)
        path = Path(f.name)
    try:
        rc, _, _, text = run_child([sys.executable, str(Path(__file__).resolve()), "--memory-probe", str(path)], 600)
    finally:
        path.unlink()
    # The figure is the probe's last JSON line; a probe that died without one (seen with an empty output on
    # a loaded 2-core machine) costs this one figure, never the whole benchmark.
    results = [line for line in text.splitlines() if line.startswith("{") and "peak_rss_delta_mib" in line]
    if rc != 0 or not results:
        print(f"warning: memory probe for {case.name} failed (rc {rc}):\n{text[-2000:]}", file=sys.stderr)
        return None
    value: float = json.loads(results[-1])["peak_rss_delta_mib"]
    return value


def measure_e2e(case: Case, runs: int) -> tuple[list[float], float | None]:
    """Wall time of ``python -m slonk_infra.cli render <stack file> -o DIR``: process start to files written."""
    assert case.path is not None
    times: list[float] = []
    peak: float | None = None
    for _ in range(runs):
        out = Path(tempfile.mkdtemp(prefix="slonk-bench-render-"))
        try:
            argv = [sys.executable, "-m", "slonk_infra.cli", "render", str(case.path), "-o", str(out)]
            rc, wall, rss, text = run_child(argv, 600)
            if rc != 0:
                raise RuntimeError(f"{' '.join(argv)} failed (rc {rc}):\n{text[-3000:]}")
            if not (out / "summary.json").exists():
                raise RuntimeError(f"{' '.join(argv)} wrote no summary.json")
            times.append(wall)
            peak = max(peak or 0.0, rss)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return times, peak


# -- L: where the end-to-end time goes ----------------------------------------------------------------------


def e2e_breakdown(case: Case, e2e_s: float | None) -> dict[str, float]:
    """The CLI's phases for ``case``, in this (warm) process, plus the YAML share of ``write_render``."""
    phases: dict[str, float] = {}
    start = time.perf_counter()
    config = load_stack_config(str(case.path))
    build_plan(config[CONFIG_KEY])
    phases["read + validate (CLI fail-fast check)"] = time.perf_counter() - start
    gc.collect()
    run = run_program(case.stack, config)
    phases["program under mocks (run_program)"] = run.seconds
    out = Path(tempfile.mkdtemp(prefix="slonk-bench-write-"))
    try:
        phases["write_render (all files)"] = clock(lambda: write_render(run, out))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    objects = run.kubernetes_objects()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # what write_render uses
    phases["  of which the manifests as dicts (kubernetes_objects)"] = clock(run.kubernetes_objects)
    phases[f"  of which YAML, once per object ({dumper.__name__})"] = clock(
        lambda: [yaml.dump(o, Dumper=dumper, sort_keys=False) for o in objects]
    )
    if e2e_s is not None:
        inside = sum(v for k, v in phases.items() if not k.startswith(" "))
        phases["process start, imports, cold SDK modules (end-to-end minus the above)"] = e2e_s - inside
    return phases


# -- L-gcp: real slurmctld ------------------------------------------------------------------------------------


def slurm_variant_2205(decl: Mapping[str, Any]) -> dict[str, Any]:
    """The declaration for Slurm 22.05 (host flavor): topology.yaml needs 25.05, so topology tree."""
    raw = copy.deepcopy(dict(decl))
    raw["image"]["slurmVersion"] = "22.05"
    raw["slurm"] = {**raw.get("slurm", {}), "topology": "tree"}
    return raw


def slurmctld_acceptance(case: Case, timeout: float = 120.0) -> dict[str, Any]:
    """Start only munged + slurmctld with the rendered files; time until ping, and until every node is listed.

    Built on testing/slurmlab (the same start-up as its ``check_config``); the harness's documented
    localhost overrides apply (each NodeName line is split into one line per node with its own port).
    """
    from testing.slurmlab import Flavor, SlurmLab, available_flavors, flavor_version, missing_reason

    flavors = available_flavors()
    decl = case.declaration
    note = ""
    flavor: Flavor
    if "chroot" in flavors:
        flavor = "chroot"
    elif "host" in flavors:
        flavor = "host"
        decl = slurm_variant_2205(decl)
        note = "chroot flavor missing: host Slurm 22.05 with a 22.05 / topology tree variant of the declaration"
    else:
        return {"skipped": f"{missing_reason('chroot')}; {missing_reason('host')}"}
    plan = build_plan(decl)
    files = render_slurm_files(plan).all()
    want = {n for g in plan.groups for n in g.node_names}
    workdir = Path(tempfile.mkdtemp(prefix="slonk-bench-ctld-"))
    lab = SlurmLab(files, flavor, workdir)
    result: dict[str, Any] = {"flavor": flavor, "slurm": flavor_version(flavor), "note": note, "nodes": len(want)}
    try:
        start = time.perf_counter()
        lab.setup()
        result["setup_s"] = time.perf_counter() - start
        t0 = time.perf_counter()
        proc = lab.spawn_controller()
        ping_s: float | None = None
        all_s: float | None = None
        polls = 0
        seen = 0
        while time.perf_counter() - t0 < timeout and proc.exit_code() is None:
            if ping_s is None:
                if lab.ping():
                    ping_s = time.perf_counter() - t0
                else:
                    time.sleep(0.02)
                continue
            res = lab.run(["scontrol", "--future", "show", "nodes", "-o"], timeout=60.0)
            polls += 1
            names = set(re.findall(r"^NodeName=(\S+)", res.stdout, re.MULTILINE))
            seen = len(names & want)
            if res.returncode == 0 and names >= want:
                all_s = time.perf_counter() - t0
                break
        log_path = workdir / "log" / "slurmctld.log"
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        result.update(
            exit_code=proc.exit_code(),
            ping_s=ping_s,
            all_nodes_s=all_s,
            nodes_reported=seen,
            polls=polls,
            errors=[line for line in log.splitlines() if "error:" in line or "fatal:" in line],
            warnings=[line[:300] for line in log.splitlines() if "warning:" in line],
        )
    finally:
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


# -- reporting -------------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    from importlib.metadata import version

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pulumi": version("pulumi"),
        "pyyaml_libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
    }


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def row(f: Figures) -> list[object]:
    return [
        f.name,
        f.cloud,
        f.pools,
        f.tpu_slices,
        f.slurm_nodes,
        f"{f.validate_s * 1000:.1f}",
        f"{f.slurm_s * 1000:.1f}",
        f"{f.program_s:.3f}",
        "n/a" if f.peak_rss_delta_mib is None else f"{f.peak_rss_delta_mib:.1f}",
        f.resources,
        f.registrations,
        f.depth,
        f.depth_with_providers,
        f"{f.floor_s:.3f}",
        f"{f.over_floor:.2f}",
        f"{f.payload_floor_s:.3f}",
        f"{f.over_payload_floor:.2f}",
        "-" if f.e2e_s is None else f"{f.e2e_s:.2f}",
    ]


def resource_model(figures: Sequence[Figures]) -> dict[str, dict[str, Any]]:
    """Per cloud: resources = constant + per-pool slope (from the pool sweep), per type, and the fit."""
    model: dict[str, dict[str, Any]] = {}
    for cloud in dict.fromkeys(f.cloud for f in figures if f.kind == "pool sweep"):
        points = sorted((f for f in figures if f.kind == "pool sweep" and f.cloud == cloud), key=lambda f: f.pools)
        lo, hi = points[0], points[-1]
        span = hi.pools - lo.pools
        slope = (hi.resources - lo.resources) / span
        const = lo.resources - slope * lo.pools
        per_type = {
            t: (hi.by_type.get(t, 0) - lo.by_type.get(t, 0)) / span
            for t in sorted(set(hi.by_type) | set(lo.by_type))
            if hi.by_type.get(t, 0) != lo.by_type.get(t, 0)
        }
        nodes = [f.resources for f in figures if f.kind == "node sweep" and f.cloud == cloud]
        model[cloud] = {
            "constant": const,
            "per_pool": slope,
            "per_pool_by_type": per_type,
            "fits_every_pool_point": all(p.resources == const + slope * p.pools for p in points),
            "pool_points": {p.pools: p.resources for p in points},
            "node_sweep_counts": nodes,
            "constant_in_nodes": len(set(nodes)) == 1,
        }
    by_name = {f.name: f for f in figures}
    if "L-gcp" in by_name and "gcp" in model:
        lg, m = by_name["L-gcp"], model["gcp"]
        pools_part = m["constant"] + m["per_pool"] * lg.pools
        model["gcp"]["per_tpu_slice"] = (lg.resources - pools_part) / lg.tpu_slices if lg.tpu_slices else None
    if "L-aws" in by_name and "aws" in model:
        la, m = by_name["L-aws"], model["aws"]
        model["aws"]["predicts_L_aws"] = m["constant"] + m["per_pool"] * la.pools == la.resources
    return model


def fmt_num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def targets(
    figures: Sequence[Figures], model: Mapping[str, Mapping[str, Any]], quick: bool
) -> list[tuple[str, str, str]]:
    """(target, met / missed / not measured, figures) rows."""
    by_name = {f.name: f for f in figures}
    out: list[tuple[str, str, str]] = []
    const_ok = all(m["constant_in_nodes"] for m in model.values()) if model else False
    small = all(m["fits_every_pool_point"] and m["per_pool"] <= 5 for m in model.values()) if model else False
    detail = "; ".join(
        f"{c}: node sweep {m['node_sweep_counts']}, {fmt_num(m['constant'])} + {fmt_num(m['per_pool'])}/pool"
        + (f" + {fmt_num(m['per_tpu_slice'])}/TPU slice" if m.get("per_tpu_slice") is not None else "")
        for c, m in model.items()
    )
    out.append(
        ("resource count constant in node count; small fixed number per pool/slice", _met(const_ok and small), detail)
    )
    for name in ("M", *L_CASES):
        f = by_name.get(name)
        if f is None:
            out.append((f"program within {TARGET_PROGRAM_OVER_FLOOR}x of floor: {name}", "not measured (--quick)", ""))
            continue
        out.append(
            (
                f"program within {TARGET_PROGRAM_OVER_FLOOR}x of floor: {name}",
                _met(f.over_floor <= TARGET_PROGRAM_OVER_FLOOR),
                f"{f.program_s:.3f} s / {f.floor_s:.3f} s = {f.over_floor:.2f}x "
                f"(payload floor {f.payload_floor_s:.3f} s: {f.over_payload_floor:.2f}x)",
            )
        )
    for name in L_CASES:
        f = by_name.get(name)
        if f is None or f.e2e_s is None:
            out.append((f"end to end under {TARGET_E2E_S:g} s: {name}", "not measured (--quick)", ""))
        else:
            out.append(
                (
                    f"end to end under {TARGET_E2E_S:g} s: {name}",
                    _met(f.e2e_s < TARGET_E2E_S),
                    f"median {f.e2e_s:.2f} s of {', '.join(f'{t:.2f}' for t in f.e2e_runs)}",
                )
            )
    for name in L_CASES:
        f = by_name.get(name)
        if f is None:
            out.append((f"Slurm rendering under {TARGET_SLURM_S:g} s: {name}", "not measured (--quick)", ""))
        else:
            out.append(
                (
                    f"Slurm rendering under {TARGET_SLURM_S:g} s: {name}",
                    _met(f.slurm_s < TARGET_SLURM_S),
                    f"median {f.slurm_s:.3f} s of {f.slurm_runs}",
                )
            )
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(
    figures: Sequence[Figures],
    info: Mapping[str, Any],
    ctld: Mapping[str, Any] | None,
    breakdown: Mapping[str, float] | None,
    quick: bool,
) -> tuple[str, dict[str, Any], list[tuple[str, str, str]]]:
    model = resource_model(figures)
    goals = targets(figures, model, quick)
    parts = [
        "# slonk-infra benchmark" + (" (--quick)" if quick else ""),
        "",
        f"Machine: {info['nproc']} CPUs, {info['cpu']}, Python {info['python']}, pulumi {info['pulumi']}, "
        f"{info['platform']}",
        "",
        md_table(COLUMNS, [row(f) for f in figures]),
        "",
        "validate / Slurm files: median of repeated `build_plan` / `render_slurm_files` calls (warm process). "
        "program: `run_program` wall time under the mock runtime (median of up to 5 runs within 5 s). "
        "peak RSS Δ: growth of the kernel's peak-RSS mark (VmHWM, reset via /proc/self/clear_refs) over one "
        "program run in a fresh child process, after a warm-up run of a one-pool, one-node declaration. resources: custom resources without providers; registrations: every RegisterResource "
        "call but the Stack (components and providers included). depth: resources on the longest chain of "
        "`dependencies` + `parent` edges (d+p), and with provider references too (d+p+prov). floor: as many "
        "bare `CustomResource`s as registrations, same runner, same process; payload floor: the same, each "
        "carrying the inputs one program resource had. end-to-end: `python -m slonk_infra.cli render <stack "
        "file> -o DIR` as a subprocess, median of 3.",
        "",
    ]
    refs = [f for f in figures if f.kind == "reference"]
    types = sorted({t for f in refs for t in f.by_type})
    parts += [
        "## Resources by type (reference declarations)",
        "",
        md_table(["type", *(f.name for f in refs)], [[t, *(f.by_type.get(t, 0) for f in refs)] for t in types]),
        "",
        "## Resource count model (from the pool sweep; node sweep must not change it)",
        "",
    ]
    for cloud, m in model.items():
        kinds = ", ".join(f"{t.rsplit(':', 1)[-1]} {fmt_num(v)}" for t, v in m["per_pool_by_type"].items())
        line = (
            f"- {cloud}: {fmt_num(m['constant'])} + {fmt_num(m['per_pool'])} per pool ({kinds}); "
            f"fits every pool point: {m['fits_every_pool_point']} {m['pool_points']}; "
            f"node sweep counts {m['node_sweep_counts']} (constant: {m['constant_in_nodes']})"
        )
        if m.get("per_tpu_slice") is not None:
            line += f"; per TPU slice (from L-gcp): {fmt_num(m['per_tpu_slice'])}"
        if "predicts_L_aws" in m:
            line += f"; predicts L-aws exactly: {m['predicts_L_aws']}"
        parts.append(line)
    parts.append("")
    if breakdown:
        parts += [
            "## L-gcp end to end: where the time goes (in-process phases, warm)",
            "",
            md_table(["phase", "s"], [[k, f"{v:.3f}"] for k, v in breakdown.items()]),
            "",
        ]
    e2e = [f for f in figures if f.e2e_s is not None]
    if e2e:
        parts += [
            "## End to end: `python -m slonk_infra.cli render <stack file> -o DIR` (subprocess)",
            "",
            md_table(
                ["declaration", "runs s", "median s", "peak RSS of the process MiB"],
                [
                    [f.name, ", ".join(f"{t:.2f}" for t in f.e2e_runs), f"{f.e2e_s:.2f}", f"{f.e2e_peak_rss_mib:.0f}"]
                    for f in e2e
                ],
            ),
            "",
        ]
    parts += ["## L-gcp on a real slurmctld", ""]
    if ctld is None:
        parts.append("- not measured (--quick or --skip-slurmctld)")
    elif "skipped" in ctld:
        parts.append(f"- skipped: {ctld['skipped']}")
    else:
        parts.append(
            f"- {ctld['slurm']} ({ctld['flavor']} flavor{'; ' + ctld['note'] if ctld['note'] else ''}): "
            f"slurmctld answered ping after {_s(ctld.get('ping_s'))}, all {ctld['nodes']} node records reported "
            f"(`scontrol --future show nodes -o`) after {_s(ctld.get('all_nodes_s'))} "
            f"({ctld['nodes_reported']} seen, {ctld['polls']} polls; exit code while running: {ctld['exit_code']}); "
            f"munged + file setup before start: {ctld['setup_s']:.2f} s; "
            f"log: {len(ctld['errors'])} error lines, {len(ctld['warnings'])} warning lines"
        )
        parts += [f"  - {w}" for w in ctld["warnings"][:5]]
        parts += [f"  - {e}" for e in ctld["errors"][:5]]
    parts += ["", "## Targets", "", md_table(["target", "result", "figures"], goals), ""]
    raw = {
        "machine": dict(info),
        "quick": quick,
        "cases": [
            {**asdict(f), "over_floor": f.over_floor, "over_payload_floor": f.over_payload_floor} for f in figures
        ],
        "resource_model": model,
        "e2e_breakdown_L_gcp": dict(breakdown) if breakdown else None,
        "slurmctld_L_gcp": dict(ctld) if ctld is not None else None,
        "targets": [{"target": t, "result": r, "figures": d} for t, r, d in goals],
    }
    return "\n".join(parts), raw, goals


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


# -- main -------------------------------------------------------------------------------------------------------


def warm_up() -> None:
    """Load every provider SDK module and the floor type once, so no timed run pays for imports."""
    for cloud in ("local", "gcp", "aws"):
        run_program(f"warm-{cloud}", load_stack_config(cloud, STACKS))
    floor_seconds(10)
    payload_floor_seconds([{"a": {"b": [1, 2]}}] * 10)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only S and a tiny sweep (for the test suite)")
    parser.add_argument("--json", type=Path, default=None, help="write the raw figures to this file")
    parser.add_argument("--skip-slurmctld", action="store_true", help="do not start a real slurmctld for L-gcp")
    parser.add_argument("--memory-probe", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe is not None:
        memory_probe(args.memory_probe)
        return 0

    started = time.perf_counter()
    refs = reference_cases()
    cases = [c for c in refs if c.name == "S"] if args.quick else refs
    cases += sweep_cases(args.quick)
    log = sys.stderr
    print(f"warming up; {len(cases)} declarations", file=log)
    warm_up()
    figures: list[Figures] = []
    for case in cases:
        f = measure(case, args.quick)
        figures.append(f)
        print(f"  {case.name}: program {f.program_s:.3f} s, {f.resources} resources", file=log)
    # Child processes after the in-process timings, so they never overlap a timed run.
    for case, f in zip(cases, figures, strict=True):
        f.peak_rss_delta_mib = measure_memory(case)
        if case.path is not None:
            f.e2e_runs, f.e2e_peak_rss_mib = measure_e2e(case, 1 if args.quick else 3)
            f.e2e_s = statistics.median(f.e2e_runs)
            print(f"  {case.name}: end to end {f.e2e_s:.2f} s", file=log)
    by_name = {c.name: c for c in cases}
    breakdown = None
    ctld = None
    if not args.quick:
        lg = next(f for f in figures if f.name == "L-gcp")
        breakdown = e2e_breakdown(by_name["L-gcp"], lg.e2e_s)
        if not args.skip_slurmctld:
            print("  L-gcp: starting slurmctld", file=log)
            ctld = slurmctld_acceptance(by_name["L-gcp"])
    text, raw, _ = report(figures, machine(), ctld, breakdown, args.quick)
    raw["benchmark_seconds"] = time.perf_counter() - started
    print(text)
    print(f"(benchmark took {raw['benchmark_seconds']:.0f} s)")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(raw, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
