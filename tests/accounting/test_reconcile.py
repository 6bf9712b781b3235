"""From what slurmdbd holds (hand-written listings, data/README.md) to the declaration: ordered sacctmgr commands,
drift reported, nothing deleted under running jobs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from slonk_infra.accounting.desired import desired_state
from slonk_infra.accounting.reconcile import reconcile
from slonk_infra.accounting.records import Assoc, State
from slonk_infra.accounting.sacctmgr import parse_running, read_state
from slonk_infra.declaration.accounting import AccountingSpec

DATA = Path(__file__).parent / "data"
CLUSTER = "slonk-gcp"

SPEC: dict[str, Any] = {
    "qos": [
        {"name": "high", "priority": 100, "preempt": ["low"], "maxGpusPerUser": 64},
        {"name": "low", "maxWall": "48:00:00"},
    ],
    # Children before parents on purpose: the commands still add parents first.
    "accounts": [
        {
            "name": "vision",
            "parent": "research",
            "fairshare": 2,
            "defaultQos": "low",
            "maxGpusPerUser": 8,
            "users": ["bob", "alice"],
        },
        {"name": "research", "fairshare": 60, "maxGpus": 128, "users": ["alice"]},
    ],
}


def desired(spec: dict[str, Any] | None = None) -> State:
    return desired_state(AccountingSpec.model_validate(spec or SPEC), CLUSTER)


def recorded() -> State:
    names = ("cluster", "account", "user", "qos", "assoc")
    return read_state(CLUSTER, {n: (DATA / f"{n}.txt").read_text() for n in names})


def lines(cmds: Any) -> list[str]:
    return [" ".join(c.args) for c in cmds]


def test_desired_state_from_the_declaration() -> None:
    state = desired()
    assert state.qos["low"].max_wall == 48 * 3600
    assert state.qos["high"].max_tres_per_user == {"gres/gpu": 64}
    assert state.assocs[("research", None, "")] == Assoc(
        account="research",
        parent="root",
        fairshare=60,
        grp_tres={"gres/gpu": 128},
        qos=frozenset({"high", "low", "normal"}),
    )
    assert state.assocs[("vision", "bob", "")].grp_tres == {"gres/gpu": 8}
    # alice's default account is the first account listing her.
    assert state.users["alice"].default_account == "vision" and state.users["bob"].default_account == "vision"


def test_from_an_empty_slurmdbd_everything_is_added_in_dependency_order() -> None:
    result = reconcile(desired(), State(CLUSTER, cluster_exists=False))
    assert lines(result.commands) == [
        "add cluster slonk-gcp",
        "add qos high Priority=100 MaxTRESPerUser=gres/gpu=64",
        "add qos low MaxWall=2-00:00:00",
        "modify qos where name=high set Preempt=low",
        "add account research Cluster=slonk-gcp Parent=root Fairshare=60 GrpTRES=gres/gpu=128 QOS=high,low,normal",
        "add account vision Cluster=slonk-gcp Parent=research Fairshare=2 QOS=high,low,normal DefaultQOS=low",
        "add user alice Account=research Cluster=slonk-gcp DefaultAccount=vision",
        "add user alice Account=vision Cluster=slonk-gcp GrpTRES=gres/gpu=8",
        "add user bob Account=vision Cluster=slonk-gcp DefaultAccount=vision GrpTRES=gres/gpu=8",
    ]
    assert result.commands[0].argv[:2] == ("sacctmgr", "-i")
    assert not result.drift and not result.held


def test_a_reconciled_slurmdbd_needs_nothing() -> None:
    want = desired()
    assert not reconcile(want, want).commands


def test_changes_are_modified_and_drift_is_reported_not_deleted() -> None:
    result = reconcile(desired(), recorded())
    assert lines(result.commands) == [
        "modify qos where name=high set Priority=100 MaxTRESPerUser=gres/gpu=64 MaxWall=-1",
        "add qos low MaxWall=2-00:00:00",
        "modify qos where name=high set Preempt=low",
        "modify account where name=research cluster=slonk-gcp set Fairshare=60 GrpTRES=gres/gpu=128 QOS=high,low,normal",
        "add account vision Cluster=slonk-gcp Parent=research Fairshare=2 QOS=high,low,normal DefaultQOS=low",
        "modify user where name=alice account=research cluster=slonk-gcp set GrpTRES=gres/gpu=-1",
        "add user alice Account=vision Cluster=slonk-gcp GrpTRES=gres/gpu=8",
        "add user bob Account=vision Cluster=slonk-gcp GrpTRES=gres/gpu=8",
        "modify user where name=alice set DefaultAccount=vision",
        "modify user where name=bob set DefaultAccount=vision",
    ]
    assert not [c for c in result.commands if c.args[0] == "delete"]
    assert result.drift == (
        "GrpTRES of user alice in account research also limits cpu=256, which the declaration does not",
        "user bob in account old-lab is in slurmdbd, not in the declaration",
        "user bob in account old-lab partition debug is in slurmdbd, not in the declaration",
        "account old-lab is in slurmdbd, not in the declaration",
        "QOS scavenger is in slurmdbd, not in the declaration",
    )


def test_prune_deletes_users_then_accounts_then_qos() -> None:
    result = reconcile(desired(), recorded(), prune=True)
    deletes = [line for line in lines(result.commands) if line.startswith("delete")]
    assert deletes == [
        "delete user where name=bob account=old-lab cluster=slonk-gcp",
        "delete user where name=bob account=old-lab cluster=slonk-gcp partition=debug",
        "delete account where name=old-lab cluster=slonk-gcp",
        "delete qos where name=scavenger",
    ]
    # Deletions come after every add and modify.
    first_delete = lines(result.commands).index(deletes[0])
    assert all(not line.startswith("delete") for line in lines(result.commands)[:first_delete])


def test_prune_never_deletes_an_association_with_running_jobs() -> None:
    running = parse_running((DATA / "squeue.txt").read_text())
    result = reconcile(desired(), recorded(), running, prune=True)
    deletes = [line for line in lines(result.commands) if line.startswith("delete")]
    assert deletes == ["delete qos where name=scavenger"]
    assert result.held == (
        "user bob in account old-lab has running jobs; not deleted",
        "user bob in account old-lab partition debug has running jobs; not deleted",
        "account old-lab has running jobs in it or below it; not deleted",
    )


def _account(name: str, parent: str) -> Assoc:
    return Assoc(account=name, parent=parent, fairshare=1, qos=frozenset({"normal"}))


def test_accounts_are_deleted_children_first_and_a_busy_child_keeps_its_parents() -> None:
    tree = {a.key: a for a in (_account("lab", "root"), _account("lab-a", "lab"), _account("lab-a-1", "lab-a"))}
    current = replace(State(CLUSTER), assocs=tree)
    result = reconcile(State(CLUSTER), current, prune=True)
    assert lines(result.commands) == [
        "delete account where name=lab-a-1 cluster=slonk-gcp",
        "delete account where name=lab-a cluster=slonk-gcp",
        "delete account where name=lab cluster=slonk-gcp",
    ]
    busy = reconcile(State(CLUSTER), current, {("lab-a-1", "carol")}, prune=True)
    assert not busy.commands
    assert [h.split(" has")[0] for h in busy.held] == ["account lab-a-1", "account lab-a", "account lab"]


def test_a_moved_account_and_a_cleared_default_qos() -> None:
    spec = {"accounts": [{"name": "a"}, {"name": "b", "parent": "a"}]}
    current = desired({"accounts": [{"name": "a"}, {"name": "b", "defaultQos": "normal"}]})
    assert lines(reconcile(desired(spec), current).commands) == [
        "modify account where name=b cluster=slonk-gcp set Parent=a",
        "modify account where name=b cluster=slonk-gcp set DefaultQOS=-1",
    ]


def test_an_emptied_preempt_list_is_cleared_with_nothing_after_the_equals() -> None:
    # slurmdbd 22.05 refuses the argument "Preempt=''" (no shell strips the quotes) and "Preempt=-1".
    spec = {**SPEC, "qos": [{**SPEC["qos"][0], "preempt": []}, SPEC["qos"][1]]}
    cmds = lines(reconcile(desired(spec), recorded()).commands)
    assert "modify qos where name=high set Preempt=" in cmds
