"""RDS for MySQL as slurmdbd's database (slurm.accounting.database.kind: cloud on aws): the resources and their
inputs against the documented values, what is refused by field, and that other kinds create nothing."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan, deploy_cloud
from slonk_infra.clouds.aws.accounting_db import rds_identifier
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.offline.fake_clouds import FAKE_PASSWORD
from slonk_infra.offline.runner import OfflineRun, Registration, run_offline
from tests.declaration.test_errors import Raw, assert_refused_at, aws, edit

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")

INSTANCE = "aws:rds/instance:Instance"
SUBNETS = "aws:rds/subnetGroup:SubnetGroup"
PARAMS = "aws:rds/parameterGroup:ParameterGroup"
SG = "aws:ec2/securityGroup:SecurityGroup"
PASSWORD = "random:index/randomPassword:RandomPassword"
DB_TYPES = (INSTANCE, SUBNETS, PARAMS, PASSWORD)


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

    return run_offline(program, config={"aws:region": "us-east-1"})


def one(found: OfflineRun[CloudResult], typ: str) -> Registration:
    [reg] = found.of_type(typ)
    return reg


def db_security_group(found: OfflineRun[CloudResult]) -> Registration:
    [reg] = [r for r in found.of_type(SG) if r.name.endswith("-rds")]
    return reg


@pytest.fixture(scope="module")
def shipped() -> OfflineRun[CloudResult]:
    raw = aws()
    assert raw["slurm"]["accounting"]["database"] == {"kind": "cloud"}  # the shipped aws stack uses RDS
    return run(raw)


def test_an_encrypted_private_mysql_instance(shipped: OfflineRun[CloudResult]) -> None:
    inputs = one(shipped, INSTANCE).inputs
    assert (inputs["engine"], inputs["engineVersion"], inputs["identifier"]) == ("mysql", "8.4", "slonk-aws-slurmdbd")
    assert inputs["publiclyAccessible"] is False and inputs["storageEncrypted"] is True
    assert (inputs["instanceClass"], inputs["allocatedStorage"], inputs["storageType"]) == ("db.m6g.large", 50, "gp3")
    assert inputs["maxAllocatedStorage"] == 200 and inputs["multiAz"] is False
    assert inputs["username"] == "slurm" and inputs["port"] == 3306


def test_backups_deletion_protection_and_a_final_snapshot(shipped: OfflineRun[CloudResult]) -> None:
    reg = one(shipped, INSTANCE)
    assert reg.protect and reg.retain_on_delete
    assert reg.inputs["deletionProtection"] is True and reg.inputs["backupRetentionPeriod"] == 7
    assert reg.inputs["skipFinalSnapshot"] is False
    assert reg.inputs["finalSnapshotIdentifier"] == "slonk-aws-slurmdbd-final"


def test_the_subnet_group_spans_the_declared_subnets(shipped: OfflineRun[CloudResult]) -> None:
    group = one(shipped, SUBNETS).inputs
    assert group["subnetIds"] == aws()["aws"]["subnetIds"] and len(group["subnetIds"]) >= 2
    assert one(shipped, INSTANCE).inputs["dbSubnetGroupName"] == group["name"]


def test_mysql_is_admitted_only_from_the_clusters_security_group(shipped: OfflineRun[CloudResult]) -> None:
    sg = db_security_group(shipped)
    assert sg.inputs["vpcId"] == aws()["aws"]["vpcId"]
    # sg-0cluster: the created EKS cluster's security group, as the fake cloud answers it.
    assert sg.inputs["ingress"] == [
        {
            "fromPort": 3306,
            "toPort": 3306,
            "protocol": "tcp",
            "securityGroups": ["sg-0cluster"],
            "description": "MySQL from the cluster (slurmdbd)",
        }
    ]
    assert sg.inputs["egress"] == []
    assert "cidrBlocks" not in sg.inputs["ingress"][0]


def test_the_parameter_group_sets_slurmdbds_lock_wait(shipped: OfflineRun[CloudResult]) -> None:
    params = one(shipped, PARAMS).inputs
    assert params["family"] == "mysql8.4"
    assert params["parameters"] == [{"name": "innodb_lock_wait_timeout", "value": "900", "applyMethod": "immediate"}]
    assert one(shipped, INSTANCE).inputs["parameterGroupName"] == params["name"]


def test_the_connection_names_the_address_and_a_secret_password(shipped: OfflineRun[CloudResult]) -> None:
    password = one(shipped, PASSWORD)
    assert password.protect and password.inputs["special"] is False
    conn = shipped.value.accounting_database
    assert conn is not None and (conn.port, conn.user) == (3306, "slurm")
    assert "slonk-aws-rds-db.address" in str(shipped.exports["host"])
    secret = shipped.exports["password"]
    assert isinstance(secret, dict) and secret.get("value") == FAKE_PASSWORD
    assert secret.get(pulumi.runtime.rpc._special_sig_key) == pulumi.runtime.rpc._special_secret_sig


def test_an_existing_cluster_admits_its_own_security_group() -> None:
    def existing(raw: Raw) -> None:
        raw["kubernetes"]["create"] = False
        raw["slurm"]["accounting"]["database"] = {"kind": "cloud", "highAvailability": True}

    found = run(edit(aws, existing))
    assert db_security_group(found).inputs["ingress"][0]["securityGroups"] == ["sg-0existing"]
    assert one(found, INSTANCE).inputs["multiAz"] is True


@pytest.mark.parametrize(
    "fields", [{"kind": "external", "host": "slurmdbd.example.org"}, {"kind": "in-cluster"}], ids=["external", "in"]
)
def test_other_kinds_create_nothing_in_the_cloud(fields: dict[str, str]) -> None:
    found = run(edit(aws, database(**fields)))
    assert [r.type for r in found.registrations if r.type in DB_TYPES] == []
    assert not [r for r in found.of_type(SG) if r.name.endswith("-rds")]
    assert found.value.accounting_database is None


def refused(raw: Raw) -> dict[str, str]:
    with pytest.raises(DeclarationError) as info:
        run(raw)
    return {p.path: p.message for p in info.value.problems}


def test_one_subnet_is_refused_by_field() -> None:
    problems = refused(edit(aws, lambda r: r["aws"].update(subnetIds=["subnet-0aaaaaaaaaaaaaaaa"])))
    assert "at least 2 Availability Zones" in problems["aws.subnetIds"]


def test_a_cloud_sql_tier_little_storage_and_a_gcp_field_are_refused_by_field() -> None:
    problems = refused(
        edit(
            aws, database(kind="cloud", instanceClass="db-custom-2-8192", storageGib=10, privateServicesAccess="create")
        )
    )
    assert "is a Cloud SQL tier" in problems["slurm.accounting.database.instanceClass"]
    assert "below RDS for MySQL's 20 GiB" in problems["slurm.accounting.database.storageGib"]
    assert "is for gcp" in problems["slurm.accounting.database.privateServicesAccess"]


def test_cloud_fields_are_refused_with_an_external_database() -> None:
    raw = edit(aws, database(kind="external", host="db.example.org", instanceClass="db.m6g.large"))
    assert_refused_at(raw, "slurm.accounting.database", ["instanceClass is for kind: cloud", "with kind: external"])


@pytest.mark.parametrize(
    ("cluster", "suffix", "expected"),
    [("a--b", "slurmdbd", "a-b-slurmdbd"), ("9lives", "slurmdbd", "db-9lives-slurmdbd"), ("x" * 70, "s", "x" * 63)],
)
def test_rds_identifiers_follow_rds_rules(cluster: str, suffix: str, expected: str) -> None:
    assert rds_identifier(cluster, suffix) == expected
