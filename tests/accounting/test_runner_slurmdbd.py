"""The reconciler process against a real slurmdbd (on MariaDB) and a lab slurmctld that enforces through it
(``AccountingStorageEnforce=associations,limits,qos,safe``), Debian bookworm's Slurm 22.05.

One cluster for the module; the tests run in file order and each starts from where the previous left
slurmdbd: empty, declared, changed, drifted, pruned. Skipped without root, Slurm or MariaDB/slurmdbd (a
failure under CI=true: tools/install-slurm.sh installs them).
"""

from __future__ import annotations

import copy
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from slonk_infra.accounting.reconcile import reconcile
from slonk_infra.accounting.records import Assoc, State
from slonk_infra.accounting.wire import dump_state
from testing.slurmlab import MEMBER, MEMBER_UID, OUTSIDER_UID, require_dbd, require_flavor
from testing.slurmlab import AccountingLab as Cluster
from testing.slurmlab import accounting_lab as real_cluster
from tests.accounting.real import SPEC

# What 22.05's sbatch prints for a user slurmdbd has no association for, with enforcement on.
NO_ASSOCIATION = (
    "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"
)

CHANGED: dict[str, Any] = copy.deepcopy(SPEC)
CHANGED["accounts"][0]["maxGpus"] = 32  # research: a changed limit
CHANGED["qos"][0]["preempt"] = []  # high: a Preempt list emptied (Preempt=)
CHANGED["accounts"].append({"name": "physics", "fairshare": 5, "users": [MEMBER]})  # a new account


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    require_flavor("host")
    require_dbd()
    with real_cluster() as c:
        yield c


def assert_holds(c: Cluster, want: State) -> None:
    """sacctmgr's listings equal the desired state: every declared QOS, account and default account as
    declared, users' GPU limits as declared, and nothing left to do or undeclared."""
    have = c.current()
    for name, q in want.qos.items():
        assert have.qos[name] == q
    for key, a in want.assocs.items():
        if a.user is None:
            assert have.assocs[key] == a
        else:
            assert have.assocs[key].grp_tres == a.grp_tres
    assert {n: have.users[n] for n in want.users} == dict(want.users)
    plan = reconcile(want, have)
    assert plan.commands == () and plan.drift == (), (plan.commands, plan.drift)


def commands_run(log: str) -> list[str]:
    return [ln.split(". ", 1)[1].split("    #")[0] for ln in log.splitlines() if "INFO   " in ln and "    # " in ln]


def test_from_empty_slurmdbd_the_declaration_is_applied_then_nothing(cluster: Cluster) -> None:
    before = cluster.current()
    assert set(before.qos) == {"normal"} and {a.account for a in before.assocs.values()} == {"root"}
    path = cluster.write_desired(SPEC)
    first = cluster.reconciler("--desired", str(path), "--once")
    assert first.returncode == 0, first.stderr
    assert len(commands_run(first.stderr)) == 8, first.stderr
    assert_holds(cluster, cluster.desired(SPEC))
    second = cluster.reconciler("--desired", str(path), "--once")
    assert second.returncode == 0, second.stderr
    assert commands_run(second.stderr) == [], second.stderr
    assert "slurmdbd holds the declaration; nothing to do" in second.stderr


def test_user_in_no_account_is_refused_at_sbatch(cluster: Cluster) -> None:
    res = cluster.sbatch_as(OUTSIDER_UID, [])
    assert res.returncode == 1 and res.stderr.strip() == NO_ASSOCIATION, res
    res = cluster.sbatch_as(MEMBER_UID, ["--account=nosuch"])
    assert res.returncode == 1 and res.stderr.strip() == NO_ASSOCIATION, res


def test_root_administers_slurmdbd_and_other_users_may_not(cluster: Cluster) -> None:
    """Why the reconciler runs as root or the SlurmUser (root here): others are refused."""
    users = cluster.lab.run(["sacctmgr", "-P", "-n", "show", "user", "format=User,AdminLevel"], check=True).stdout
    assert "root|Administrator" in users.splitlines(), users
    as_member = ["setpriv", f"--reuid={MEMBER_UID}", f"--regid={MEMBER_UID}", "--clear-groups"]
    res = subprocess.run(
        [*as_member, "sacctmgr", "-i", "add", "account", "byuser", f"Cluster={cluster.cluster}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=cluster.env(),
        check=False,
    )
    assert res.returncode == 1 and "Problem adding accounts: Access/permission denied" in res.stderr, res


def test_a_changed_file_is_applied_by_the_running_loop_which_waits_for_slurmdbd(cluster: Cluster) -> None:
    """The loop re-reads the file each run (a ConfigMap changes in place); started while slurmdbd is down,
    it says it waits, then applies once slurmdbd is back; SIGTERM ends it with 0."""
    path = cluster.write_desired(SPEC, "loop.json")
    cluster.dbd.stop_slurmdbd()
    loop = subprocess.Popen(
        [sys.executable, "-m", "slonk_infra.accounting", "--desired", str(path), "--interval", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cluster.env(),
    )
    try:
        time.sleep(4)
        cluster.dbd.start_slurmdbd()
        tmp = path.with_suffix(".new")
        tmp.write_text(dump_state(cluster.desired(CHANGED)))
        tmp.replace(path)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and reconcile(cluster.desired(CHANGED), cluster.current()).commands:
            time.sleep(1)
    finally:
        loop.send_signal(signal.SIGTERM)
        out, _ = loop.communicate(timeout=60)
    assert loop.returncode == 0, out
    assert "waiting for slurmdbd: sacctmgr -P -n show cluster format=Cluster exited 1" in out, out
    ran = commands_run(out)
    assert "sacctmgr -i modify account where name=research cluster=slonk-gcp set GrpTRES=gres/gpu=32" in ran, out
    assert "sacctmgr -i modify qos where name=high set Preempt=" in ran, out
    assert any(c.startswith("sacctmgr -i add account physics") for c in ran), out
    assert_holds(cluster, cluster.desired(CHANGED))


def test_drift_is_reported_and_kept_without_prune(cluster: Cluster) -> None:
    cluster.lab.run(["sacctmgr", "-i", "add", "account", "handmade", "Cluster=" + cluster.cluster], check=True)
    path = cluster.write_desired(CHANGED)
    res = cluster.reconciler("--desired", str(path), "--once")
    assert res.returncode == 0, res.stderr
    assert commands_run(res.stderr) == [], res.stderr
    assert "drift: account handmade is in slurmdbd, not in the declaration (kept; --prune deletes it)" in res.stderr
    assert ("handmade", None, "") in cluster.current().assocs


def test_prune_holds_an_association_with_a_running_job_then_deletes_it(cluster: Cluster) -> None:
    job = cluster.sbatch_as(MEMBER_UID, ["--account=physics"])
    assert job.returncode == 0, job.stderr
    jobid = job.stdout.strip()
    cluster.lab.wait_job(jobid, {"RUNNING"}, timeout=60)
    path = cluster.write_desired(SPEC)  # physics is no longer declared
    res = cluster.reconciler("--desired", str(path), "--once", "--prune")
    assert res.returncode == 0, res.stderr
    assert "held: user daemon in account physics has running jobs; not deleted" in res.stderr
    assert "held: account physics has running jobs in it or below it; not deleted" in res.stderr
    ran = commands_run(res.stderr)
    assert "sacctmgr -i delete account where name=handmade cluster=slonk-gcp" in ran, res.stderr
    have = cluster.current().assocs
    assert ("physics", MEMBER, "") in have and ("handmade", None, "") not in have
    cluster.lab.run(["scancel", jobid], check=True)
    cluster.lab.wait_job(jobid, {"CANCELLED"}, timeout=60)
    res = cluster.reconciler("--desired", str(path), "--once", "--prune")
    assert res.returncode == 0, res.stderr
    assert "held:" not in res.stderr
    assert ("physics", MEMBER, "") not in cluster.current().assocs
    assert_holds(cluster, cluster.desired(SPEC))


def test_a_failing_command_is_logged_and_the_rest_applied(cluster: Cluster) -> None:
    # An account under a parent slurmdbd does not hold (the declaration refuses it; a hand-edited file
    # does not): its add fails every run, and the other commands still run.
    spec = copy.deepcopy(SPEC)
    spec["accounts"][1]["fairshare"] = 21
    want = cluster.desired(spec)
    orphan = Assoc(account="orphan", parent="nosuch", fairshare=1)
    path = cluster.workdir / "orphan.json"
    path.write_text(dump_state(replace(want, assocs={**want.assocs, orphan.key: orphan})))
    res = cluster.reconciler("--desired", str(path), "--once")
    assert res.returncode == 1, res.stderr
    assert "FAILED (exit 1): sacctmgr -i add account orphan Cluster=slonk-gcp Parent=nosuch" in res.stderr
    assert "1 of 2 command(s) failed; they are planned again next run" in res.stderr, res.stderr
    assert cluster.current().assocs[("vision", None, "")].fairshare == 21
    res = cluster.reconciler("--desired", str(cluster.write_desired(SPEC)), "--once")
    assert res.returncode == 0, res.stderr


def test_qos_gpu_limit_holds_the_second_job_pending(cluster: Cluster) -> None:
    args = ["--account=research", "--qos=onenode", "--gres=gpu:1", "--partition=l4"]
    first = cluster.sbatch_as(MEMBER_UID, args)
    assert first.returncode == 0, first.stderr
    cluster.lab.wait_job(first.stdout.strip(), {"RUNNING"}, timeout=60)
    second = cluster.sbatch_as(MEMBER_UID, args)
    assert second.returncode == 0, second.stderr
    jobid = second.stdout.strip()
    reason = ""
    for _ in range(50):
        reason = cluster.lab.run(["squeue", "-h", "-j", jobid, "-o", "%T %r"], check=True).stdout.strip()
        if reason == "PENDING QOSMaxGRESPerUser":
            break
        time.sleep(0.2)
    assert reason == "PENDING QOSMaxGRESPerUser"
    held = cluster.lab.run(["scontrol", "show", "job", first.stdout.strip()], check=True).stdout
    assert "gres/gpu=2" in held, held  # the whole node's GPUs: why the limit is 2
    cluster.lab.run(["scancel", first.stdout.strip(), jobid], check=True)
