"""Reading sacctmgr's listings: the commands asked for and the parser, on hand-written output (data/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slonk_infra.accounting.records import (
    Assoc,
    RecordError,
    format_tres,
    format_wall,
    parse_tres,
    wall_seconds,
)
from slonk_infra.accounting.sacctmgr import (
    parse_accounts,
    parse_running,
    read_state,
    rows,
    show_commands,
)

DATA = Path(__file__).parent / "data"
CLUSTER = "slonk-gcp"


def outputs() -> dict[str, str]:
    return {name: (DATA / f"{name}.txt").read_text() for name in ("cluster", "account", "user", "qos", "assoc")}


def test_the_listings_asked_for() -> None:
    cmds = show_commands(CLUSTER)
    assert cmds["assoc"] == (
        "sacctmgr",
        "-P",
        "-n",
        "show",
        "assoc",
        "where",
        "cluster=slonk-gcp",
        "format=Cluster,Account,User,Partition,ParentName,Fairshare,GrpTRES,QOS,DefaultQOS",
    )
    assert cmds["qos"][-1] == "format=Name,Priority,Preempt,MaxTRESPerUser,MaxTRESPerAccount,MaxWall"
    assert cmds["user"][-1] == "format=User,DefaultAccount"
    assert cmds["cluster"][-2:] == ("cluster", "format=Cluster")


def test_the_state_read_from_the_listings() -> None:
    state = read_state(CLUSTER, outputs())
    assert state.cluster_exists
    high = state.qos["high"]
    assert (high.priority, high.preempt, high.max_tres_per_user, high.max_wall) == (
        50,
        frozenset({"normal"}),
        {"gres/gpu": 32},
        86400,
    )
    assert state.qos["scavenger"].max_wall == 4 * 3600
    assert state.qos["normal"].max_wall is None and not state.qos["normal"].preempt
    research = state.assocs[("research", None, "")]
    assert research == Assoc(
        account="research",
        parent="root",
        fairshare=40,
        grp_tres={"gres/gpu": 64},
        qos=frozenset({"high", "normal"}),
    )
    alice = state.assocs[("research", "alice", "")]
    assert alice.grp_tres == {"cpu": 256, "gres/gpu": 8} and alice.parent is None
    assert state.assocs[("old-lab", "bob", "debug")].default_qos == "scavenger"
    assert state.assocs[("root", None, "")].parent is None
    assert len(state.assocs) == 7
    assert state.users["bob"].default_account == "old-lab"
    assert parse_accounts(outputs()["account"]) == ["old-lab", "research", "root"]


def test_a_cluster_slurmdbd_does_not_know() -> None:
    state = read_state("new-cluster", outputs())
    assert not state.cluster_exists and not state.assocs


def test_a_line_with_the_wrong_number_of_fields_is_an_error_naming_it() -> None:
    with pytest.raises(RecordError, match=r"show qos, line 2: 5 fields, expected 6"):
        list(rows("a|1||||\nb|1|||\n", ("Name", "Priority", "Preempt", "U", "A", "W"), "qos"))


def test_running_jobs_by_account_and_user() -> None:
    assert parse_running((DATA / "squeue.txt").read_text()) == {("old-lab", "bob"), ("research", "alice")}
    with pytest.raises(RecordError, match=r"account\|user"):
        parse_running("bob\n")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 5400),
        ("30:00", 1800),
        ("12:00:00", 43200),
        ("2-00", 172800),
        ("2-06:30", 196200),
        ("1-00:00:00", 86400),
        ("04:00:00", 14400),
        ("UNLIMITED", None),
        ("", None),
    ],
)
def test_slurm_times(text: str, seconds: int | None) -> None:
    assert wall_seconds(text) == seconds


def test_times_and_tres_written_as_sacctmgr_reads_them() -> None:
    assert format_wall(86400) == "1-00:00:00" and format_wall(14400) == "04:00:00"
    assert wall_seconds(format_wall(196200)) == 196200
    assert parse_tres("cpu=4,gres/gpu=8") == {"cpu": 4, "gres/gpu": 8}
    assert format_tres({"gres/gpu": 8, "cpu": 4}) == "cpu=4,gres/gpu=8"
    with pytest.raises(RecordError):
        parse_tres("gres/gpu")
    with pytest.raises(RecordError):
        wall_seconds("48h")
