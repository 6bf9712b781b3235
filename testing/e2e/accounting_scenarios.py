"""Accounting scenarios: MariaDB, slurmdbd and the reconciler as pods, slurmctld recording and enforcing
through them (``slurm.accounting.database.kind: in-cluster``; testing/e2e/Pulumi.accounting.yaml).

Each scenario first waits for the reconciler to have made slurmdbd hold the declared associations and for
slurmctld to know them (a fresh cluster has an empty database: the reconciler's first pass adds the
cluster, the QOS, the accounts and the users). Evidence on failure is what Slurm shows: ``sacct``,
``sacctmgr``, ``sshare``/``sprio`` and the slurmdbd pod's log.
"""

from __future__ import annotations

import re
import time
from typing import Any

from slonk_infra import vocab
from slonk_infra.declaration.accounting import AccountingSpec
from slonk_infra.declaration.users import UserSpec
from testing.e2e.cluster import Cluster
from testing.e2e.jobs import LOGIN, job_fields, submit, wait_done, wait_job
from testing.e2e.podman import PodmanError, wait_for
from testing.e2e.stack import rerender

READY_TIMEOUT = 300.0
# What slurmctld answers a user slurmdbd holds no association for (measured against 22.05 in
# tests/accounting/test_runner_slurmdbd.py; the same text in 26.05's slurm_errno.c, ESLURM_INVALID_ACCOUNT).
NO_ACCOUNT = "Batch job submission failed: Invalid account or account/partition combination specified"
# A user slurmdbd holds no association for: the image's own `nobody` (every pod resolves it; a declared user
# in no account is refused by the declaration's validation, so none can be declared).
NOBODY = "65534:65534"
# The reason a job waits with while its user holds a QOS's MaxTRESPerUser of GPUs (WAIT_QOS_MAX_GRES_PER_USER:
# https://slurm.schedmd.com/job_reason_codes.html lists the QOSMax* reasons; the exact string is in the
# libslurmfull.so of Slurm 22.05 and 26.05, and tests/accounting/test_runner_slurmdbd.py sees it from 22.05).
QOS_GPU_REASON = "QOSMaxGRESPerUser"


def no_in_cluster_accounting(cluster: Cluster) -> str | None:
    """Why the accounting scenarios do not apply (no in-cluster database declared), or None."""
    accounting = cluster.rendered.plan.declaration.slurm.accounting
    if accounting is None or accounting.database.kind != "in-cluster":
        return "no slurm.accounting with database.kind in-cluster"
    return None


def no_qos_gpu_limit(cluster: Cluster) -> str | None:
    """Why scenario 21 does not apply (no in-cluster accounting, or no QOS with ``maxGpusPerUser``), or None."""
    why = no_in_cluster_accounting(cluster)
    if why is None and not any(q.max_gpus_per_user for q in _spec(cluster).qos):
        why = "no QOS with maxGpusPerUser declared"
    return why


# ------------------------------------------------------------------------------------------------ helpers
def _spec(cluster: Cluster) -> AccountingSpec:
    accounting = cluster.rendered.plan.declaration.slurm.accounting
    assert accounting is not None
    return accounting


def _users(cluster: Cluster) -> list[UserSpec]:
    return list(cluster.rendered.plan.declaration.users)


def _ids(user: UserSpec) -> str:
    """``uid:gid`` for podman exec (the name is in the users Secret, not the image's /etc/passwd)."""
    return f"{user.uid}:{user.primary_gid}"


def default_account(cluster: Cluster, user: str) -> str:
    """The user's default account: the first declared account listing them."""
    return next(a.name for a in _spec(cluster).accounts if user in a.users)


def _root(cluster: Cluster, script: str, timeout: float = 60) -> str:
    """A command as root on the login pod (root is a Slurm administrator); its stdout, raising on failure."""
    return cluster.sh(LOGIN, script, timeout=timeout)


def sacctmgr(cluster: Cluster, what: str) -> list[list[str]]:
    """``sacctmgr -P -n show WHAT`` rows (fields split on ``|``)."""
    out = _root(cluster, f"sacctmgr -P -n show {what}")
    return [line.split("|") for line in out.splitlines() if line.strip()]


def sacct(cluster: Cluster, since: str, extra: str = "") -> list[dict[str, str]]:
    """Every job allocation slurmdbd holds since ``since`` (all users), one dict per job."""
    fields = ["JobID", "User", "Account", "State", "QOS", "NNodes", "AllocTRES", "Start", "End"]
    out = _root(cluster, f"sacct -a -X -n -P -S {since} -E now {extra} -o {','.join(fields)}")
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines() if line.strip()]


def _now(cluster: Cluster) -> str:
    """The pods' clock (the time sacct compares with), as sacct takes it."""
    return _root(cluster, "date +%Y-%m-%dT%H:%M:%S").strip()


def dbd_pod(cluster: Cluster) -> str:
    """The running slurmdbd pod's name (a Deployment's: a new one each recreation)."""
    pods = cluster.deployment_pods(vocab.SLURMDBD)
    if len(pods) != 1:
        raise AssertionError(f"slurmdbd pods running: {[p.name for p in pods]}, want one")
    return pods[0].name


def _dbd_log(cluster: Cluster, container: str = "slurmdbd", tail: int = 15) -> str:
    try:
        text = cluster.logs(dbd_pod(cluster), container, tail=tail).strip()
    except (AssertionError, PodmanError) as exc:
        text = f"({exc})"
    return f"\n    --- slurmdbd {container} log:\n      " + text.replace("\n", "\n      ")


def _declared_pairs(cluster: Cluster) -> set[tuple[str, str]]:
    return {(a.name, u) for a in _spec(cluster).accounts for u in a.users}


def accounting_ready(cluster: Cluster, timeout: float = READY_TIMEOUT) -> float:
    """Wait until slurmdbd holds every declared user's association and slurmctld knows them (its
    association manager lists them); returns the seconds waited."""
    t0 = time.monotonic()
    want = _declared_pairs(cluster)
    last: dict[str, Any] = {}

    def check() -> bool:
        try:
            rows = sacctmgr(cluster, "assoc format=Account,User")
            last["slurmdbd"] = sorted((r[0], r[1]) for r in rows if r[1])
            if not want <= set(last["slurmdbd"]):
                return False
            out = cluster.exec(LOGIN, "scontrol show assoc_mgr flags=assoc", timeout=60).stdout
        except (AssertionError, PodmanError) as exc:
            last["error"] = str(exc)[-300:]
            return False
        last["slurmctld"] = out.count("UserName=")
        return all(f"Account={acct} UserName={user}(" in out for acct, user in want)

    wait_for(
        "the declared associations in slurmdbd and slurmctld",
        check,
        timeout,
        interval=2.0,
        seen=lambda: f"{last}{_dbd_log(cluster, 'reconciler')}",
    )
    return time.monotonic() - t0


def _wait_recorded(cluster: Cluster, since: str, want: dict[str, str], timeout: float = 60) -> list[dict[str, str]]:
    """Wait until sacct shows every job id in ``want`` in its final state; returns every row since ``since``."""
    last: list[dict[str, str]] = []

    def check() -> bool:
        last[:] = sacct(cluster, since)
        seen = {r["JobID"]: r["State"] for r in last}
        return all(seen.get(j, "").startswith(s) for j, s in want.items())

    wait_for(
        f"sacct recording {sorted(want)}",
        check,
        timeout,
        interval=2.0,
        seen=lambda: "\n      ".join(["", *(str(r) for r in last)]) + _dbd_log(cluster),
    )
    return last


# ------------------------------------------------------------------------------------------------ scenarios
def _gpus_per_node(cluster: Cluster) -> int:
    """The GPUs of each node of the default partition when they all have the same number, else 0."""
    plan = cluster.rendered.plan
    default = next(p for p in plan.partitions if p.default)
    counts = {g.gres_count if g.kind == "gpu" else 0 for g in plan.groups if g.name in default.groups}
    return counts.pop() if len(counts) == 1 else 0


def allocated_gpus(row: dict[str, str]) -> int:
    """The GPUs a job held, from sacct's AllocTRES (``...,gres/gpu=16,...``; none listed: 0)."""
    found = re.search(r"(?:^|,)gres/gpu=(\d+)", row.get("AllocTRES", ""))
    return int(found.group(1)) if found else 0


def jobs_recorded(cluster: Cluster) -> str:
    """19. The researcher's day (2-node batch, 4-task array, interactive srun), each job asking for a whole
    node's GPUs where the nodes have GPUs, and a job of the second researcher: each in sacct with its user,
    its account (the user's default), COMPLETED, and its GPUs (AllocTRES gres/gpu: nodes x GPUs per node)."""
    from testing.e2e.scenarios import researcher_day  # the tier's own day; scenarios lists this module's

    ready_s = accounting_ready(cluster)
    alice, bob = _users(cluster)[:2]
    per_node = _gpus_per_node(cluster)
    since = _now(cluster)
    day = researcher_day(cluster, gpus_per_node=per_node)
    found = re.search(r"jobs (\d+) \(2 nodes\), (\d+)_\[1-4\]", day)
    if not found:
        raise AssertionError(f"the researcher's day named no jobs: {day}")
    batch, array = found.groups()
    gpus = f" --gpus-per-node={per_node}" if per_node else ""
    bob_job = submit(cluster, f"-N1{gpus} -o /dev/null", "id -un", user=_ids(bob))
    wait_done(cluster, [bob_job], 120)
    want = {batch: "COMPLETED", bob_job: "COMPLETED", **{f"{array}_{i}": "COMPLETED" for i in range(1, 5)}}
    rows = _wait_recorded(cluster, since, want)
    mine = [r for r in rows if r["User"] == alice.name]
    # The day's jobs: the batch job, 4 array tasks and two interactive sruns (one on every worker, one -N2).
    wrong = [
        r
        for r in rows
        if (r["User"], r["Account"]) not in {(u.name, default_account(cluster, u.name)) for u in (alice, bob)}
        or r["State"] != "COMPLETED"
        or allocated_gpus(r) != int(r["NNodes"]) * per_node
    ]
    if len(mine) != 7 or wrong:
        listing = "\n      ".join(str(r) for r in rows)
        raise AssertionError(
            f"sacct since {since}: {len(mine)} jobs of {alice.name} (want 7: batch, 4 array tasks, 2 sruns); "
            f"wrong user/account/state, or GPUs other than nodes x {per_node}: {wrong}\n      {listing}"
        )
    accounts = sorted({f"{r['User']}/{r['Account']}" for r in rows})
    held = ", ".join(f"{r['JobID']} gres/gpu={allocated_gpus(r)}" for r in rows)
    return (
        f"associations ready {ready_s:.1f}s; {len(rows)} jobs in sacct ({', '.join(accounts)}), all COMPLETED: "
        f"batch {batch}, array {array}_[1-4], 2 sruns, {bob.name}'s {bob_job}; "
        + (f"each with {per_node} GPUs per node in AllocTRES ({held})" if per_node else "no GPUs declared")
    )


def no_account_refused(cluster: Cluster) -> str:
    """20. A user slurmdbd holds no association for is refused at submit with Slurm's message; a
    researcher with one is accepted."""
    accounting_ready(cluster)
    held = sacctmgr(cluster, "assoc where user=nobody format=Account,User")
    if held:
        raise AssertionError(f"slurmdbd holds associations for nobody: {held}")
    proc = cluster.exec(LOGIN, "cd /tmp && sbatch -o /dev/null --wrap true", user=NOBODY)
    said = (proc.stdout + proc.stderr).strip()
    if proc.returncode == 0 or NO_ACCOUNT not in said:
        raise AssertionError(f"sbatch as nobody (no association): rc {proc.returncode}, said {said!r}")
    alice = _users(cluster)[0]
    job = submit(cluster, "-o /dev/null", "true", user=_ids(alice))
    wait_done(cluster, [job], 120)
    return f"nobody refused: {said!r}; {alice.name}'s job {job} accepted and completed"


def qos_limit(cluster: Cluster) -> str:
    """21. The declared QOS GPU limit (``maxGpusPerUser``, MaxTRESPerUser=gres/gpu=N, applied by the
    reconciler) holds a researcher's second GPU job PENDING with reason QOSMaxGRESPerUser while their first
    holds N GPUs, though a node is idle (the other researcher's job under the same QOS runs there); the
    second starts once the first ends."""
    accounting_ready(cluster)
    qos = next(q for q in _spec(cluster).qos if q.max_gpus_per_user)
    limit = qos.max_gpus_per_user
    assert limit is not None
    alice, bob = _users(cluster)[:2]
    shown: list[str] = [""]

    def applied() -> bool:
        shown[0] = "|".join(r[0] for r in sacctmgr(cluster, f"qos where name={qos.name} format=MaxTRESPU"))
        return shown[0] == f"gres/gpu={limit}"

    # The reconciler's first pass made the QOS with its limit; nothing here sets it.
    wait_for(f"slurmdbd holding QOS {qos.name} MaxTRESPU gres/gpu={limit}", applied, 60, interval=1.0,
             seen=lambda: f"{shown[0]!r}{_dbd_log(cluster, 'reconciler')}")  # fmt: skip
    first = submit(cluster, f"--qos={qos.name} -N1 --gpus={limit} -o /dev/null", "sleep 20", user=_ids(alice))
    wait_job(cluster, first, ("RUNNING",), 60)
    second = submit(cluster, f"--qos={qos.name} -N1 --gpus=1 -o /dev/null", "true", user=_ids(alice))
    last: dict[str, str] = {}

    def held() -> bool:
        last.clear()
        last.update(job_fields(cluster, second))
        return last.get("JobState") == "PENDING" and last.get("Reason") == QOS_GPU_REASON

    wait_for(f"job {second} PENDING with reason {QOS_GPU_REASON}", held, 30, interval=1.0, seen=lambda: str(last))
    # The limit is per user: the other researcher's GPU job under the same QOS runs meanwhile, on an idle node.
    other = submit(cluster, f"--qos={qos.name} -N1 --gpus=1 -o /dev/null", "sleep 2", user=_ids(bob))
    wait_done(cluster, [other], 60)
    now = job_fields(cluster, second)
    if now.get("JobState") != "PENDING" or job_fields(cluster, first).get("JobState") != "RUNNING":
        raise AssertionError(f"job {second} left PENDING while {first} still runs: {now}")
    wait_done(cluster, [first, second], 120)
    f1, f2 = job_fields(cluster, first), job_fields(cluster, second)
    if not f2.get("StartTime", "") >= f1.get("EndTime", "~"):
        raise AssertionError(f"job {second} started {f2.get('StartTime')} before {first} ended {f1.get('EndTime')}")
    return (
        f"QOS {qos.name} MaxTRESPerUser=gres/gpu={limit} from the declaration; {alice.name}'s job {second} (1 GPU) "
        f"PENDING ({QOS_GPU_REASON}) while {first} held {limit} GPUs, {bob.name}'s {other} ran meanwhile; "
        f"{second} started {f2.get('StartTime')} after {first} ended {f1.get('EndTime')}"
    )


def _share(cluster: Cluster) -> dict[str, tuple[int, str]]:
    """sshare's rows: an account (``physics``) or a user in it (``physics/alice``) -> (RawUsage, FairShare).
    Under Fair Tree (the default) an account's FairShare is blank: the factor is its users'."""
    out = _root(cluster, "sshare -a -P -n -o Account,User,RawUsage,FairShare")
    shares = {}
    for line in out.splitlines():
        acct, user, raw, fair = [*line.split("|"), "", "", ""][:4]
        if acct.strip() and raw.strip():
            key = f"{acct.strip()}/{user}" if user else acct.strip()
            shares[key] = (int(raw), fair.strip())
    return shares


def fair_share(cluster: Cluster) -> str:
    """22. After one account has used the cluster, the other account's job starts first, though submitted
    after: priority by fair share (PriorityWeightFairshare), as sprio and sshare show."""
    accounting_ready(cluster)
    alice, bob = _users(cluster)[:2]
    heavy, light = default_account(cluster, alice.name), default_account(cluster, bob.name)
    n = len(cluster.workers())
    use = submit(cluster, f"-N{n} --exclusive -o /dev/null", "sleep 30", user=_ids(alice))
    wait_done(cluster, [use], 180)
    t0 = time.monotonic()
    last: dict[str, Any] = {}

    def used() -> bool:
        shares = last["sshare"] = _share(cluster)
        h, li = shares.get(heavy), shares.get(light)
        fa, fb = shares.get(f"{heavy}/{alice.name}"), shares.get(f"{light}/{bob.name}")
        return bool(h and li and fa and fb and h[0] > li[0] and fa[1] and fb[1] and float(fa[1]) < float(fb[1]))

    # Usage reaches the association when the priority plugin's decay pass runs (PriorityCalcPeriod,
    # slurm.conf(5): 5 minutes by default).
    wait_for(f"{heavy}'s usage above {light}'s in sshare", used, 420, interval=5.0, seen=lambda: str(last))
    usage_s = time.monotonic() - t0
    blocker = submit(cluster, f"-N{n} --exclusive -o /dev/null", "sleep 15", user=_ids(alice))
    wait_job(cluster, blocker, ("RUNNING",), 60)
    first = submit(cluster, f"-N{n} --exclusive -o /dev/null", "sleep 5", user=_ids(alice))
    second = submit(cluster, f"-N{n} --exclusive -o /dev/null", "sleep 5", user=_ids(bob))
    prio = _root(cluster, f"sprio -h -o '%i %u %Y %F' -j {first},{second}")
    wait_done(cluster, [blocker, first, second], 240)
    f1, f2 = job_fields(cluster, first), job_fields(cluster, second)
    if not f2.get("StartTime", "~") < f1.get("StartTime", ""):
        raise AssertionError(
            f"{bob.name}'s job {second} ({light}) started {f2.get('StartTime')}, not before {alice.name}'s "
            f"{first} ({heavy}, submitted first) at {f1.get('StartTime')}; sprio:\n{prio}\nsshare: {_share(cluster)}"
        )
    shares = {k: v for k, v in _share(cluster).items() if k.split("/")[0] in (heavy, light)}
    return (
        f"{heavy} used {n} nodes for 30 s; usage in sshare after {usage_s:.0f}s ({shares}); "
        f"sprio (job user priority fairshare-weighted): {' / '.join(prio.strip().splitlines())}; "
        f"{bob.name}'s {second} started {f2.get('StartTime')} before {alice.name}'s {first} {f1.get('StartTime')}"
    )


def _all_jobs(cluster: Cluster) -> dict[str, str]:
    """Every job allocation slurmdbd holds: id -> state."""
    return {r["JobID"]: r["State"] for r in sacct(cluster, "2020-01-01T00:00:00")}


def _quick_job(cluster: Cluster, user: UserSpec, since: str) -> str:
    job = submit(cluster, "-N1 -o /dev/null", "true", user=_ids(user))
    wait_done(cluster, [job], 180)
    _wait_recorded(cluster, since, {job: "COMPLETED"}, timeout=180)
    return job


def recreated(cluster: Cluster) -> str:
    """23. slurmdbd, the database pod and the controller each recreated while a job runs across them: no
    record lost (every job sacct held before is held after, and the jobs run meanwhile), the long job keeps running and is
    recorded COMPLETED."""
    accounting_ready(cluster)
    alice = _users(cluster)[0]
    since = _now(cluster)
    before = _all_jobs(cluster)
    go = f"{alice.home}/s23-go"  # the long job runs until the scenario makes this file
    cluster.sh(LOGIN, f"rm -f {go}", user=_ids(alice))
    long_job = submit(cluster, "-N1 -o /dev/null", f"while [ ! -e {go} ]; do sleep 1; done", user=_ids(alice))
    wait_job(cluster, long_job, ("RUNNING",), 60)
    steps: list[str] = []
    quick: list[str] = []
    for what in ("slurmdbd", "accounting-database-0", "slurmctld-0"):
        pod = dbd_pod(cluster) if what == "slurmdbd" else what
        t0 = time.monotonic()
        cluster.delete_pod(pod)
        if what == "slurmctld-0":
            wait_for("slurmctld answering", cluster.controller_answers, 120)
        wait_for(
            f"sacctmgr answering after {pod} was recreated",
            lambda: cluster.exec(LOGIN, "sacctmgr -P -n show cluster format=Cluster", timeout=60).returncode == 0,
            180,
            interval=2.0,
            seen=lambda: _dbd_log(cluster),
        )
        back_s = time.monotonic() - t0
        state = wait_job(cluster, long_job, ("RUNNING",), 10)
        quick.append(_quick_job(cluster, alice, since))
        steps.append(f"{what} back in {back_s:.1f}s (job {long_job} {state}, job {quick[-1]} recorded)")
    cluster.sh(LOGIN, f"touch {go}", user=_ids(alice))
    wait_done(cluster, [long_job], 60)
    rows = _wait_recorded(cluster, since, {long_job: "COMPLETED", **dict.fromkeys(quick, "COMPLETED")}, timeout=120)
    after = _all_jobs(cluster)
    lost = {j: s for j, s in before.items() if j not in after}
    new = set(after) - set(before)
    # Beside this scenario's jobs, only the records of jobs that ended before it may arrive late.
    unexpected = sorted(j for j in new - {long_job, *quick} if int(j.split("_")[0]) >= int(long_job))
    if lost or not {long_job, *quick} <= new or unexpected:
        listing = "\n      ".join(str(r) for r in rows)
        raise AssertionError(
            f"sacct before {len(before)} jobs, after {len(after)}: lost {lost}, new {sorted(new)} (want "
            f"{long_job}, {', '.join(quick)}), unexpected {unexpected}:\n      {listing}"
        )
    return (
        f"{'; '.join(steps)}; sacct {len(before)} -> {len(after)} jobs (+{long_job}, {', '.join(quick)}), none "
        f"lost; {long_job} COMPLETED across all three"
    )


def declaration_changed(cluster: Cluster) -> str:
    """24. A declaration change (a new account, a changed share and a new QOS limit) applied: the reconciler
    reads the ConfigMap as it changes and slurmdbd holds the change; no worker pod restarted."""
    accounting_ready(cluster)
    spec = _spec(cluster)
    alice = _users(cluster)[0]
    # The first declared QOS changed; without one (the local stack), one is added.
    qos, changed = (spec.qos[0].name if spec.qos else f"q{int(time.time()) % 10000}"), spec.accounts[0].name
    new_account, share, wall = f"added{int(time.time()) % 10000}", 30, "1-00:00:00"
    workers = cluster.workers()
    before = {w: (cluster.started_at(w), cluster.restarts(w)) for w in workers}
    dbd = dbd_pod(cluster)
    since = _now(cluster)

    def mutate(raw: dict[str, Any]) -> None:
        acct = raw["slurm"]["accounting"]
        acct["accounts"] = [{**a, "fairshare": share} if a["name"] == changed else a for a in acct["accounts"]] + [
            {"name": new_account, "fairshare": 10, "users": [alice.name]}
        ]
        declared = acct.get("qos") or [{"name": qos}]
        acct["qos"] = [{**q, "maxWall": wall} if q["name"] == qos else q for q in declared]

    new = rerender(cluster.rendered, cluster.secrets, mutate)
    t0 = time.monotonic()
    result = cluster.apply(new)
    last: dict[str, Any] = {}

    def applied() -> bool:
        rows = sacctmgr(cluster, "assoc format=Account,User,Fairshare")
        accts = {r[0]: r[2] for r in rows if not r[1]}
        users = {(r[0], r[1]) for r in rows if r[1]}
        walls = {r[0]: r[1] for r in sacctmgr(cluster, "qos format=Name,MaxWall")}
        last.update(accounts=accts, qos=walls)
        return (
            accts.get(changed) == str(share)
            and new_account in accts
            and (new_account, alice.name) in users
            and walls.get(qos) == wall
        )

    wait_for("the changed declaration in slurmdbd", applied, 180, interval=2.0,
             seen=lambda: f"{last}{_dbd_log(cluster, 'reconciler')}")  # fmt: skip
    held_s = time.monotonic() - t0
    job = submit(cluster, f"-A {new_account} -o /dev/null", "true", user=_ids(alice))
    wait_done(cluster, [job], 120)
    recorded = [r for r in _wait_recorded(cluster, since, {job: "COMPLETED"}) if r["JobID"] == job]
    if recorded[0]["Account"] != new_account:
        raise AssertionError(f"job {job} recorded under {recorded[0]['Account']}, not {new_account}: {recorded}")
    # The same reconciler process read the changed file: its pod was not replaced, its log names the command.
    log = cluster.logs(dbd, "reconciler", tail=400) if dbd in cluster.pods else ""
    if dbd_pod(cluster) != dbd or f"add account {new_account} " not in log:
        raise AssertionError(f"slurmdbd pod {dbd} -> {dbd_pod(cluster)}; reconciler log:\n{log[-1500:]}")
    after = {w: (cluster.started_at(w), cluster.restarts(w)) for w in workers}
    touched = [w for w in workers if before[w] != after[w]] + [w for w in workers if w not in cluster.pods]
    if touched or cluster.workers() != workers:
        raise AssertionError(f"workers restarted or replaced by the change: {touched}; now {cluster.workers()}")
    return (
        f"account {new_account} (with {alice.name}), {changed} Fairshare={share}, QOS {qos} MaxWall={wall} held "
        f"by slurmdbd {held_s:.1f}s after apply (rolled: {result.replaced or 'nothing'}, "
        f"{result.refreshed_volumes} volumes refreshed in place; the reconciler in {dbd} read the new file); "
        f"job {job} ran and is recorded under {new_account}; "
        f"{len(workers)} workers untouched"
    )
