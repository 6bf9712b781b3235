"""The scenarios: a researcher's day and an operator's day on the running pods.

Each scenario is a function of a :class:`Cluster` that raises AssertionError (or TimeoutError) on
failure and returns a one-line detail; they run in order on one cluster per declaration, each leaving
the cluster as it found it (all started nodes IDLE).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slonk_infra import vocab
from slonk_infra.plan import WorkerGroup
from slonk_infra.slurm.conf import config_pushed_to_workers, push_config_after_start
from testing.e2e.accounting_scenarios import (
    accounting_ready,
    declaration_changed,
    fair_share,
    jobs_recorded,
    no_account_refused,
    no_in_cluster_accounting,
    no_qos_gpu_limit,
    qos_limit,
    recreated,
)
from testing.e2e.cluster import Cluster
from testing.e2e.controller_scenarios import (
    backup_lost,
    no_backup_controller,
    no_state_backup,
    primary_lost,
    state_restored,
)
from testing.e2e.jobs import LOGIN, read, submit, wait_done, wait_job
from testing.e2e.node_scenarios import (
    cpu_work_on_cpu_nodes,
    gpu_sharing,
    gpu_stops_answering,
    gres_match_hardware,
    health_under_slurmd,
    no_gpus,
    no_mixed_default,
    no_multihost_tpu,
    no_path_fabric,
    tpu_job_env,
    user_added_later,
    user_env_survives,
)
from testing.e2e.podman import wait_for
from testing.e2e.pods import PodOptions
from testing.e2e.stack import rerender

IDLE_TIMEOUT = 180.0
# A rolled pod that takes this long to stop is waiting out its grace period (30 s by default), not stopping.
SLOW_STOP_S = 20.0


@dataclass(frozen=True)
class Scenario:
    """A numbered scenario."""

    number: int
    title: str
    run: Callable[[Cluster], str]
    applies: Callable[[Cluster], str | None] = lambda _: None
    """Why the scenario does not apply to a cluster (a declaration without the feature), or None."""


def all_idle(cluster: Cluster, timeout: float = IDLE_TIMEOUT) -> dict[str, str]:
    """Wait until every running worker is idle; returns the states."""
    return cluster.wait_states({n: "idle" for n in cluster.workers()}, timeout)


def cluster_up(cluster: Cluster) -> str:
    """1. Every pod starts from the rendered manifests; started nodes IDLE, the others FUTURE."""
    t0 = time.monotonic()
    started_s = cluster.up()
    states = all_idle(cluster)
    idle_s = time.monotonic() - t0
    started = set(cluster.workers())
    records = set(states)
    future = records - started
    wrong = {n: s for n, s in states.items() if n in future and s != "future"}
    if wrong:
        raise AssertionError(f"nodes without a pod should be FUTURE: {wrong}")
    missing = started - records
    if missing:
        raise AssertionError(f"pods with no Slurm node record: {sorted(missing)}")
    # slonk-health ran in every worker pod (at boot, from the entrypoint) and published its verdict on the node.
    verdicts = wait_for("slonk-health verdicts on every node", lambda: _verdicts(cluster, started), 60, interval=1.0)
    # With enforced accounting no job runs before the reconciler's first pass has made slurmdbd hold the users.
    accounts = ""
    if no_in_cluster_accounting(cluster) is None:
        accounting_ready(cluster)
        accounts = f"; accounts ready {time.monotonic() - t0:.1f}s after start"
    return (
        f"{len(cluster.pods)} pods started in {started_s:.1f}s; {len(started)} nodes IDLE, "
        f"{len(future)} FUTURE; start to all IDLE {idle_s:.1f}s; slonk-health verdicts: {verdicts}{accounts}"
    )


def _verdicts(cluster: Cluster, nodes: set[str]) -> str | None:
    out = cluster.exec(LOGIN, "scontrol show nodes -o", timeout=60).stdout
    ok = {m[0] for m in re.findall(r"NodeName=(\S+) .*Comment=(\{\S*\"schema\":\"slonk-health/v1\")", out)}
    return f"{len(ok)}/{len(nodes)} published" if nodes <= ok else None


def researcher(cluster: Cluster) -> tuple[str, str]:
    """The first declared user, as ``uid:gid`` for podman exec (the name is not in the image's
    /etc/passwd, only in the users Secret), and their home directory."""
    user = cluster.rendered.plan.declaration.users[0]
    return f"{user.uid}:{user.primary_gid}", user.home


def researcher_day(cluster: Cluster, gpus_per_node: int = 0) -> str:
    """2. A declared user logs in with SSH (their declared key), has the same UID/GID on login, workers and
    controller, writes to /home, runs a 2-node batch job, an array and an interactive srun, reads the
    output from /home; sudo only for the user declared with it.

    With ``gpus_per_node``, every job of the day asks for that many GPUs on each of its nodes."""
    users = cluster.rendered.plan.declaration.users
    gpus = f" --gpus-per-node={gpus_per_node}" if gpus_per_node else ""
    alice = users[0]
    n = len(cluster.workers())
    t0 = time.monotonic()
    ident = cluster.ssh(alice.name, "id -u; id -g; id -un; hostname").split()
    login_s = time.monotonic() - t0
    want = [str(alice.uid), str(alice.primary_gid), alice.name]
    if ident[:3] != want or ident[3] != "login-0":
        raise AssertionError(f"{alice.name} on login: {ident}, want {want} on login-0")
    on_workers = cluster.ssh(
        alice.name, f"srun -N{n}{gpus} --ntasks-per-node=1 sh -c 'echo $(hostname) $(id -u) $(id -g)'"
    )
    seen = {line.split()[0]: line.split()[1:] for line in on_workers.splitlines() if line.strip()}
    if set(seen) != set(cluster.workers()) or any(v != want[:2] for v in seen.values()):
        raise AssertionError(f"{alice.name} on the workers: {seen}, want {want[:2]} on {cluster.workers()}")
    ctl = cluster.sh("slurmctld-0", f"id -u {alice.name}; id -g {alice.name}").split()
    if ctl != want[:2]:
        raise AssertionError(f"{alice.name} on the controller (non-root slurmctld): {ctl}, want {want[:2]}")
    mode = cluster.ssh(alice.name, "echo hello > ~/hello.txt && stat -c '%u %g %a' ~ ~/hello.txt").split()
    if mode[:3] != [str(alice.uid), str(alice.primary_gid), "700"] or mode[3:5] != want[:2]:
        raise AssertionError(f"home and file ownership: {mode}")
    batch = cluster.ssh(alice.name, f"sbatch --parsable -N2{gpus} -o two-%j.out --wrap 'srun hostname | sort'").strip()
    array = cluster.ssh(
        alice.name,
        f"sbatch --parsable --array=1-4{gpus} -o arr-%A_%a.out --wrap 'echo task $SLURM_ARRAY_TASK_ID $(id -un)'",
    ).strip()
    interactive = cluster.ssh(alice.name, f"srun -N2{gpus} hostname | sort").split()
    if len(set(interactive)) != 2:
        raise AssertionError(f"interactive srun -N2 ran on {interactive}")
    wait_done(cluster, [batch, *(f"{array}_{i}" for i in range(1, 5))], 180)
    two = cluster.ssh(alice.name, f"cat ~/two-{batch}.out").split()
    tasks = cluster.ssh(alice.name, f"cat ~/arr-{array}_*.out").splitlines()
    if len(set(two)) != 2 or sorted(tasks) != [f"task {i} {alice.name}" for i in range(1, 5)]:
        raise AssertionError(f"outputs in /home: 2-node job {two}, array {tasks}")
    # The array's tasks start and end together on one node: their prologs and epilogs (the health
    # check) run side by side, and one that trips over another drains the node ("Epilog error").
    all_idle(cluster, 30)
    sudo = [u for u in users if u.sudo]
    sudo_note = "no user declared with sudo"
    if cluster.exec(LOGIN, "command -v sudo").returncode == 0:
        if cluster.ssh(alice.name, "sudo -n true 2>/dev/null && echo yes || echo no").strip() != (
            "yes" if alice.sudo else "no"
        ):
            raise AssertionError(f"sudo for {alice.name} (declared sudo: {alice.sudo}) is not as declared")
        if sudo:
            root = cluster.ssh(sudo[0].name, "sudo -n id -u").strip()
            if root != "0":
                raise AssertionError(f"{sudo[0].name} declared with sudo gets uid {root} from sudo")
            sudo_note = f"sudo: {sudo[0].name} yes, {alice.name} {'yes' if alice.sudo else 'no'}"
    return (
        f"{alice.name} ({alice.uid}:{alice.primary_gid}) in by SSH key in {login_s:.1f}s, same ids on login, "
        f"{n} workers and the controller; jobs {batch} (2 nodes), {array}_[1-4], srun -N2 on {' '.join(interactive)}; "
        f"outputs read from /home; {sudo_note}" + (f"; each job with {gpus_per_node} GPUs per node" if gpus else "")
    )


def worker_recreated(cluster: Cluster) -> str:
    """3. A worker pod deleted comes back on a new IP; the node returns to IDLE by itself and runs the
    job queued for it meanwhile."""
    user, home = researcher(cluster)
    node = cluster.workers()[0]
    old_ip = cluster.pods[node].ip
    t0 = time.monotonic()
    deleted, _ = cluster.delete_pod(node, recreate=False)
    job = submit(cluster, f"-w {node} -o {home}/s3-%j.out", "hostname", user=user)
    state = wait_job(cluster, job, ("PENDING",), 30)
    pod = cluster.recreate(node)
    if pod.ip == old_ip:
        raise AssertionError(f"{node} came back on its old IP {old_ip}; the test proves nothing")
    cluster.wait_states({node: "idle"}, IDLE_TIMEOUT)
    idle_s = time.monotonic() - t0
    wait_done(cluster, [job], 120)
    ran_on = read(cluster, f"{home}/s3-{job}.out", user=user).strip()
    if ran_on != node:
        raise AssertionError(f"job {job} ran on {ran_on!r}, not on the recreated {node}")
    all_idle(cluster)
    lost = node_lost(cluster, user, home)
    return (
        f"deleted: {node} {old_ip} -> {pod.ip}; preStop {deleted.prestop_s:.1f}s; job {job} {state} meanwhile, "
        f"then ran on {node}; delete to IDLE {idle_s:.1f}s. {lost}"
    )


def node_lost(cluster: Cluster, user: str | None, home: str) -> str:
    """A worker slurmctld has talked to vanishes without its preStop (node lost, OOM kill): the replacement
    pod, on a new IP, must be reachable without anyone touching Slurm."""
    node = cluster.workers()[-1]
    first = submit(cluster, f"-w {node} -o {home}/s3-%j.out", "hostname", user=user)
    wait_done(cluster, [first], 60)
    pod = cluster.lose(node)
    t0 = time.monotonic()
    new = cluster.recreate(node)
    job = submit(cluster, f"-w {node} -o {home}/s3-%j.out", "hostname", user=user)
    wait_done(cluster, [job], 90)
    ran_s = time.monotonic() - t0
    ran_on = read(cluster, f"{home}/s3-{job}.out", user=user).strip()
    if ran_on != node:
        raise AssertionError(f"job {job} ran on {ran_on!r}, not on the replaced {node}")
    states = all_idle(cluster)
    return f"lost: {node} {pod.ip} -> {new.ip} without preStop, job {job} ran there {ran_s:.1f}s later ({states[node]})"


def controller_recreated(cluster: Cluster) -> str:
    """4. The controller pod deleted while a job runs and others queue: every job is kept and finishes."""
    user, home = researcher(cluster)
    node = cluster.workers()[0]
    running = submit(cluster, f"-w {node} --exclusive -o {home}/s4-%j.out", "sleep 20; echo finished", user=user)
    wait_job(cluster, running, ("RUNNING",), 60)
    queued = [
        submit(cluster, f"-w {node} --exclusive -o {home}/s4-%j.out", "echo finished", user=user) for _ in range(3)
    ]
    pending = {j: wait_job(cluster, j, ("PENDING",), 30) for j in queued}
    t0 = time.monotonic()
    cluster.delete_pod("slurmctld-0")
    wait_for("slurmctld answering", cluster.controller_answers, 120)
    back_s = time.monotonic() - t0
    states = {
        j: wait_job(cluster, j, ("RUNNING", "PENDING", "COMPLETING", "COMPLETED"), 30) for j in [running, *queued]
    }
    wait_done(cluster, [running, *queued], 180)
    # A step that talks to slurmctld while its pod is away logs the failed lookups into the job's output;
    # what counts is that every job ran to its end.
    outputs = {j: read(cluster, f"{home}/s4-{j}.out", user=user) for j in [running, *queued]}
    missing = {j: o for j, o in outputs.items() if "finished" not in o.splitlines()}
    if missing:
        raise AssertionError(f"job output wrong or missing: {missing}")
    all_idle(cluster)
    return (
        f"job {running} RUNNING and {len(pending)} PENDING across the restart ({states}); controller back "
        f"in {back_s:.1f}s; all {1 + len(queued)} completed"
    )


def with_partition(cluster: Cluster, name: str) -> Callable[[dict[str, Any]], None]:
    """A declaration edit adding partition ``name`` over the first worker group (for :func:`rerender`)."""
    plan = cluster.rendered.plan
    first = plan.groups[0].name

    def mutate(raw: dict[str, Any]) -> None:
        parts = [
            {"name": p.name, "pools": list(p.groups), "priorityTier": p.priority_tier, "default": p.default,
             "maxTime": p.max_time, **({"preemptMode": p.preempt_mode} if p.preempt_mode else {})}
            for p in plan.partitions
        ]  # fmt: skip
        raw.setdefault("slurm", {})["partitions"] = [*parts, {"name": name, "pools": [first]}]

    return mutate


# Where a configless slurmd keeps the files it fetched: under its spool directory, linked from
# /run/slurm/conf (seen so on 22.05 and 26.05).
CONFIGLESS_CACHE = f"/run/slurm/conf/slurm.conf 2>/dev/null || cat {vocab.SLURMD_SPOOL}/conf-cache/slurm.conf"
# From 25.11 the restarted slurmctld pushes at once; before 23.11 push-config.sh resumes the idle workers
# 22.05 left FUTURE and then waits for the node records to settle (45 s).
PUSH_WAIT_S = 150


def workers_back_after_restart(cluster: Cluster, workers: list[str], t0: float) -> str:
    """Before 23.11: every worker registered again within seconds of the controller's restart, and
    push-config.sh looked for FUTURE workers to resume; a line for the scenario's report."""

    # 22.05 returned the idle workers to FUTURE at the restart and refuses jobs that need them until
    # they register again: push-config.sh resumes those whose slurmd answers about 2 s after the
    # restart, where the workers' own rejoin loop (every 30 s) would bring them back at any time.
    # Registered means listed and answering (no "*" after the state).
    def registered() -> bool:
        states = dict(line.split() for line in cluster.exec(LOGIN, "sinfo -h -N -o '%N %t'").stdout.splitlines())
        return all(w in states and not states[w].endswith("*") for w in workers)

    wait_for("every worker registered again after the controller's restart", registered, 4)
    back = f"; every worker registered again {time.monotonic() - t0:.1f}s after apply"
    # ...and push-config.sh looked for them: in this tier the rejoin loop's 30-s phase often lands right
    # after the restart too, so the timing alone would not tell the two apart. (A worker its rejoin loop
    # registered first is no longer FUTURE there, so the line need not name every worker.)
    log = cluster.logs(cluster.controller().name, tail=2000)
    said = [line for line in log.splitlines() if "slonk push-config: resume:" in line]
    if not said:
        raise AssertionError("push-config.sh did not look for FUTURE workers to resume (no 'resume:' line)")
    return back + f" ({said[-1].split('slonk push-config: ')[-1]})"


def config_change(cluster: Cluster) -> str:
    """5. A partition added: workers keep running (OnDelete, configless); slurmctld gets the new file."""
    user, home = researcher(cluster)
    workers = cluster.workers()
    before = {w: (cluster.started_at(w), cluster.restarts(w)) for w in workers}
    name = f"added{secrets.token_hex(2)}"
    new = rerender(cluster.rendered, cluster.secrets, with_partition(cluster, name))
    # A backup taking control reads its files again through SLURM_CONF alone (src/slurmctld/backup.c,
    # slurm_conf_reinit(NULL)), and every daemon finds gres.conf, cgroup.conf and the topology beside it:
    # each slurmctld's own environment must name the copy, not the mounted files. Read before the
    # reconfigure: 26.05's slurmctld restarts in a new process then, with the same environment, but its
    # /proc/PID/environ reads empty.
    pinned = f"SLURM_CONF={vocab.PINNED_CONF_DIR}/slurm.conf"
    for ctl in cluster.controllers():
        env = cluster.sh(ctl, "for p in $(pgrep -x slurmctld); do tr '\\0' '\\n' </proc/$p/environ; done")
        if pinned not in env.splitlines():
            raise AssertionError(f"{ctl}: slurmctld's environment lacks {pinned}: {sorted(env.splitlines())}")
    # kubelet writes a changed ConfigMap into running pods within about a minute, before their roll or
    # without one, and slurmctld reads its files again on a reconfigure (and a backup when it takes
    # control). A controller runs the config its pod was made with (slurmctld.sh), so nothing serves the
    # partition before the roll.
    cluster.refresh_volumes(new)
    cluster.sh(cluster.controller().name, f"SLURM_CONF={vocab.SELF_CONF} scontrol reconfigure")
    wait_for("slurmctld answering after a reconfigure", cluster.controller_answers, 120)
    if name in cluster.exec(LOGIN, "sinfo -h -o %P").stdout.split():
        raise AssertionError(f"partition {name} served after a reconfigure, before the controller was rolled")
    t0 = time.monotonic()
    result = cluster.apply(new)
    wait_for("slurmctld answering", cluster.controller_answers, 120)
    wait_for(f"partition {name}", lambda: name in cluster.exec(LOGIN, "sinfo -h -o %P").stdout, 60)
    seen_s = time.monotonic() - t0
    back = workers_back_after_restart(cluster, workers, t0) if push_config_after_start(cluster.rendered.plan) else ""
    job = submit(cluster, f"-p {name} -o {home}/s5-%j.out", "hostname", user=user)
    wait_done(cluster, [job], 120)
    # slurmd reads the files it fetched (prolog, health check, GRES): the restarted controller pushes the
    # new ones to every running worker, else slurmctld logs "appears to have a different slurm.conf".
    pushed = {}
    for w in workers if config_pushed_to_workers(cluster.rendered.plan) else []:
        wait_for(
            f"{w}: the new slurm.conf pushed to its slurmd",
            lambda w=w: f"PartitionName={name} " in cluster.exec(w, f"cat {CONFIGLESS_CACHE}").stdout,
            PUSH_WAIT_S,
        )
        pushed[w] = round(time.monotonic() - t0, 1)
    after = {w: (cluster.started_at(w), cluster.restarts(w)) for w in workers}
    touched = [w for w in workers if before[w] != after[w]]
    if touched:
        raise AssertionError(f"workers restarted by a config change: {touched}")
    if "slurmctld-0" not in result.replaced:
        raise AssertionError(f"the controller was not rolled (replaced: {result.replaced})")
    # slurmrestd reads slurm.conf only when it starts; slurmdbd never reads it (its reconciler's sacctmgr
    # reads it at every call), so its pod stays.
    for dep in [d for d in cluster.rendered.deployments() if d["metadata"]["name"] == vocab.RESTAPI]:
        if not any(p.startswith(f"{dep['metadata']['name']}-") for p in result.replaced):
            raise AssertionError(f"{dep['metadata']['name']} was not rolled (replaced: {result.replaced})")
    # A pod whose main process ignores SIGTERM waits out its grace period on every roll (slurmrestd as PID 1 did).
    slow = {p: round(s, 1) for p, s in result.stop_seconds.items() if s >= SLOW_STOP_S}
    if slow:
        raise AssertionError(f"pods that took {SLOW_STOP_S:.0f}s or more to stop on a roll: {slow}")
    # The login pods were replaced too: SSH still trusts them (the host key is the Secret's, not the pod's).
    cluster.ssh(cluster.rendered.plan.declaration.users[0].name, "true")
    all_idle(cluster)
    return (
        f"partition {name} served {seen_s:.1f}s after apply (rolled: {', '.join(result.replaced)}; stopped in "
        f"{max(result.stop_seconds.values(), default=0):.1f}s at most); "
        f"job {job} ran in it; {len(workers)} workers untouched, "
        + (
            f"their slurmd given the new slurm.conf {max(pushed.values(), default=0):.1f}s after apply at most"
            if pushed
            else "not given the new files (no push from 23.11 to 25.05: docs/node-lifecycle.md)"
        )
        + back
        + "; SSH host key unchanged"
    )


def _scalable(group: WorkerGroup) -> bool:
    """A pool of two nodes or more (a TPU slice grows and shrinks by whole slices, not by hosts)."""
    return group.kind != "tpu" and group.replicas >= 2


def _no_scalable_pool(cluster: Cluster) -> str | None:
    return None if any(_scalable(g) for g in cluster.rendered.plan.groups) else "no pool of two nodes or more"


def scale_down_up(cluster: Cluster) -> str:
    """6. A pool scaled down then up by replicas: the leaving node is drained first (its job finishes),
    no DOWN record is left, the node comes back IDLE."""
    user, home = researcher(cluster)
    group = next(g for g in cluster.rendered.plan.groups if _scalable(g))
    node = f"{group.name}-{group.replicas - 1}"
    job = submit(cluster, f"-w {node} -o {home}/s6-%j.out", "sleep 12; echo finished", user=user)
    wait_job(cluster, job, ("RUNNING",), 60)
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # the leaving node's states while its pod terminates
        while not stop.is_set():
            state = cluster.node_states().get(node, "?")
            if not seen or seen[-1] != state:
                seen.append(state)
            time.sleep(0.5)

    def resize(n: int) -> Callable[[dict[str, Any]], None]:
        def mutate(raw: dict[str, Any]) -> None:
            pool = next(p for p in raw["pools"] if p["name"] == group.name)
            pool["nodes"] = n
            pool.setdefault("maxNodes", group.slurm_nodes)

        return mutate

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    down = cluster.apply(rerender(cluster.rendered, cluster.secrets, resize(group.replicas - 1)))
    down_s = time.monotonic() - t0
    stop.set()
    watcher.join()
    if node not in down.deleted:
        raise AssertionError(f"{node} was not removed (deleted: {down.deleted})")
    wait_done(cluster, [job], 60)
    if read(cluster, f"{home}/s6-{job}.out", user=user).strip() != "finished":
        raise AssertionError(f"job {job} on the leaving node did not finish")
    if not any(s.startswith("drain") for s in seen):
        raise AssertionError(f"{node} was never DRAINING while its pod terminated (seen: {seen})")
    states = cluster.node_states()
    dead = {n: s for n, s in states.items() if s.startswith(("down", "drain", "fail", "unk"))}
    if states.get(node) != "future" or dead:
        raise AssertionError(f"after scale-down {node} is {states.get(node)!r}; stale records: {dead}")
    t1 = time.monotonic()
    up = cluster.apply(rerender(cluster.rendered, cluster.secrets, resize(group.replicas)))
    cluster.wait_states({node: "idle"}, IDLE_TIMEOUT)
    all_idle(cluster)
    return (
        f"{node}: {' -> '.join(seen)} while leaving, job {job} finished, then FUTURE "
        f"(scale-down {down_s:.1f}s); back IDLE {time.monotonic() - t1:.1f}s after scale-up ({up.created})"
    )


def wrong_munge_key(cluster: Cluster) -> str:
    """7. A worker given a wrong munge key stays out of the cluster and its log says why."""
    node = cluster.workers()[-1]
    cluster.delete_pod(node, recreate=False)
    cluster.options[node] = PodOptions(
        secret_overrides={vocab.MUNGE_SECRET: {vocab.MUNGE_KEY_FILE: secrets.token_bytes(1024)}}
    )
    cluster.recreate(node)
    t0 = time.monotonic()

    def why() -> str | None:
        state = cluster.node_states().get(node, "")
        if state.startswith(("idle", "mix", "alloc")):
            raise AssertionError(f"{node} with a wrong munge key is {state}")
        lines = cluster.logs(node).splitlines()
        explicit = [ln for ln in lines if "munge key" in ln]
        return next(iter(explicit or [ln for ln in lines if "authentication" in ln.lower()]), None)

    # A rejected request may take slurmctld's MessageTimeout to fail, so the reason can take that long.
    reason = str(wait_for(f"{node}'s log saying why it is out", why, 120, interval=2.0))
    state = cluster.node_states().get(node, "")
    out_s = time.monotonic() - t0
    cluster.delete_pod(node, recreate=False)
    del cluster.options[node]
    cluster.recreate(node)
    cluster.wait_states({node: "idle"}, IDLE_TIMEOUT)
    return (
        f"{node} stayed {state or 'unlisted'}; its log after {out_s:.0f}s: {reason.strip()[:220]}; "
        "with the right key IDLE again"
    )


# Runs on the login pod as the researcher (stdlib only): the calls a client of the REST API makes, and two
# it must not get through (no token; a token presented under another user's name). Prints one JSON object.
REST_CLIENT = r"""
import json, re, sys, urllib.error, urllib.request
base, token, user, other, home = sys.argv[1:6]
def call(method, path, body=None, name=user, tok=token):
    headers = {"Content-Type": "application/json"}
    if tok:
        headers["X-SLURM-USER-TOKEN"] = tok
    if name:
        headers["X-SLURM-USER-NAME"] = name
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return [r.status, json.loads(r.read() or b"{}")]
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return [e.code, json.loads(raw)]
        except ValueError:
            return [e.code, {"raw": raw.decode(errors="replace")[:300]}]
status, spec = call("GET", "/openapi/v3")
found = re.findall(r"/slurm/v0\.0\.(\d+)/ping", " ".join(spec.get("paths", {})))
v = max(int(x) for x in found)
api = f"/slurm/v0.0.{v}"
script = "#!/bin/sh\necho $(id -un) $(id -u) $(hostname)\n"
job = {"name": "rest", "current_working_directory": home, "standard_output": f"{home}/rest-%j.out",
       "environment": ["PATH=/usr/bin:/bin"]}
print(json.dumps({
    "openapi": status, "version": v,
    "ping": call("GET", api + "/ping"),
    "nodes": call("GET", api + "/nodes"),
    "submit": call("POST", api + "/job/submit", {"script": script, "job": job}),
    "no_token": call("GET", api + "/nodes", name=None, tok=None)[0],
    "as_other": call("GET", api + "/nodes", name=other),
}))
"""


def _no_rest_api(cluster: Cluster) -> str | None:
    return None if cluster.rendered.plan.declaration.slurm.rest_api else "the declaration has slurm.restApi off"


def rest_api(cluster: Cluster) -> str:
    """8. slurmrestd, as rendered (its own user, JWT auth, no munge): a researcher's token from
    ``scontrol token`` reads the cluster and submits a job that runs as them; no token, or the token under
    another user's name, gets nothing."""
    pod = cluster.rest_api()
    if pod is None:
        raise AssertionError("slurm.restApi is declared but no slurmrestd pod was rendered and started")
    ready_s = cluster.runner.wait_ready(pod)
    users = cluster.rendered.plan.declaration.users
    alice, other = users[0], users[1] if len(users) > 1 else users[0]
    t0 = time.monotonic()
    token = cluster.ssh(alice.name, "scontrol token lifespan=600").strip()
    if not token.startswith("SLURM_JWT="):
        raise AssertionError(f"scontrol token for {alice.name}: {token!r}")
    service = f"http://{vocab.RESTAPI}.{cluster.rendered.plan.namespace}.svc.cluster.local:{vocab.SLURMRESTD_PORT}"
    client = base64.b64encode(REST_CLIENT.encode()).decode()
    args = " ".join(shlex.quote(a) for a in (service, token.split("=", 1)[1], alice.name, other.name, alice.home))
    raw = cluster.ssh(alice.name, f"echo {client} | base64 -d | python3 - {args}")
    out = json.loads(raw.strip().splitlines()[-1])
    if out["openapi"] != 200 or out["ping"][0] != 200:
        raise AssertionError(f"slurmrestd: openapi {out['openapi']}, ping {out['ping']}")
    pings = out["ping"][1].get("pings", [])
    if not pings or not all(p.get("pinged") == "UP" or p.get("responding") for p in pings):
        raise AssertionError(f"ping through slurmrestd: {pings}")
    code, body = out["nodes"]
    listed = {n["name"]: "+".join(n.get("state", [])).lower() for n in body.get("nodes", [])}
    missing = [n for n in cluster.workers() if not listed.get(n, "").startswith("idle")]
    if code != 200 or missing:
        raise AssertionError(f"GET nodes: HTTP {code}; workers not listed IDLE: {missing} (listed {listed})")
    code, body = out["submit"]
    job = str(body.get("job_id", ""))
    if code != 200 or not job:
        raise AssertionError(f"POST job/submit: HTTP {code}: {body.get('errors') or body}")
    wait_done(cluster, [job], 120)
    ran = cluster.ssh(alice.name, f"cat ~/rest-{job}.out").split()
    if ran[:2] != [alice.name, str(alice.uid)] or (ran[2:] and ran[2] not in cluster.workers()):
        raise AssertionError(f"job {job} submitted through slurmrestd ran as {ran}, want {alice.name} on a worker")
    denied_code, denied = out["as_other"]
    why = "; ".join(str(e.get("description") or e.get("error")) for e in denied.get("errors", []))[:120]
    if out["no_token"] < 400 or (other.name != alice.name and denied_code < 400):
        raise AssertionError(
            f"slurmrestd let in a request without a token (HTTP {out['no_token']}) or {alice.name}'s token "
            f"as {other.name} (HTTP {denied_code})"
        )
    return (
        f"{pod.name} ready {ready_s:.1f}s; v0.0.{out['version']}: ping UP, {len(listed)} nodes listed, "
        f"job {job} submitted by {alice.name}'s JWT ran as {' '.join(ran)} ({time.monotonic() - t0:.1f}s); "
        f"no token -> HTTP {out['no_token']}, {alice.name}'s token as {other.name} -> HTTP {denied_code} ({why})"
    )


SCENARIOS = [
    Scenario(1, "cluster up", cluster_up),
    Scenario(2, "a researcher's day", researcher_day),
    Scenario(3, "worker pod recreated", worker_recreated),
    Scenario(4, "controller pod recreated", controller_recreated),
    Scenario(5, "config change", config_change),
    Scenario(6, "scale down and up", scale_down_up, _no_scalable_pool),
    Scenario(7, "wrong munge key", wrong_munge_key),
    Scenario(8, "the REST API", rest_api, _no_rest_api),
    Scenario(9, "health checks under slurmd", health_under_slurmd, no_gpus),
    Scenario(10, "GPU sharing", gpu_sharing, no_gpus),
    Scenario(11, "the user's environment survives", user_env_survives, no_path_fabric),
    Scenario(12, "a multi-host TPU job", tpu_job_env, no_multihost_tpu),
    Scenario(13, "GRES agree with the hardware", gres_match_hardware, no_gpus),
    Scenario(14, "a user declared later", user_added_later),
    Scenario(15, "CPU work takes CPU nodes", cpu_work_on_cpu_nodes, no_mixed_default),
    Scenario(16, "the primary controller lost", primary_lost, no_backup_controller),
    Scenario(17, "the backup controller lost", backup_lost, no_backup_controller),
    Scenario(18, "controller state restored from an archive", state_restored, no_state_backup),
    Scenario(19, "every job recorded in accounting", jobs_recorded, no_in_cluster_accounting),
    Scenario(20, "a user in no account refused", no_account_refused, no_in_cluster_accounting),
    Scenario(21, "a QOS GPU limit holds a job", qos_limit, no_qos_gpu_limit),
    Scenario(22, "fair share orders the queue", fair_share, no_in_cluster_accounting),
    Scenario(23, "accounting pods recreated", recreated, no_in_cluster_accounting),
    Scenario(24, "a declaration change reconciled", declaration_changed, no_in_cluster_accounting),
    Scenario(25, "a GPU that stops answering is drained", gpu_stops_answering, no_gpus),
]
