"""Slurm as a user sees it from the login pod: submit, watch, read output from the shared /home."""

from __future__ import annotations

import re
import shlex
import time

from testing.e2e.cluster import Cluster
from testing.e2e.podman import PodmanError, wait_for

LOGIN = "login-0"


def submit(cluster: Cluster, args: str, script: str, user: str | None = None) -> str:
    """``sbatch ARGS --wrap SCRIPT`` on the login pod; returns the job id."""
    out = cluster.sh(LOGIN, f"sbatch --parsable {args} --wrap {shlex.quote(script)}", user=user)
    return out.strip().split(";")[0]


def job_fields(cluster: Cluster, job: str) -> dict[str, str]:
    """``scontrol show job`` as a dict (empty once slurmctld has forgotten the job)."""
    try:
        proc = cluster.exec(LOGIN, f"scontrol show job -o {job}", timeout=60)
    except PodmanError:  # slurmctld not answering for now: nothing known this time
        return {}
    if proc.returncode != 0:
        return {}
    return dict(re.findall(r"(\w+)=(\S*)", proc.stdout))


def job_state(cluster: Cluster, job: str) -> str:
    """JobState of a job ('' when unknown)."""
    return job_fields(cluster, job).get("JobState", "")


def wait_job(cluster: Cluster, job: str, states: tuple[str, ...], timeout: float, interval: float = 0.5) -> str:
    """Wait until a job reaches one of ``states``; returns the state."""

    last: dict[str, str] = {}

    def check() -> str | None:
        last.clear()
        last.update(job_fields(cluster, job))
        state = last.get("JobState", "")
        return state if state in states else None

    def seen() -> str:
        fields = {k: last[k] for k in ("JobState", "Reason", "NodeList", "Restarts") if k in last}
        return str(fields or "nothing (slurmctld not answering)")

    return str(wait_for(f"job {job} in {'/'.join(states)}", check, timeout, interval=interval, seen=seen))


def wait_done(cluster: Cluster, jobs: list[str], timeout: float) -> dict[str, str]:
    """Wait until every job has ended; returns job -> final state (raises if one did not complete)."""
    final = {
        j: wait_job(cluster, j, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"), timeout)
        for j in jobs
    }
    bad = {j: s for j, s in final.items() if s != "COMPLETED"}
    if bad:
        raise AssertionError(f"jobs did not complete: {bad}")
    return final


def read(cluster: Cluster, path: str, user: str | None = None) -> str:
    """A file's contents, read on the login pod."""
    return cluster.sh(LOGIN, f"cat {shlex.quote(path)}", user=user)


def time_to_running(cluster: Cluster, args: str, script: str, user: str | None = None, timeout: float = 60) -> float:
    """Seconds from sbatch returning to the job being RUNNING (or already done)."""
    job = submit(cluster, args, script, user=user)
    t0 = time.monotonic()
    wait_job(cluster, job, ("RUNNING", "COMPLETING", "COMPLETED"), timeout)
    return time.monotonic() - t0
