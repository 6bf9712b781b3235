"""Accounting database protected: slurmdbd's records (jobs, usage, associations) survive a mistake.

Whichever kind the stack declares (``slurm.accounting.database``), its database must be recoverable and out
of reach: a Cloud SQL for MySQL instance with deletion protection, backups and binary logs (point-in-time
recovery) and no public address; an RDS instance or Aurora cluster with deletion protection, backups, encrypted
storage, a final snapshot and no public access; the in-cluster MariaDB StatefulSet with its volume claims kept
when it is deleted, and protected from ``pulumi destroy``. The cloud resources' ``protect`` is judged with the
other stateful resources (their types are in each target's ``PolicyTypes.stateful``).
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra import vocab
from slonk_infra.policy.common import STATEFUL_CLOUD_TYPES
from slonk_infra.policy.props import as_int, describe, get, kind_of, labels

# The database types come from the targets' descriptors (``PolicyTypes.stateful``, token -> what it is); these
# are the names the gcp and aws descriptors give them, each read its own way.
CLOUD_SQL_INSTANCE = "Cloud SQL instance"
RDS_INSTANCE = "RDS DB instance"
RDS_CLUSTER = "Aurora DB cluster"


def _cloud_sql(props: Any) -> list[str]:
    """Cloud SQL: both deletion guards, backups with binary logs, no public IPv4 address."""
    version = get(props, "databaseVersion", default="")
    if isinstance(version, str) and version and not version.startswith("MYSQL"):
        return []  # slurmdbd needs MySQL; a PostgreSQL or SQL Server instance is someone else's
    settings = get(props, "settings", default={})
    backups = get(settings, "backupConfiguration", default={})
    out = []
    if get(props, "deletionProtection") is not True:
        out.append("deletionProtection is not true (Pulumi would delete the instance on destroy or replace)")
    if get(settings, "deletionProtectionEnabled") is not True:
        out.append("settings.deletionProtectionEnabled is not true (Cloud SQL would accept a delete)")
    if get(backups, "enabled") is not True:
        out.append("settings.backupConfiguration.enabled is not true (no daily backups)")
    if get(settings, "retainBackupsOnDelete") is not True:
        out.append("settings.retainBackupsOnDelete is not true (deleting the instance would delete its backups)")
    if get(backups, "binaryLogEnabled") is not True:
        out.append("settings.backupConfiguration.binaryLogEnabled is not true (no point-in-time recovery)")
    # Cloud SQL gives an instance a public IPv4 address unless told not to.
    if get(settings, "ipConfiguration", "ipv4Enabled", default=True) is not False:
        out.append("settings.ipConfiguration.ipv4Enabled is not false (a public address)")
    return out


def _rds(props: Any, *, cluster: bool) -> list[str]:
    """RDS instance or Aurora cluster: deletion protection, backups, encryption, a final snapshot, private."""
    if not cluster and (get(props, "clusterIdentifier") or str(get(props, "engine", default="")).startswith("aurora")):
        return []  # an Aurora cluster's member: backups, encryption and protection are the cluster's
    out = []
    if get(props, "deletionProtection") is not True:
        out.append("deletionProtection is not true")
    retention = as_int(get(props, "backupRetentionPeriod"))
    if retention is None or retention < 1:
        out.append(f"backupRetentionPeriod is {retention if retention is not None else 'unset'} (needs 1 day or more)")
    if get(props, "storageEncrypted") is not True:
        out.append("storageEncrypted is not true")
    if get(props, "skipFinalSnapshot") is True:
        out.append("skipFinalSnapshot is true (no snapshot when it is deleted)")
    if not cluster and get(props, "publiclyAccessible") is True:
        out.append("publiclyAccessible is true (a public address)")
    return out


def _statefulset(args: ResourceValidationArgs) -> list[str]:
    """The in-cluster MariaDB: claims retained when the StatefulSet goes, and ``protect``."""
    if labels(args.props).get(vocab.COMPONENT) != vocab.ACCOUNTING_DATABASE_COMPONENT:
        return []
    out = []
    # Unset is Retain (Kubernetes' default for persistentVolumeClaimRetentionPolicy).
    when_deleted = get(args.props, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
    if when_deleted not in (None, "Retain"):
        out.append(
            f"persistentVolumeClaimRetentionPolicy.whenDeleted is {when_deleted} (its volume claims would be "
            "deleted with it)"
        )
    if not args.opts.protect:
        out.append("is not protected (protect=False)")
    return out


def _validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
    what = STATEFUL_CLOUD_TYPES.get(args.resource_type)
    if what == CLOUD_SQL_INSTANCE:
        problems = _cloud_sql(args.props)
    elif what in (RDS_INSTANCE, RDS_CLUSTER):
        problems = _rds(args.props, cluster=what == RDS_CLUSTER)
    elif kind_of(args.resource_type) == "StatefulSet":
        problems, what = _statefulset(args), "accounting database"
    else:
        return
    where = describe(args.resource_type, args.props, args.name)
    for problem in problems:
        report(f"{where}: {what} {problem}; slurmdbd's records would not survive a mistake", None)


accounting_database_protected = ResourceValidationPolicy(
    name="accounting-database-protected",
    description=(
        "The accounting database (Cloud SQL, RDS / Aurora, the in-cluster MariaDB) keeps deletion protection, "
        "backups (binary logs, a final snapshot), encryption and no public address."
    ),
    validate=_validate,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Cloud SQL: deletion_protection and settings.deletion_protection_enabled true, "
        "settings.retain_backups_on_delete true, backup_configuration enabled with binary_log_enabled, ip_configuration.ipv4_enabled false with a private_network. RDS / "
        "Aurora: deletion_protection true, backup_retention_period >= 1, storage_encrypted true, "
        "skip_final_snapshot false with a final_snapshot_identifier, publicly_accessible false. The in-cluster "
        "database's StatefulSet: persistentVolumeClaimRetentionPolicy.whenDeleted Retain and "
        "ResourceOptions(protect=True). slonk-infra's own components do all of this."
    ),
)
