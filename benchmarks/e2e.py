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
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a file, this directory and not the checkout is on the path; the harness is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing.e2e import (
    DECLARATIONS,
    SLURM_VERSION,
    Cluster,
    ClusterSecrets,
    Podman,
    build_image,
    failover,
    no_backup_controller,
    no_gpus,
    no_state_backup,
    primary_back_seconds,
    prolog_seconds,
    render,
    restore_drill,
    ssh_keygen,
    submit,
    wait_done,
    wait_for,
    wait_job,
)

POLL = 0.05  # seconds between state polls: the figures' resolution


def bring_up(cluster: Cluster) -> float:
    """Start every pod; seconds until every started worker is IDLE."""
    t0 = time.monotonic()
    cluster.up()
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 300)
    return time.monotonic() - t0


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
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="slonk-e2e-bench-"))
    podman = Podman(workdir)
    cluster: Cluster | None = None
    try:
        image = build_image(podman, SLURM_VERSION)
        secrets = ClusterSecrets.make(workdir / "keys", ssh_keygen(podman, image.reference, workdir / "keys"))
        rendered = render(args.declaration, image.slurm_version, secrets)
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
