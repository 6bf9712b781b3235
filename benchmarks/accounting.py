"""Benchmark of accounting through slurmdbd: how fast job records reach the database, and how long
``sacct -u USER`` takes over 100,000 job records.

Usage (root, after tools/install-slurm.sh; the repository containing this file is imported)::

    python benchmarks/accounting.py                       # 2,000 jobs, 100,000 records, 5 samples
    python benchmarks/accounting.py --jobs 200 --records 10000 --samples 3   # a quick look

What runs: a real MariaDB and slurmdbd 22.05 and a lab cluster on the host flavor whose slurmctld records
and enforces through it (testing/slurmlab/dbd.py ``accounting_lab``: a two-pool GPU declaration, 6 slurmd,
``AccountingStorageEnforce=associations,limits,qos,safe``), one account applied by the reconciler process.
Nothing is asserted.

Ingest: ``--jobs`` trivial batch jobs (``/bin/true``), submitted as job arrays of at most 1,000 tasks
(MaxArraySize defaults to 1001), 99% by root and 1% by the declared user ``daemon``. Every second the
benchmark counts the rows of the cluster's job table (``<cluster>_job_table``) whose end time is set, i.e.
finished jobs whose record slurmdbd has written. Reported: the wall time from the first submission until
every job's finished record is in the table, records per second over that time, and the peak one-second
rate. This is the rate the whole path sustains here (slurmctld scheduling and ending jobs on the lab's
slurmd, then slurmdbd writing), not slurmdbd alone; on this machine slurmctld is the slower part.

100,000 records: the rows written by the ingest are copied in SQL (``INSERT INTO <cluster>_job_table (every
column but the auto-increment job_db_inx) SELECT ... FROM <cluster>_job_table``) with ``id_job`` moved past
every existing id on each round, until the table holds at least ``--records`` rows. Each copy keeps its
original's user, account, times and state, so the table holds the same mix of users as the ingest (99%
root, 1% daemon). Steps are not copied: ``sacct -X`` (allocations only) is what is timed, so each record is
one output line whatever its steps. Then ``sacct -X -n -P -S 2000-01-01 -E now -u USER`` runs ``--samples``
times for each user; the median wall time and the lines it printed are reported.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing.slurmlab import MEMBER, MEMBER_UID
from testing.slurmlab import AccountingLab as Cluster
from testing.slurmlab import accounting_lab as real_cluster

# One account holding the declared user, so its jobs run under enforcement.
SPEC = {"qos": [], "accounts": [{"name": "research", "fairshare": 1, "users": [MEMBER]}]}

ARRAY_MAX = 1000


def _table(c: Cluster) -> str:
    return f"`{c.cluster}_job_table`"


def finished_rows(c: Cluster) -> int:
    """Rows of the job table with an end time (finished jobs slurmdbd has written)."""
    return int(c.dbd.sql(f"SELECT COUNT(*) FROM slurm_acct_db.{_table(c)} WHERE time_end > 0").strip())


def all_rows(c: Cluster) -> int:
    return int(c.dbd.sql(f"SELECT COUNT(*) FROM slurm_acct_db.{_table(c)}").strip())


def submit(c: Cluster, jobs: int) -> None:
    """``jobs`` trivial jobs as arrays: 1% as the declared user, the rest as root."""
    member = max(1, jobs // 100)
    for first in range(0, jobs - member, ARRAY_MAX):
        last = min(first + ARRAY_MAX, jobs - member) - 1
        c.lab.run(
            ["sbatch", f"--array=0-{last - first}", "--output=/dev/null", "--chdir=/tmp", "--wrap=/bin/true"],
            check=True,
        )
    res = c.sbatch_as(MEMBER_UID, ["--account=research", f"--array=0-{member - 1}"], "#!/bin/sh\n/bin/true\n")
    if res.returncode != 0:
        raise RuntimeError(f"sbatch as {MEMBER}: {res.stderr}")


def ingest(c: Cluster, jobs: int, timeout: float) -> dict[str, float]:
    base = finished_rows(c)
    start = time.monotonic()
    submit(c, jobs)
    samples: list[tuple[float, int]] = [(time.monotonic(), 0)]
    while True:
        time.sleep(1.0)
        done = finished_rows(c) - base
        samples.append((time.monotonic(), done))
        if done >= jobs:
            break
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"only {done} of {jobs} job records after {timeout}s")
    wall = samples[-1][0] - start
    peak = max((b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(samples))
    return {"jobs": jobs, "wall_s": wall, "records_per_s": jobs / wall, "peak_per_s": peak}


def fill(c: Cluster, records: int) -> int:
    """Copies the job table's rows with new job ids until it holds at least ``records`` rows."""
    cols = [
        line.strip()
        for line in c.dbd.sql(
            "SELECT column_name FROM information_schema.columns WHERE table_schema='slurm_acct_db' "
            f"AND table_name='{c.cluster}_job_table' AND column_name <> 'job_db_inx' ORDER BY ordinal_position"
        ).splitlines()
        if line.strip()
    ]
    names = ", ".join(f"`{n}`" for n in cols)
    while (rows := all_rows(c)) < records:
        offset = int(c.dbd.sql(f"SELECT MAX(id_job) FROM slurm_acct_db.{_table(c)}").strip())
        picks = ", ".join(f"`{n}` + {offset}" if n == "id_job" else f"`{n}`" for n in cols)
        limit = records - rows
        c.dbd.sql(
            f"INSERT INTO slurm_acct_db.{_table(c)} ({names}) "
            f"SELECT {picks} FROM slurm_acct_db.{_table(c)} ORDER BY job_db_inx LIMIT {limit}",
            timeout=600,
        )
    return all_rows(c)


def sacct(c: Cluster, user: str, samples: int) -> dict[str, float]:
    times, lines = [], 0
    for _ in range(samples):
        t = time.monotonic()
        res = c.lab.run(
            ["sacct", "-X", "-n", "-P", "-S", "2000-01-01", "-E", "now", "-u", user], check=True, timeout=300
        )
        times.append(time.monotonic() - t)
        lines = len(res.stdout.splitlines())
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "lines": lines}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds the ingest may take")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with real_cluster() as c:
        path = c.write_desired(SPEC)
        res = c.reconciler("--desired", str(path), "--once")
        if res.returncode != 0:
            raise RuntimeError(res.stderr)
        ing = ingest(c, args.jobs, args.timeout)
        t = time.monotonic()
        rows = fill(c, args.records)
        fill_s = time.monotonic() - t
        per_user = {u: sacct(c, u, args.samples) for u in ("root", MEMBER)}
    load_after = os.getloadavg()
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(
        f"load average (1/5/15 min) before: {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
        f"after: {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}"
    )
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| ingest: jobs submitted and finished | {ing['jobs']:.0f} |")
    print(f"| ingest: first submission to last record in the job table | {ing['wall_s']:.1f} s |")
    print(f"| ingest: finished job records per second (mean) | {ing['records_per_s']:.1f} |")
    print(f"| ingest: finished job records per second (peak 1 s) | {ing['peak_per_s']:.1f} |")
    print(f"| job table rows after SQL copies | {rows} (copied in {fill_s:.1f} s) |")
    for user, r in per_user.items():
        print(
            f"| `sacct -X -u {user}` over {rows} records: median of {args.samples} | {r['median_s']:.2f} s "
            f"(min {r['min_s']:.2f}, max {r['max_s']:.2f}; {r['lines']:.0f} lines) |"
        )


if __name__ == "__main__":
    main()
