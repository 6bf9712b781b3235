"""slurm.accounting: the new form, the old one still read, and every refusal naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.accounting import AccountingSpec
from slonk_infra.declaration.errors import DeclarationError
from tests.declaration.test_errors import Raw, assert_refused_at, edit, gcp, local

USERS = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002}]


def accounting(**overrides: Any) -> dict[str, Any]:
    """A valid section for the gcp stack (192 GPUs: h100-a 16 x 8, h100-b 8 x 8)."""
    spec: dict[str, Any] = {
        "database": {"kind": "external", "host": "slurmdbd.example.org"},
        "qos": [
            {"name": "high", "priority": 100, "preempt": ["low"], "maxGpusPerUser": 64},
            {"name": "low", "priority": 10, "maxWall": "2-00:00:00"},
        ],
        "accounts": [
            {"name": "research", "fairshare": 60, "maxGpus": 128, "users": ["alice"]},
            {"name": "vision", "parent": "research", "fairshare": 2, "defaultQos": "low", "users": ["bob"]},
        ],
    }
    spec.update(overrides)
    return spec


def with_accounting(raw: Raw, **overrides: Any) -> Raw:
    raw["users"] = [dict(u) for u in USERS]
    raw["slurm"]["accounting"] = accounting(**overrides)
    return raw


def acct(raw: Raw) -> dict[str, Any]:
    a: dict[str, Any] = raw["slurm"]["accounting"]
    return a


def good() -> Raw:
    return edit(gcp, with_accounting)


def test_the_new_form_is_valid_on_the_gcp_stack() -> None:
    spec = build_plan(good()).declaration.slurm.accounting
    assert isinstance(spec, AccountingSpec)
    assert spec.database.kind == "external" and spec.database.port == 6819
    assert spec.enforce and spec.priority_weights is not None and spec.priority_weights.fairshare == 10000
    assert [a.name for a in spec.accounts] == ["research", "vision"]


def test_the_old_form_still_parses_as_an_external_slurmdbd_that_only_records() -> None:
    raw = gcp()
    raw["slurm"].update(accounting=True, accountingHost="dbd.example.org")
    spec = build_plan(raw).declaration.slurm.accounting
    assert spec is not None and spec.legacy
    assert (spec.database.kind, spec.database.host, spec.database.port) == ("external", "dbd.example.org", 6819)
    assert not spec.enforce and spec.priority_weights is None


@pytest.mark.parametrize("extra", [{}, {"accountingHost": "dbd"}])
def test_accounting_false_is_off(extra: dict[str, str]) -> None:
    raw = gcp()
    raw["slurm"].update(accounting=False, **extra)
    assert build_plan(raw).declaration.slurm.accounting is None


def test_partitions_name_allowed_qos() -> None:
    raw = good()
    raw["slurm"]["partitions"] = [{"name": "gpu", "pools": ["*"], "default": True, "allowQos": ["high", "normal"]}]
    (part,) = build_plan(raw).declaration.slurm.partitions or []
    assert part.allow_qos == ["high", "normal"]


def test_a_user_in_no_account_is_fine_when_nothing_is_enforced() -> None:
    raw = good()
    acct(raw)["enforce"] = False
    acct(raw)["accounts"][1]["users"] = []
    build_plan(raw)


def test_with_a_directory_accounts_may_list_users_only_the_directory_knows() -> None:
    raw = good()
    raw["directory"] = {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}
    acct(raw)["accounts"][0]["users"] = ["alice", "carol"]
    build_plan(raw)


def _set(path: list[Any], value: Any) -> Any:
    def fn(raw: Raw) -> None:
        with_accounting(raw)
        node: Any = raw["slurm"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return fn


# (id, declaration, field path that must be named, fragments the message must contain)
CASES: list[tuple[str, Raw, str, list[str]]] = [
    (
        "old form: accounting true without a host names the new form",
        edit(gcp, lambda r: r["slurm"].update(accounting=True)),
        "slurm",
        ["accounting: true needs accountingHost", "accounting: {database: {kind: in-cluster}}"],
    ),
    (
        "old accountingHost beside the new form",
        edit(gcp, lambda r: (with_accounting(r), r["slurm"].update(accountingHost="dbd"))),
        "slurm",
        ["accountingHost is the old form", "accounting.database: {kind: external, host: dbd}"],
    ),
    (
        "storage size for an external database",
        edit(gcp, _set(["accounting", "database", "storageGib"], 20)),
        "slurm.accounting.database",
        ["storageGib is for kind: in-cluster or cloud"],
    ),
    (
        "memory for a cloud database",
        edit(gcp, _set(["accounting", "database"], {"kind": "cloud", "memoryMib": 4096})),
        "slurm.accounting.database",
        ["memoryMib is for kind: in-cluster", "instanceClass"],
    ),
    (
        "in-cluster database memory below a 512 MiB buffer pool",
        edit(gcp, _set(["accounting", "database"], {"kind": "in-cluster", "memoryMib": 1024})),
        "slurm.accounting.database.memoryMib",
        ["greater than or equal to 1536"],
    ),
    (
        "records kept for no month",
        edit(gcp, _set(["accounting", "retainMonths"], 0)),
        "slurm.accounting.retainMonths",
        ["greater than or equal to 1"],
    ),
    (
        "external database without a host",
        edit(gcp, _set(["accounting", "database"], {"kind": "external"})),
        "slurm.accounting.database",
        ["kind: external needs host"],
    ),
    (
        "a host for the in-cluster database",
        edit(gcp, _set(["accounting", "database"], {"kind": "in-cluster", "host": "db"})),
        "slurm.accounting.database",
        ["host is for kind: external"],
    ),
    (
        "unknown database kind",
        edit(gcp, _set(["accounting", "database"], {"kind": "sqlite"})),
        "slurm.accounting.database.kind",
        ["'in-cluster'", "'external'"],
    ),
    (
        "a user in no account",
        edit(gcp, _set(["accounting", "accounts", 1, "users"], [])),
        "users[1].name",
        ["'bob' is in no account", "add them to an account's users"],
    ),
    (
        "an account lists an undeclared user",
        edit(gcp, _set(["accounting", "accounts", 0, "users"], ["alice", "mallory"])),
        "slurm.accounting.accounts[0].users[1]",
        ["'mallory' is not a declared user", "declared: alice, bob"],
    ),
    (
        "a user listed twice in one account",
        edit(gcp, _set(["accounting", "accounts", 0, "users"], ["alice", "alice"])),
        "slurm.accounting.accounts[0].users[1]",
        ["'alice' is listed twice"],
    ),
    (
        "unknown parent account",
        edit(gcp, _set(["accounting", "accounts", 1, "parent"], "reserch")),
        "slurm.accounting.accounts[1].parent",
        ["'reserch' is not a declared account", "declared: research, root, vision"],
    ),
    (
        "a cycle of parents",
        edit(gcp, _set(["accounting", "accounts", 0, "parent"], "vision")),
        "slurm.accounting.accounts[0].parent",
        ["cycle of parents", "research -> vision -> research"],
    ),
    (
        "an account its own parent",
        edit(gcp, _set(["accounting", "accounts", 0, "parent"], "research")),
        "slurm.accounting.accounts[0].parent",
        ["cycle of parents: research -> research"],
    ),
    (
        "unknown default QOS",
        edit(gcp, _set(["accounting", "accounts", 1, "defaultQos"], "hihg")),
        "slurm.accounting.accounts[1].defaultQos",
        ["'hihg' is not a declared QOS", "declared: high, low, normal"],
    ),
    (
        "default QOS outside the account's QOS list",
        edit(gcp, _set(["accounting", "accounts", 1, "qos"], ["high"])),
        "slurm.accounting.accounts[1].defaultQos",
        ["'low' is not in the account's qos ['high']"],
    ),
    (
        "unknown QOS in an account's list",
        edit(gcp, _set(["accounting", "accounts", 0, "qos"], ["gold"])),
        "slurm.accounting.accounts[0].qos[0]",
        ["'gold' is not a declared QOS"],
    ),
    (
        "unknown QOS preempted",
        edit(gcp, _set(["accounting", "qos", 0, "preempt"], ["scavenger"])),
        "slurm.accounting.qos[0].preempt[0]",
        ["'scavenger' is not a declared QOS", "declared: high, low, normal"],
    ),
    (
        "a QOS preempting itself",
        edit(gcp, _set(["accounting", "qos", 0, "preempt"], ["high"])),
        "slurm.accounting.qos[0].preempt[0]",
        ["'high' cannot preempt itself"],
    ),
    (
        "unknown QOS allowed on a partition",
        edit(
            gcp,
            lambda r: (
                with_accounting(r),
                r["slurm"].update(partitions=[{"name": "gpu", "pools": ["*"], "allowQos": ["high", "hi"]}]),
            ),
        ),
        "slurm.partitions[0].allowQos[1]",
        ["'hi' is not a declared QOS (partition 'gpu')", "declared: high, low, normal"],
    ),
    (
        "allowQos on a partition while accounting is off",
        edit(
            gcp,
            lambda r: (
                r["slurm"].pop("accounting", None),
                r["slurm"].update(partitions=[{"name": "gpu", "pools": ["*"], "allowQos": ["high"]}]),
            ),
        ),
        "slurm.partitions[0].allowQos",
        ["partition 'gpu' names QOS ['high'] but slurm.accounting is off"],
    ),
    (
        "negative fairshare",
        edit(gcp, _set(["accounting", "accounts", 0, "fairshare"], -1)),
        "slurm.accounting.accounts[0].fairshare",
        ["greater than or equal to 0", "got -1"],
    ),
    (
        "account GPU limit above the cluster's GPUs",
        edit(gcp, _set(["accounting", "accounts", 0, "maxGpus"], 1280)),
        "slurm.accounting.accounts[0].maxGpus",
        ["1280 GPUs is more than the cluster has (192"],
    ),
    (
        "per-user GPU limit of an account above the cluster's GPUs",
        edit(gcp, _set(["accounting", "accounts", 1, "maxGpusPerUser"], 193)),
        "slurm.accounting.accounts[1].maxGpusPerUser",
        ["193 GPUs is more than the cluster has (192"],
    ),
    (
        "QOS per-user GPU limit above the cluster's GPUs",
        edit(gcp, _set(["accounting", "qos", 0, "maxGpusPerUser"], 640)),
        "slurm.accounting.qos[0].maxGpusPerUser",
        ["640 GPUs is more than the cluster has (192"],
    ),
    (
        "QOS per-account GPU limit on a cluster without GPUs",
        edit(
            local,
            lambda r: (with_accounting(r), acct(r).update(accounts=[]), acct(r)["qos"][1].update(maxGpusPerAccount=1)),
        ),
        "slurm.accounting.qos[1].maxGpusPerAccount",
        ["1 GPUs is more than the cluster has (0"],
    ),
    (
        "zero GPU limit",
        edit(gcp, _set(["accounting", "qos", 0, "maxGpusPerUser"], 0)),
        "slurm.accounting.qos[0].maxGpusPerUser",
        ["greater than 0"],
    ),
    (
        "duplicate account names",
        edit(gcp, _set(["accounting", "accounts", 1, "name"], "research")),
        "slurm.accounting.accounts[1].name",
        ["duplicate account 'research'"],
    ),
    (
        "duplicate QOS names",
        edit(gcp, _set(["accounting", "qos", 1, "name"], "high")),
        "slurm.accounting.qos[1].name",
        ["duplicate QOS 'high'"],
    ),
    (
        "declaring Slurm's own root account",
        edit(gcp, _set(["accounting", "accounts", 0, "name"], "root")),
        "slurm.accounting.accounts[0].name",
        ["'root' is Slurm's own top account"],
    ),
    (
        "declaring Slurm's own normal QOS",
        edit(gcp, _set(["accounting", "qos", 1, "name"], "normal")),
        "slurm.accounting.qos[1].name",
        ["'normal' is Slurm's own QOS"],
    ),
    (
        "an account name slurmdbd would lower-case",
        edit(gcp, _set(["accounting", "accounts", 0, "name"], "Research")),
        "slurm.accounting.accounts[0].name",
        ["'Research' is not an accounting name", "lower case"],
    ),
    (
        "a QOS wall time sacctmgr cannot read",
        edit(gcp, _set(["accounting", "qos", 1, "maxWall"], "48h")),
        "slurm.accounting.qos[1].maxWall",
        ["'48h' is not a Slurm time"],
    ),
    (
        "unknown field in an account",
        edit(gcp, _set(["accounting", "accounts", 0, "share"], 3)),
        "slurm.accounting.accounts[0].share",
        ["unknown field"],
    ),
]


@pytest.mark.parametrize(("declaration", "path", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_accounting_is_refused_by_field(declaration: Raw, path: str, fragments: list[str]) -> None:
    assert_refused_at(declaration, path, fragments)


def test_table_cases_are_distinct() -> None:
    assert len({c[0] for c in CASES}) == len(CASES)


def test_a_cycle_is_reported_once() -> None:
    raw = good()
    acct(raw)["accounts"][0]["parent"] = "vision"
    with pytest.raises(DeclarationError) as info:
        build_plan(raw)
    assert sum("cycle" in p.message for p in info.value.problems) == 1
