"""Container-tier benchmark: how fast the rendered pods come up and recover, on real containers.

    python3 benchmarks/e2e.py                        # the local stack; Markdown on stdout
    python3 benchmarks/e2e.py --declaration gpu-shaped --runs 20 --json out.json

Same pods as ``bash tools/e2e.sh`` (testing/e2e; run that once first, or run this as root on a machine it
set up). Figures, each as median, min and max: start to every worker IDLE (``--ups`` new clusters);
``sbatch`` to RUNNING on an idle cluster (``--runs``); a worker pod deleted (preStop) and recreated to
IDLE, and lost without preStop to its next job running; the controller pod deleted and recreated to
answering ``scontrol ping`` (``--recoveries`` each); on a declaration with GPUs, the prolog with its health
check (GPU checks on, against the NVML stand-in) run as slurmd runs it (``--prologs``); on a declaration with
a backup controller, the primary's pod lost to the backup serving (its log's "Running as primary
controller") and to ``sbatch`` accepted by it, and the primary back to both UP (``--failovers``); with controller.backup, the restore drill's new controllers to the restored
state answering (``--restores``). Nothing here asserts a timing.

``--acceptance`` measures the runtime acceptance figures instead, each as p50 / p95 (nearest rank) / max:
``sbatch`` to RUNNING and to the job's script started, timed inside the pods (``--runs``); a worker pod
deleted with its preStop, and lost without it, to a job pinned to it RUNNING (``--recreations`` each); a
config change (a partition added and applied, the pods rolled as Kubernetes rolls them) to the partition
served and to the roll's end (``--changes``); and the controller's longest silence in each phase, from a
probe in an untouched worker pod (see ``PROBE_LOOP``). It prints this machine's load before and after.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import secrets
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a file, this directory and not the checkout is on the path; the harness is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing.e2e import (
    DECLARATIONS,
    LOGIN,
    SLURM_VERSION,
    Cluster,
    ClusterSecrets,
    Podman,
    accounting_ready,
    build_image,
    failover,
    interrupt_on_sigterm,
    no_backup_controller,
    no_gpus,
    no_in_cluster_accounting,
    no_state_backup,
    primary_back_seconds,
    prolog_seconds,
    render,
    rerender,
    restore_drill,
    ssh_keygen,
    submit,
    wait_done,
    wait_for,
    wait_job,
    with_partition,
)

POLL = 0.05  # seconds between state polls: the figures' resolution


def bring_up(cluster: Cluster) -> float:
    """Start every pod; seconds until every started worker is IDLE. With in-cluster accounting it then waits
    for the declared associations too (not counted): until then slurmctld refuses the users' jobs."""
    t0 = time.monotonic()
    cluster.up()
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 300)
    took = time.monotonic() - t0
    if no_in_cluster_accounting(cluster) is None:
        accounting_ready(cluster)
    return took


def controller_figures(cluster: Cluster, failovers: int, restores: int) -> dict[str, object]:
    """Failover and restore times, where the declaration has a backup controller / state archives."""
    user = cluster.rendered.plan.declaration.users[0]
    as_user = f"{user.uid}:{user.primary_gid}"
    out: dict[str, object] = {}
    if failovers and no_backup_controller(cluster) is None:
        runs, back = [], []
        for _ in range(failovers):
            runs.append(failover(cluster, as_user, user.home))
            back.append(primary_back_seconds(cluster))
        out |= {
            "primary_lost_to_backup_in_control_s": stats([r.in_control_s for r in runs]),
            "primary_lost_to_sbatch_accepted_s": stats([r.sbatch_s for r in runs]),
            "primary_back_to_both_up_s": stats(back),
        }
    if restores and no_state_backup(cluster) is None:
        drills = [restore_drill(cluster) for _ in range(restores)]
        out |= {
            "state_archive_job_s": stats([d["backup_s"] for d in drills]),
            "restore_to_answering_s": stats([d["restore_s"] for d in drills]),
        }
    return out


def measure(cluster: Cluster, runs: int, recoveries: int, prologs: int = 20) -> dict[str, object]:
    """The figures of one running cluster (see the module docstring)."""
    user = cluster.rendered.plan.declaration.users[0]
    as_user = f"{user.uid}:{user.primary_gid}"

    to_running = []
    for _ in range(runs):
        job = submit(cluster, f"-N1 -o {user.home}/bench-%j.out", "sleep 1", user=as_user)
        t1 = time.monotonic()
        wait_job(cluster, job, ("RUNNING", "COMPLETING", "COMPLETED"), 120, interval=POLL)
        to_running.append(time.monotonic() - t1)
        wait_done(cluster, [job], 180)

    worker_idle, lost_ran, ctl_up = [], [], []
    node = cluster.workers()[0]
    for _ in range(recoveries):
        t2 = time.monotonic()
        cluster.delete_pod(node)
        cluster.wait_states({node: "idle"}, 300)
        worker_idle.append(time.monotonic() - t2)

        warm = submit(cluster, f"-w {node} -o {user.home}/bench-%j.out", "true", user=as_user)
        wait_done(cluster, [warm], 180)  # slurmctld has now talked to this pod
        cluster.lose(node)
        t3 = time.monotonic()
        cluster.recreate(node)
        job = submit(cluster, f"-w {node} -o {user.home}/bench-%j.out", "true", user=as_user)
        wait_job(cluster, job, ("RUNNING", "COMPLETING", "COMPLETED"), 300, interval=POLL)
        lost_ran.append(time.monotonic() - t3)
        wait_done(cluster, [job], 180)

        t4 = time.monotonic()
        cluster.delete_pod("slurmctld-0")
        wait_for("slurmctld answering", cluster.controller_answers, 300, interval=POLL)
        ctl_up.append(time.monotonic() - t4)
        cluster.wait_states({n: "idle" for n in cluster.workers()}, 300)

    gpu = {"prolog_with_health_s": stats(prolog_seconds(cluster, prologs))} if no_gpus(cluster) is None else {}
    return {
        **gpu,
        "pods": len(cluster.pods),
        "workers": len(cluster.workers()),
        "sbatch_to_running_s": stats(to_running),
        "worker_deleted_to_idle_s": stats(worker_idle),
        "worker_lost_to_job_running_s": stats(lost_ran),
        "controller_deleted_to_ping_s": stats(ctl_up),
    }


# ---------------------------------------------------------------------------------------- acceptance
# The runtime-speed acceptance figures (``--acceptance``): sbatch to RUNNING timed inside the login pod,
# worker recreations with and without their preStop to the node back at work, config changes to the
# change served, and the controller's longest silence throughout, seen by a probe in a worker pod.

# On the login pod as the researcher: N jobs one after another on an idle cluster; for each, when sbatch
# returned, when squeue (polled every 10 ms) first showed it RUNNING, and when its script started (the
# script prints the time; it starts once the prolog has passed: with PrologFlags=Alloc a job is RUNNING,
# Reason=Prolog, while its prolog runs). Timed in the pods (one host clock), no `podman exec` latency.
# Job i of n is submitted (i - 1) / n of a second after a whole second, at least half a second after the
# previous job left the queue: slurmctld starts jobs on one-second ticks (its main scheduler and the backfill
# cycle), and a loop that submits a fixed time after the previous job ended submits at a phase of those ticks
# set by its own delays, so the median moved from run to run (0.24-0.70 s on gpu-shaped 26.05). A
# researcher's submission comes at any moment; phases spread evenly over the second measure that.
SBATCH_LOOP = r"""
n=$1; part=$2; home=$3
for i in $(seq "$n"); do
  sleep "$(awk -v t="$(date +%s.%N)" -v k="$i" -v n="$n" \
    'BEGIN { s = int(t) + (k - 1) / n - t; while (s < 0.5) s += 1; printf "%.3f", s }')"
  id=$(sbatch --parsable -N1 $part -o "$home/.bench-%j.out" --wrap 'date +%s.%N') || exit 1
  id=${id%%;*}
  t0=$(date +%s.%N)
  while :; do
    st=$(squeue -h -j "$id" -o %T 2>/dev/null)
    case "$st" in PENDING|CONFIGURING) sleep 0.01 ;; *) break ;; esac
  done
  t1=$(date +%s.%N)
  while squeue -h -j "$id" 2>/dev/null | grep -q .; do sleep 0.1; done
  echo "$id $t0 $t1 ${st:-gone} $(cat "$home/.bench-$id.out")"
  rm -f "$home/.bench-$id.out"
done
"""

# In a worker pod that no figure touches, as root: one `squeue` (a job-list RPC, which waits on
# slurmctld's job lock like every scheduling RPC) every PROBE_EVERY seconds, each line "start end rc".
# Each is given PROBE_WAIT seconds: a Slurm client resolves the controller's name once and then retries
# that address every second for up to MessageTimeout (30 s here), so one started just as the controller's
# pod went keeps trying the gone address; the next probe resolves afresh. A probe cut off is no answer.
PROBE_LOG = "/tmp/slonk-bench-probe.log"
PROBE_STOP = "/tmp/slonk-bench-probe.stop"
PROBE_EVERY = 0.5
PROBE_WAIT = 2
PROBE_LOOP = rf"""
rm -f {PROBE_LOG} {PROBE_STOP}
while [ ! -e {PROBE_STOP} ]; do
  s=$(date +%s.%N); timeout {PROBE_WAIT} squeue -h -o %i >/dev/null 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$s $e $rc" >> {PROBE_LOG}
  sleep {PROBE_EVERY}
done
"""


@dataclass
class Probe:
    """The stall probe: a loop of ``squeue`` in one worker pod, started and read back by the benchmark."""

    cluster: Cluster
    pod: str

    def start(self) -> None:
        """Start the loop, detached, in the pod's main container."""
        container = self.cluster.pods[self.pod].container()
        self.cluster.podman.run("exec", "-d", container, "sh", "-c", PROBE_LOOP)

    def answers(self) -> list[tuple[float, float, int]]:
        """Every probe so far: (start, end, exit status), wall-clock seconds."""
        out = self.cluster.exec(self.pod, f"cat {PROBE_LOG} 2>/dev/null", timeout=60).stdout
        rows = []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                rows.append((float(parts[0]), float(parts[1]), int(parts[2])))
        return rows

    def stop(self) -> None:
        """End the loop (it checks for the stop file between probes)."""
        self.cluster.exec(self.pod, f"touch {PROBE_STOP}", timeout=60)


def longest_silence(probes: list[tuple[float, float, int]], start: float, end: float) -> float:
    """The longest time within [start, end] in which no probe was answered: the gap between consecutive
    answered probes' ends (and from ``start`` to the first). A probe that failed is no answer."""
    ends = sorted(e for s, e, rc in probes if rc == 0 and start <= e <= end)
    marks = [start, *ends, end] if ends else [start, end]
    return round(max(b - a for a, b in itertools.pairwise(marks)), 2)


def percentiles(values: list[float]) -> dict[str, float]:
    """Median, 95th percentile (nearest rank: the ceil(0.95 n)-th smallest), max and count, in seconds."""
    ordered = sorted(values)
    rank = max(1, math.ceil(0.95 * len(ordered)))
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[rank - 1], 2),
        "max": round(ordered[-1], 2),
        "n": len(ordered),
    }


def _partition_of(cluster: Cluster, node: str) -> str:
    """A partition holding ``node`` (its pinned jobs must name one where the default partition lacks it)."""
    out = cluster.sh(LOGIN, f"sinfo -h -N -n {node} -o %P")
    return out.split()[0].rstrip("*")


def sbatch_in_pod(cluster: Cluster, runs: int, as_user: str, home: str, partition: str) -> dict[str, list[float]]:
    """``runs`` jobs one after another, timed inside the pods from sbatch returning to RUNNING and to the
    job's script starting."""
    script = shlex.quote(SBATCH_LOOP)
    out = cluster.sh(LOGIN, f"bash -c {script} bench {runs} '-p {partition}' {home}", user=as_user, timeout=60 * runs)
    rows = [line.split() for line in out.splitlines() if len(line.split()) == 5]
    if len(rows) != runs:
        raise AssertionError(f"sbatch loop: {len(rows)} of {runs} jobs timed\n{out}")
    return {
        "running": [float(r[2]) - float(r[1]) for r in rows],
        "script": [float(r[4]) - float(r[1]) for r in rows],
    }


def back_at_work(cluster: Cluster, node: str, partition: str, as_user: str, home: str, prestop: bool) -> float:
    """A worker replaced, with its preStop (deleted as ``kubectl delete pod`` does) or without (lost with its
    node; slurmctld ran a job on it just before): seconds from the deletion to a job pinned to it RUNNING."""
    pin = f"-p {partition} -w {node} -o {home}/bench-%j.out"
    if not prestop:
        warm = submit(cluster, pin, "true", user=as_user)
        wait_done(cluster, [warm], 180)  # slurmctld has now talked to this pod
    t0 = time.monotonic()
    if prestop:
        cluster.delete_pod(node)
    else:
        cluster.lose(node)
        cluster.recreate(node)
    job = submit(cluster, pin, "true", user=as_user)
    wait_job(cluster, job, ("RUNNING", "COMPLETING", "COMPLETED"), 300, interval=POLL)
    took = time.monotonic() - t0
    wait_done(cluster, [job], 180)
    return took


def config_served(cluster: Cluster, watcher: str) -> tuple[float, float]:
    """A partition added to the declaration and applied (the controllers, login and slurmrestd rolled as
    Kubernetes rolls them): seconds from the apply to slurmctld serving the partition, seen from a worker
    pod that the change leaves alone, and to the apply's end (every rolled pod Ready)."""
    name = f"b{secrets.token_hex(3)}"
    timeline: list[tuple[float, str]] = []
    new = rerender(cluster.rendered, cluster.secrets, with_partition(cluster, name))
    done: list[float] = []
    failed: list[BaseException] = []
    t0 = time.monotonic()

    def apply() -> None:
        try:
            result = cluster.apply(new)
            timeline.extend(result.timeline)
            for cname, log in result.slow_stops.items():
                print(f"config change: {cname} {log}", file=sys.stderr, flush=True)
        except BaseException as exc:  # reported by the caller
            failed.append(exc)
        done.append(time.monotonic() - t0)

    roll = threading.Thread(target=apply)
    roll.start()

    def served() -> bool:
        proc = cluster.exec(watcher, f"timeout {PROBE_WAIT} sinfo -h -o %P", timeout=60)  # see PROBE_WAIT
        return name in proc.stdout.split()

    wait_for(f"partition {name} served", served, 300, interval=POLL)
    served_s = time.monotonic() - t0
    roll.join()
    if failed:
        raise failed[0]
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 300)
    print(f"config change: served {served_s:.2f} s; roll: {timeline}", file=sys.stderr, flush=True)
    return served_s, done[0]


def acceptance(cluster: Cluster, runs: int, recreations: int, changes: int) -> dict[str, object]:
    """The acceptance figures of one running cluster, with the probe's longest silence per phase."""
    user = cluster.rendered.plan.declaration.users[0]
    as_user = f"{user.uid}:{user.primary_gid}"
    workers = cluster.workers()
    node, watcher = workers[0], workers[-1]  # the one replaced, the one that watches (never touched)
    partition = _partition_of(cluster, node)
    probe = Probe(cluster, watcher)
    probe.start()
    phases: dict[str, tuple[float, float]] = {}
    out: dict[str, object] = {"pods": len(cluster.pods), "workers": len(workers), "load_before": _load()}
    try:
        t = time.time()
        started = sbatch_in_pod(cluster, runs, as_user, user.home, partition)
        out["sbatch_to_running_s"] = percentiles(started["running"])
        out["sbatch_to_script_s"] = percentiles(started["script"])
        phases["sbatch"] = (t, time.time())
        t = time.time()
        with_hook = [back_at_work(cluster, node, partition, as_user, user.home, True) for _ in range(recreations)]
        without = [back_at_work(cluster, node, partition, as_user, user.home, False) for _ in range(recreations)]
        phases["recreations"] = (t, time.time())
        out["worker_deleted_back_at_work_s"] = percentiles(with_hook)
        out["worker_lost_back_at_work_s"] = percentiles(without)
        if changes:
            t = time.time()
            served: list[tuple[float, float]] = []
            try:
                for _ in range(changes):
                    served.append(config_served(cluster, watcher))
            except Exception as exc:  # a roll that never became Ready: kept with the figures so far
                out["config_change_failed"] = f"after {len(served)} of {changes}: {str(exc)[-400:]}"
            phases["changes"] = (t, time.time())
            if served:
                out["config_change_served_s"] = percentiles([s for s, _ in served])
                out["config_change_applied_s"] = percentiles([d for _, d in served])
    finally:
        answers = probe.answers()
        probe.stop()
    out["longest_silence_s"] = {k: longest_silence(answers, a, b) for k, (a, b) in phases.items()}
    out["probes"] = len(answers)
    out["load_after"] = _load()
    return out


def _load() -> str:
    """This machine's load averages (1, 5, 15 minutes), as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def acceptance_markdown(decl: str, image: str, f: dict[str, Any]) -> str:
    """The acceptance figures as table rows."""
    rows = [
        f"| {decl} ({f['pods']} pods, {f['workers']} workers; {image}; load {f['load_before']} -> "
        f"{f['load_after']}) | p50 | p95 | max | n |",
        "|---|---|---|---|---|",
    ]
    labels = {
        "sbatch_to_running_s": "`sbatch` to RUNNING, idle cluster (timed in the pods)",
        "sbatch_to_script_s": "`sbatch` to the job's script started (after the prolog)",
        "worker_deleted_back_at_work_s": "worker pod deleted (preStop) to a job pinned to it RUNNING",
        "worker_lost_back_at_work_s": "worker lost (no preStop) to a job pinned to it RUNNING",
        "config_change_served_s": "config change applied to the new partition served",
        "config_change_applied_s": "config change applied to every rolled pod Ready",
    }
    for key, label in labels.items():
        if key in f:  # none of a kind asked for (--changes 0)
            s = f[key]
            rows.append(f"| {label} | {s['p50']} | {s['p95']} | {s['max']} | {s['n']} |")
    if "config_change_failed" in f:
        rows.append(f"| config change failed {f['config_change_failed']!r} | | | | |")
    silence = f["longest_silence_s"]
    rows.append(
        "| longest controller silence (probe every 0.5 s): "
        + ", ".join(f"{k} {v}" for k, v in silence.items())
        + f" | | | {max(silence.values())} | {f['probes']} |"
    )
    return "\n".join(rows)


def stats(values: list[float]) -> dict[str, float]:
    """Median, min, max and count of samples, in seconds."""
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        "n": len(values),
    }


def markdown(decl: str, image: str, figures: dict[str, object]) -> str:
    """The figures as the README's table rows."""
    rows = [
        f"| figure ({decl}, {figures['pods']} pods, {figures['workers']} workers; {image}) | seconds |",
        "|---|---|",
    ]
    labels = {
        "up_to_all_idle_s": "start to every worker IDLE (a new cluster each time)",
        "sbatch_to_running_s": "`sbatch` to RUNNING, idle cluster",
        "worker_deleted_to_idle_s": "worker pod deleted (preStop) to IDLE again",
        "worker_lost_to_job_running_s": "worker lost without preStop to its next job RUNNING",
        "controller_deleted_to_ping_s": "controller pod deleted to `scontrol ping` UP",
        "prolog_with_health_s": "prolog with the GPU health check, as slurmd runs it",
        "primary_lost_to_backup_in_control_s": "primary controller lost (no preStop) to the backup serving (its log)",
        "primary_lost_to_sbatch_accepted_s": "primary controller lost (no preStop) to `sbatch` accepted by the backup",
        "primary_back_to_both_up_s": "lost primary's pod made again to both controllers UP",
        "state_archive_job_s": "state archive job (`slurmctld-backup`), start to archive written",
        "restore_to_answering_s": "restore drill: new controllers created to the restored jobs answering",
    }
    for key, label in labels.items():
        if key not in figures:
            continue
        s = figures[key]
        assert isinstance(s, dict)
        rows.append(f"| {label}: median of {s['n']} (min-max) | {s['median']} ({s['min']}-{s['max']}) |")
    return "\n".join(rows)


def main() -> int:
    """Run the benchmark; Markdown on stdout."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--declaration", default="local", choices=sorted(DECLARATIONS))
    parser.add_argument("--runs", type=int, default=20, help="sbatch-to-RUNNING samples")
    parser.add_argument("--recoveries", type=int, default=3, help="worker and controller recreations")
    parser.add_argument("--ups", type=int, default=3, help="clusters brought up from nothing")
    parser.add_argument("--prologs", type=int, default=20, help="prolog runs (declarations with GPUs)")
    parser.add_argument("--failovers", type=int, default=10, help="primary controller losses (with a backup)")
    parser.add_argument("--restores", type=int, default=3, help="restore drills (with controller.backup)")
    parser.add_argument(
        "--acceptance",
        action="store_true",
        help="the acceptance figures instead: --runs sbatch, --recreations worker replacements each with and "
        "without preStop, --changes config changes, the controller's longest silence throughout",
    )
    parser.add_argument("--recreations", type=int, default=20, help="with --acceptance: replacements per path")
    parser.add_argument("--changes", type=int, default=10, help="with --acceptance: config changes applied")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    interrupt_on_sigterm()  # a run stopped by a timeout still removes its pods and network (finally below)
    workdir = Path(tempfile.mkdtemp(prefix="slonk-e2e-bench-"))
    podman = Podman(workdir)
    cluster: Cluster | None = None
    try:
        image = build_image(podman, SLURM_VERSION)
        secrets = ClusterSecrets.make(workdir / "keys", ssh_keygen(podman, image.reference, workdir / "keys"))
        rendered = render(args.declaration, image.slurm_version, secrets)
        if args.acceptance:
            cluster = Cluster(podman, rendered, image.reference, secrets)
            up_s = bring_up(cluster)
            found: dict[str, Any] = {"up_to_all_idle_s": round(up_s, 2)}
            found |= acceptance(cluster, args.runs, args.recreations, args.changes)
            print(acceptance_markdown(args.declaration, f"Slurm {image.slurm_version}", found))
            if args.json:
                args.json.write_text(json.dumps(found, indent=2), encoding="utf-8")
            return 0
        ups = []
        for i in range(args.ups):  # the last cluster stays up for the other figures
            cluster = Cluster(podman, rendered, image.reference, secrets)
            ups.append(bring_up(cluster))
            if i < args.ups - 1:
                cluster.down()
        assert cluster is not None
        figures = {
            "up_to_all_idle_s": stats(ups),
            **measure(cluster, args.runs, args.recoveries, args.prologs),
            **controller_figures(cluster, args.failovers, args.restores),
        }
        print(markdown(args.declaration, f"Slurm {image.slurm_version}", figures))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    finally:
        if cluster is not None:
            cluster.down()
        podman.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
