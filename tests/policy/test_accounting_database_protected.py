"""accounting-database-protected: the shipped stacks' Cloud SQL and RDS databases pass; each guard removed is
reported; Aurora clusters and the in-cluster MariaDB StatefulSet are judged too."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from slonk_infra import vocab
from slonk_infra.declaration.stacks import load_stack_config
from slonk_infra.offline.render import run_program
from slonk_infra.offline.runner import Registration
from slonk_infra.policy import ALL_POLICIES
from slonk_infra.policy import policies as P
from slonk_infra.policy.common import STATEFUL_CLOUD_TYPES
from tests.policy.test_policies import REPO, STS, named, run_resource

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")

POLICY = P.accounting_database_protected
Edit = Callable[[dict[str, Any]], None]


def type_of(what: str) -> str:
    """The resource type the targets' descriptors call ``what``."""
    [token] = [t for t, w in STATEFUL_CLOUD_TYPES.items() if w == what]
    return token


@pytest.fixture(scope="module")
def cloud_sql() -> Registration:
    regs = run_program("gcp", load_stack_config("gcp", REPO / "stacks")).registrations
    return named(regs, "slonk-gcp-sql")


@pytest.fixture(scope="module")
def rds() -> Registration:
    regs = run_program("aws", load_stack_config("aws", REPO / "stacks")).registrations
    return named(regs, "slonk-aws-rds-db")


def changed(inputs: dict[str, Any], edit: Edit) -> dict[str, Any]:
    out = copy.deepcopy(inputs)
    edit(out)
    return out


def test_registered_in_the_pack() -> None:
    assert POLICY in ALL_POLICIES


def test_the_shipped_databases_pass(cloud_sql: Registration, rds: Registration) -> None:
    assert run_resource(POLICY, cloud_sql.type, cloud_sql.inputs, protect=True) == []
    assert run_resource(POLICY, rds.type, rds.inputs, protect=True) == []


def _settings(**values: Any) -> Edit:
    return lambda i: i["settings"].update(values)


def _backups(**values: Any) -> Edit:
    return lambda i: i["settings"]["backupConfiguration"].update(values)


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda i: i.update(deletionProtection=False), "deletionProtection is not true"),
        (_settings(deletionProtectionEnabled=False), "settings.deletionProtectionEnabled is not true"),
        (_backups(enabled=False), "settings.backupConfiguration.enabled is not true"),
        (_backups(binaryLogEnabled=False), "binaryLogEnabled is not true (no point-in-time recovery)"),
        (_settings(retainBackupsOnDelete=False), "settings.retainBackupsOnDelete is not true"),
        (lambda i: i["settings"]["ipConfiguration"].update(ipv4Enabled=True), "ipv4Enabled is not false"),
        # Cloud SQL gives a public address unless told not to: leaving the field out is a violation too.
        (lambda i: i["settings"]["ipConfiguration"].pop("ipv4Enabled"), "ipv4Enabled is not false"),
    ],
    ids=[
        "pulumi-guard",
        "cloud-sql-guard",
        "backups",
        "binary-log",
        "backups-kept",
        "public-ip",
        "public-ip-by-default",
    ],
)
def test_each_cloud_sql_guard_removed_is_reported(cloud_sql: Registration, edit: Edit, fragment: str) -> None:
    messages = run_resource(POLICY, cloud_sql.type, changed(cloud_sql.inputs, edit), protect=True, name="db")
    assert len(messages) == 1, messages
    assert messages[0].startswith("gcp DatabaseInstance db: Cloud SQL instance ") and fragment in messages[0]


def test_a_postgres_instance_is_not_the_accounting_database(cloud_sql: Registration) -> None:
    postgres = changed(cloud_sql.inputs, lambda i: i.update(databaseVersion="POSTGRES_16", deletionProtection=False))
    assert run_resource(POLICY, cloud_sql.type, postgres) == []


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda i: i.update(deletionProtection=False), "deletionProtection is not true"),
        (lambda i: i.update(backupRetentionPeriod=0), "backupRetentionPeriod is 0"),
        (lambda i: i.pop("backupRetentionPeriod"), "backupRetentionPeriod is unset"),
        (lambda i: i.update(storageEncrypted=False), "storageEncrypted is not true"),
        (lambda i: i.update(skipFinalSnapshot=True), "skipFinalSnapshot is true"),
        (lambda i: i.update(publiclyAccessible=True), "publiclyAccessible is true"),
    ],
    ids=["deletion", "no-backups", "backups-unset", "unencrypted", "no-final-snapshot", "public"],
)
def test_each_rds_guard_removed_is_reported(rds: Registration, edit: Edit, fragment: str) -> None:
    messages = run_resource(POLICY, rds.type, changed(rds.inputs, edit), protect=True, name="db")
    assert len(messages) == 1, messages
    assert messages[0].startswith("aws Instance db: RDS DB instance ") and fragment in messages[0]


AURORA: dict[str, Any] = {
    "engine": "aurora-mysql",
    "deletionProtection": True,
    "backupRetentionPeriod": 7,
    "storageEncrypted": True,
    "skipFinalSnapshot": False,
    "finalSnapshotIdentifier": "acct-final",
}


def test_an_aurora_cluster_is_judged_and_its_members_are_not() -> None:
    cluster = type_of("Aurora DB cluster")
    assert run_resource(POLICY, cluster, AURORA) == []
    bare = {"engine": "aurora-mysql", "skipFinalSnapshot": True}
    messages = run_resource(POLICY, cluster, bare, name="acct")
    assert [m.split(": Aurora DB cluster ")[1].split(";")[0] for m in messages] == [
        "deletionProtection is not true",
        "backupRetentionPeriod is unset (needs 1 day or more)",
        "storageEncrypted is not true",
        "skipFinalSnapshot is true (no snapshot when it is deleted)",
    ]
    # A member instance holds none of these: the cluster does.
    member = {"engine": "aurora-mysql", "clusterIdentifier": "acct", "instanceClass": "db.r6g.large"}
    assert run_resource(POLICY, type_of("RDS DB instance"), member) == []


def mariadb(retention: str | None = "Retain") -> dict[str, Any]:
    sts: dict[str, Any] = {
        "metadata": {
            "name": "accounting-database",
            "namespace": "slurm",
            "labels": {
                vocab.NAME_LABEL: vocab.ACCOUNTING_DATABASE_NAME,
                vocab.COMPONENT: vocab.ACCOUNTING_DATABASE_COMPONENT,
            },
        },
        "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
    }
    if retention is not None:
        sts["spec"]["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": retention, "whenScaled": "Retain"}
    return sts


def test_the_in_cluster_database_keeps_its_claims_and_is_protected() -> None:
    assert run_resource(POLICY, STS, mariadb(), protect=True) == []
    assert run_resource(POLICY, STS, mariadb(None), protect=True) == []  # unset is Retain
    [deleted] = run_resource(POLICY, STS, mariadb("Delete"), protect=True)
    assert deleted.startswith("StatefulSet slurm/accounting-database: accounting database ")
    assert "whenDeleted is Delete" in deleted
    [unprotected] = run_resource(POLICY, STS, mariadb(), protect=False)
    assert "is not protected (protect=False)" in unprotected


def test_other_statefulsets_are_not_the_accounting_database() -> None:
    other = mariadb("Delete")
    other["metadata"]["labels"][vocab.COMPONENT] = vocab.WORKER_COMPONENT
    assert run_resource(POLICY, STS, other) == []


def test_the_database_types_are_stateful_in_the_descriptors() -> None:
    assert {"Cloud SQL instance", "Cloud SQL database", "RDS DB instance", "Aurora DB cluster"} <= set(
        STATEFUL_CLOUD_TYPES.values()
    )
    messages = run_resource(P.stateful_resources_protected, type_of("Cloud SQL instance"), {}, protect=False)
    assert len(messages) == 1 and "Cloud SQL instance is not protected" in messages[0]
