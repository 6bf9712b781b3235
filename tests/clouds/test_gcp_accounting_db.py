"""Cloud SQL for MySQL as slurmdbd's database (slurm.accounting.database.kind: cloud on gcp): the resources and
their inputs against the documented values, what is refused by field, and that other kinds create nothing."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan, deploy_cloud
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.offline.fake_clouds import FAKE_PASSWORD
from slonk_infra.offline.runner import OfflineRun, Registration, run_offline
from tests.declaration.test_errors import Raw, assert_refused_at, edit, gcp

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")

INSTANCE = "gcp:sql/databaseInstance:DatabaseInstance"
DATABASE = "gcp:sql/database:Database"
USER = "gcp:sql/user:User"
PASSWORD = "random:index/randomPassword:RandomPassword"
RANGE = "gcp:compute/globalAddress:GlobalAddress"
PEERING = "gcp:servicenetworking/connection:Connection"
DB_TYPES = (INSTANCE, DATABASE, USER, PASSWORD, RANGE, PEERING)


def database(**fields: Any) -> Any:
    def set_database(raw: Raw) -> None:
        raw["slurm"]["accounting"]["database"] = fields

    return set_database


def run(raw: Raw) -> OfflineRun[CloudResult]:
    """The cloud layer offline, with the database connection exported (wire form keeps secret envelopes)."""
    plan = build_plan(raw)

    def program() -> CloudResult:
        result = deploy_cloud(plan).result
        if result.accounting_database is not None:
            pulumi.export("host", result.accounting_database.host)
            pulumi.export("password", result.accounting_database.password)
        return result

    return run_offline(program)


def one(found: OfflineRun[CloudResult], typ: str) -> Registration:
    [reg] = found.of_type(typ)
    return reg


@pytest.fixture(scope="module")
def shipped() -> OfflineRun[CloudResult]:
    raw = gcp()
    assert raw["slurm"]["accounting"]["database"] == {"kind": "cloud"}  # the shipped gcp stack uses Cloud SQL
    return run(raw)


def test_the_instance_is_mysql_with_a_private_address_only(shipped: OfflineRun[CloudResult]) -> None:
    inputs = one(shipped, INSTANCE).inputs
    assert inputs["name"] == "slonk-gcp-slurmdbd" and inputs["region"] == "us-central1"
    assert inputs["databaseVersion"] == "MYSQL_8_4"
    ip = inputs["settings"]["ipConfiguration"]
    assert ip["ipv4Enabled"] is False
    assert ip["privateNetwork"] == "projects/my-ml-project/global/networks/default"
    assert ip["allocatedIpRange"] == "slonk-gcp-services"
    assert "authorizedNetworks" not in ip


def test_backups_point_in_time_recovery_and_both_deletion_guards(shipped: OfflineRun[CloudResult]) -> None:
    reg = one(shipped, INSTANCE)
    settings = reg.inputs["settings"]
    assert reg.inputs["deletionProtection"] is True and settings["deletionProtectionEnabled"] is True
    assert settings["retainBackupsOnDelete"] is True
    assert reg.protect and reg.retain_on_delete
    backups = settings["backupConfiguration"]
    assert backups["enabled"] is True and backups["binaryLogEnabled"] is True
    assert backups["backupRetentionSettings"] == {"retainedBackups": 7, "retentionUnit": "COUNT"}
    assert backups["transactionLogRetentionDays"] == 7


def test_slurmdbds_innodb_setting_the_default_tier_and_the_declared_size(shipped: OfflineRun[CloudResult]) -> None:
    settings = one(shipped, INSTANCE).inputs["settings"]
    assert settings["databaseFlags"] == [{"name": "innodb_lock_wait_timeout", "value": "900"}]
    assert settings["tier"] == "db-custom-2-8192" and settings["edition"] == "ENTERPRISE"
    assert settings["availabilityType"] == "ZONAL"
    assert settings["diskSize"] == 50 and settings["diskAutoresize"] is True
    assert settings["locationPreference"] == {"zone": "us-central1-a"}


def test_private_services_access_is_a_peering_range_and_connection(shipped: OfflineRun[CloudResult]) -> None:
    address = one(shipped, RANGE).inputs
    assert address["purpose"] == "VPC_PEERING" and address["addressType"] == "INTERNAL"
    assert address["prefixLength"] == 20 and address["network"] == "projects/my-ml-project/global/networks/default"
    peering = one(shipped, PEERING)
    assert peering.inputs["service"] == "servicenetworking.googleapis.com"
    assert peering.inputs["reservedPeeringRanges"] == [address["name"]]
    assert peering.inputs["deletionPolicy"] == "ABANDON"
    # The instance's private address is allocated only once the network is peered.
    assert peering.urn in one(shipped, INSTANCE).dependencies


def test_database_and_user_with_a_protected_generated_password(shipped: OfflineRun[CloudResult]) -> None:
    db = one(shipped, DATABASE)
    assert db.inputs["name"] == "slurm_acct_db" and db.protect
    user = one(shipped, USER).inputs
    assert user["name"] == "slurm" and user["host"] == "%"
    password = one(shipped, PASSWORD)
    assert password.protect and password.inputs["special"] is False and password.inputs["length"] == 32


def test_the_connection_names_the_private_address_and_a_secret_password(shipped: OfflineRun[CloudResult]) -> None:
    conn = shipped.value.accounting_database
    assert conn is not None and (conn.port, conn.user, conn.database) == (3306, "slurm", "slurm_acct_db")
    host, password = shipped.exports["host"], shipped.exports["password"]
    assert "slonk-gcp-sql.privateIpAddress" in str(host)
    assert isinstance(password, dict) and password.get("value") == FAKE_PASSWORD
    assert password.get(pulumi.runtime.rpc._special_sig_key) == pulumi.runtime.rpc._special_secret_sig


def test_high_availability_and_a_declared_tier() -> None:
    raw = edit(gcp, database(kind="cloud", instanceClass="db-custom-4-16384", highAvailability=True, storageGib=100))
    settings = one(run(raw), INSTANCE).inputs["settings"]
    assert (settings["tier"], settings["availabilityType"], settings["diskSize"]) == (
        "db-custom-4-16384",
        "REGIONAL",
        100,
    )


def test_an_existing_peering_is_used_not_made() -> None:
    found = run(edit(gcp, database(kind="cloud", privateServicesAccess="existing")))
    assert not found.of_type(RANGE) and not found.of_type(PEERING)
    ip = one(found, INSTANCE).inputs["settings"]["ipConfiguration"]
    assert "allocatedIpRange" not in ip and ip["ipv4Enabled"] is False


@pytest.mark.parametrize(
    ("fields", "kind"),
    [({"kind": "external", "host": "slurmdbd.example.org"}, "external"), ({"kind": "in-cluster"}, "in-cluster")],
)
def test_other_kinds_create_nothing_in_the_cloud(fields: dict[str, str], kind: str) -> None:
    found = run(edit(gcp, database(**fields)))
    assert [r.type for r in found.registrations if r.type in DB_TYPES] == []
    assert found.value.accounting_database is None, kind


def test_an_rds_class_is_refused_by_field() -> None:
    with pytest.raises(DeclarationError) as info:
        run(edit(gcp, database(kind="cloud", instanceClass="db.m6g.large")))
    [problem] = info.value.problems
    assert problem.path == "slurm.accounting.database.instanceClass"
    assert "'db.m6g.large' is an RDS DB instance class" in problem.message and "db-custom-2-8192" in problem.message


def test_a_disk_below_cloud_sqls_minimum_is_refused_by_field() -> None:
    with pytest.raises(DeclarationError) as info:
        run(edit(gcp, database(kind="cloud", storageGib=5)))
    assert [(p.path, "below Cloud SQL's smallest disk (10 GB)" in p.message) for p in info.value.problems] == [
        ("slurm.accounting.database.storageGib", True)
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("instanceClass", "db-custom-2-8192"), ("highAvailability", True), ("privateServicesAccess", "existing")],
)
def test_cloud_fields_are_refused_with_other_kinds(field: str, value: object) -> None:
    raw = edit(gcp, database(kind="in-cluster", **{field: value}))
    assert_refused_at(raw, "slurm.accounting.database", [f"{field} is for kind: cloud", "with kind: in-cluster"])


def test_a_malformed_class_is_refused() -> None:
    raw = edit(gcp, database(kind="cloud", instanceClass="large"))
    assert_refused_at(raw, "slurm.accounting.database.instanceClass", ["pattern"])
