"""Cloud SQL for MySQL as slurmdbd's database (``slurm.accounting.database.kind: cloud`` on GKE).

One instance per cluster, whatever its size: the instance, its database and the ``slurm`` user with a
generated password; with ``privateServicesAccess: create`` (the default) also the range reserved for Google's
services in ``gcp.network`` and the peering connection to them. The instance has a private address in the
cluster's network and no public one, so only the cluster's pods (and whatever else is in the network) reach
it. It is stateful: ``protect`` and ``retain_on_delete`` in Pulumi, and Cloud SQL's own deletion protection;
backups run daily with binary logs for point-in-time recovery. The facts and their sources are in
docs/clouds.md ("Accounting database").
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_random as random

from slonk_infra.binding import AccountingDatabase
from slonk_infra.clouds.common import CloudComponent, database_connection, database_password
from slonk_infra.declaration.accounting import DEFAULT_CLOUD_SQL_TIER, DatabaseSpec
from slonk_infra.declaration.errors import DeclarationError, Problem

FIELD = "slurm.accounting.database"
# Cloud SQL's name for MySQL 8.4 (https://cloud.google.com/sql/docs/mysql/db-versions). 8.0 entered extended
# support (charged) on 2026-07-01 by the same page; Slurm's accounting.html names MySQL or MariaDB with
# InnoDB, no version.
DATABASE_VERSION = "MYSQL_8_4"
# Set explicitly: the custom tiers (db-custom-*) are Enterprise edition tiers, and which edition a MySQL 8.4
# instance gets when none is named is not stated where we looked (unverified).
EDITION = "ENTERPRISE"
# slurmdbd's recommended InnoDB lock wait (Slurm accounting.html, "MySQL Configuration": innodb_lock_wait_timeout
# =900); a Cloud SQL for MySQL flag (https://cloud.google.com/sql/docs/mysql/flags). innodb_buffer_pool_size
# is left to Cloud SQL, which sizes it from the tier's memory.
FLAGS = {"innodb_lock_wait_timeout": "900"}
# Daily backups, kept 7; binary logs kept 7 days for point-in-time recovery
# (https://cloud.google.com/sql/docs/mysql/backup-recovery/backups, .../pitr).
RETAINED_BACKUPS = 7
LOG_RETENTION_DAYS = 7
BACKUP_START = "03:00"  # UTC, the hour a daily backup starts
DISK_TYPE = "PD_SSD"
# Cloud SQL's smallest disk, 10 GB (https://cloud.google.com/sql/docs/mysql/instance-settings); it grows by
# itself (disk_autoresize) as the job records do.
MIN_DISK_GB = 10
# Private services access: a range of the network reserved for Google's service producers, and the
# connection that peers the network with them (https://cloud.google.com/vpc/docs/configure-private-services-access).
# /20 is a choice: room for Cloud SQL and other producers in one range (Google's minimum is /24).
PEERING_SERVICE = "servicenetworking.googleapis.com"
PEERING_PREFIX = 20


@dataclass(frozen=True)
class CloudSqlDatabase:
    """The Cloud SQL resources of one cluster and how slurmdbd reaches them."""

    instance: gcp.sql.DatabaseInstance
    database: gcp.sql.Database
    user: gcp.sql.User
    password: random.RandomPassword
    connection: AccountingDatabase
    peering_range: gcp.compute.GlobalAddress | None = None
    peering: gcp.servicenetworking.Connection | None = None


def cloud_sql_problems(spec: DatabaseSpec) -> list[Problem]:
    """What Cloud SQL refuses in a declaration: an RDS class as the tier, a disk below its minimum."""
    out: list[Problem] = []
    tier = spec.instance_class
    if tier is not None and not tier.startswith("db-"):
        out.append(
            Problem(
                f"{FIELD}.instanceClass",
                f"{tier!r} is an RDS DB instance class; on gcp give a Cloud SQL machine tier, e.g. "
                f"{DEFAULT_CLOUD_SQL_TIER} (db-custom-<vCPUs>-<memory MiB>; https://cloud.google.com/sql/docs/mysql/"
                "instance-settings)",
            )
        )
    if spec.volume_gib < MIN_DISK_GB:
        out.append(
            Problem(
                f"{FIELD}.storageGib",
                f"{spec.volume_gib} GiB is below Cloud SQL's smallest disk ({MIN_DISK_GB} GB); give {MIN_DISK_GB} or more",
            )
        )
    return out


def network_path(project: pulumi.Input[str], network: pulumi.Input[str]) -> pulumi.Output[str]:
    """``projects/P/global/networks/N`` for a network given by name (Cloud SQL's privateNetwork wants the path)."""

    def path(args: list[str]) -> str:
        proj, net = args
        return net if "/" in net else f"projects/{proj}/global/networks/{net}"

    return pulumi.Output.all(project, network).apply(path)


def cloud_sql_database(
    owner: CloudComponent,
    cluster: str,
    spec: DatabaseSpec,
    *,
    project: pulumi.Input[str],
    network: pulumi.Input[str],
    region: str,
    zone: str,
) -> CloudSqlDatabase:
    """The cluster's Cloud SQL instance, database and user, children of ``owner``.

    Refuses (by field) what Cloud SQL would refuse at deploy time, before registering anything.
    """
    problems = cloud_sql_problems(spec)
    if problems:
        raise DeclarationError(problems)
    net = network_path(project, network)
    peering_range: gcp.compute.GlobalAddress | None = None
    peering: gcp.servicenetworking.Connection | None = None
    depends: list[pulumi.Resource] = []
    if spec.private_services_access in (None, "create"):
        peering_range = gcp.compute.GlobalAddress(
            owner.child_name("sql-range"),
            gcp.compute.GlobalAddressArgs(
                name=f"{cluster}-services",
                project=project,
                network=net,
                purpose="VPC_PEERING",
                address_type="INTERNAL",
                prefix_length=PEERING_PREFIX,
                description=f"slonk-infra {cluster}: private services access (Cloud SQL)",
            ),
            opts=owner.child_opts(),
        )
        peering = gcp.servicenetworking.Connection(
            owner.child_name("sql-peering"),
            gcp.servicenetworking.ConnectionArgs(
                network=net,
                service=PEERING_SERVICE,
                reserved_peering_ranges=[peering_range.name],
                # Deleting the connection fails while any producer still uses the range (and right after a
                # Cloud SQL instance is deleted); abandoning it leaves the peering to the network's owner.
                deletion_policy="ABANDON",
            ),
            opts=owner.child_opts(),
        )
        depends.append(peering)
    instance = gcp.sql.DatabaseInstance(
        owner.child_name("sql"),
        gcp.sql.DatabaseInstanceArgs(
            name=f"{cluster}-slurmdbd",
            project=project,
            region=region,
            database_version=DATABASE_VERSION,
            # Pulumi's own guard: a destroy or replacement of the instance fails while true.
            deletion_protection=True,
            settings=gcp.sql.DatabaseInstanceSettingsArgs(
                tier=spec.instance_class or DEFAULT_CLOUD_SQL_TIER,
                edition=EDITION,
                availability_type="REGIONAL" if spec.high_availability else "ZONAL",
                location_preference=gcp.sql.DatabaseInstanceSettingsLocationPreferenceArgs(zone=zone),
                disk_size=spec.volume_gib,
                disk_type=DISK_TYPE,
                disk_autoresize=True,
                # Cloud SQL's own guard: the API refuses to delete the instance while true.
                deletion_protection_enabled=True,
                # If the instance is deleted all the same, its automated backups stay (kept by their retention
                # setting): RDS keeps a final snapshot for the same reason. settings.retainBackupsOnDelete,
                # https://cloud.google.com/sql/docs/mysql/backup-recovery/retain-backups-on-delete
                retain_backups_on_delete=True,
                ip_configuration=gcp.sql.DatabaseInstanceSettingsIpConfigurationArgs(
                    ipv4_enabled=False,
                    private_network=net,
                    allocated_ip_range=peering_range.name if peering_range is not None else None,
                ),
                backup_configuration=gcp.sql.DatabaseInstanceSettingsBackupConfigurationArgs(
                    enabled=True,
                    binary_log_enabled=True,
                    start_time=BACKUP_START,
                    transaction_log_retention_days=LOG_RETENTION_DAYS,
                    backup_retention_settings=gcp.sql.DatabaseInstanceSettingsBackupConfigurationBackupRetentionSettingsArgs(
                        retained_backups=RETAINED_BACKUPS, retention_unit="COUNT"
                    ),
                ),
                database_flags=[
                    gcp.sql.DatabaseInstanceSettingsDatabaseFlagArgs(name=name, value=value)
                    for name, value in FLAGS.items()
                ],
                user_labels={"slonk-cluster": cluster, "slonk-role": "slurmdbd"},
            ),
        ),
        # The private address exists only once the network is peered with Google's services.
        opts=owner.stateful_opts(depends_on=depends),
    )
    password = database_password(owner, "sql-password")
    database = gcp.sql.Database(
        owner.child_name("sql-db"),
        gcp.sql.DatabaseArgs(name=AccountingDatabase.database, instance=instance.name, project=project),
        opts=owner.stateful_opts(),
    )
    user = gcp.sql.User(
        owner.child_name("sql-user"),
        gcp.sql.UserArgs(
            name=AccountingDatabase.user,
            instance=instance.name,
            project=project,
            host="%",
            password=password.result,
        ),
        opts=owner.child_opts(),
    )
    connection = database_connection(instance.private_ip_address, password)
    return CloudSqlDatabase(
        instance=instance,
        database=database,
        user=user,
        password=password,
        connection=connection,
        peering_range=peering_range,
        peering=peering,
    )
