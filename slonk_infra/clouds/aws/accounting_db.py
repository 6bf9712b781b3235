"""RDS for MySQL as slurmdbd's database (``slurm.accounting.database.kind: cloud`` on EKS).

One DB instance per cluster, whatever its size, with what it needs around it: a DB subnet group over the
declared subnets, a security group admitting MySQL only from the cluster's security group (the one EKS puts
on managed nodes, where slurmdbd's pod runs), a parameter group with slurmdbd's InnoDB setting, and the
master user ``slurm`` with a generated password. Not publicly accessible, storage encrypted, daily backups,
deletion protection, and a final snapshot if it is ever deleted; ``protect`` and ``retain_on_delete`` in
Pulumi. RDS for MySQL rather than Aurora: one instance is what slurmdbd needs (its load is one writer, the
job records), Aurora needs a cluster and at least one instance and bills I/O; Multi-AZ is the
``highAvailability`` switch. The facts and their sources are in docs/clouds.md ("Accounting database").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from slonk_infra import vocab
from slonk_infra.binding import AccountingDatabase
from slonk_infra.clouds.common import CloudComponent, database_connection, database_password
from slonk_infra.declaration.accounting import DEFAULT_RDS_CLASS, DatabaseSpec
from slonk_infra.declaration.errors import DeclarationError, Problem

FIELD = "slurm.accounting.database"
ENGINE = "mysql"
# RDS for MySQL 8.4 and its parameter group family (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/
# MySQL.Concepts.VersionMgmt.html; families: .../Appendix.MySQL.Parameters.html). A major version alone lets
# RDS pick the default minor and apply minor upgrades in the maintenance window.
ENGINE_VERSION = "8.4"
PARAMETER_FAMILY = "mysql8.4"
# slurmdbd's recommended InnoDB lock wait (Slurm accounting.html, "MySQL Configuration"); a dynamic MySQL
# variable, so applied without a reboot. innodb_buffer_pool_size stays RDS's default, sized from the class's
# memory (its default formula was not checked here).
PARAMETERS = {"innodb_lock_wait_timeout": "900"}
BACKUP_RETENTION_DAYS = 7
BACKUP_WINDOW = "03:00-04:00"  # UTC
MAINTENANCE_WINDOW = "sun:05:00-sun:06:00"  # UTC, after the backup window
STORAGE_TYPE = "gp3"
# RDS for MySQL gp3 storage: 20 GiB at least (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/
# CHAP_Storage.html). Storage autoscaling may grow it up to this many times the declared size.
MIN_STORAGE_GIB = 20
AUTOSCALE_FACTOR = 4
# A DB subnet group needs subnets in at least two Availability Zones (RDS API CreateDBSubnetGroup).
MIN_SUBNETS = 2


@dataclass(frozen=True)
class RdsDatabase:
    """The RDS resources of one cluster and how slurmdbd reaches them."""

    instance: aws.rds.Instance
    subnet_group: aws.rds.SubnetGroup
    security_group: aws.ec2.SecurityGroup
    parameter_group: aws.rds.ParameterGroup
    password: random.RandomPassword
    connection: AccountingDatabase


def rds_identifier(cluster: str, suffix: str) -> str:
    """An RDS identifier: letters, digits and single hyphens, starting with a letter, at most 63 characters."""
    base = re.sub(r"-+", "-", f"{cluster}-{suffix}").strip("-")
    if not base[:1].isalpha():
        base = f"db-{base}"
    return base[:63].rstrip("-")


def rds_problems(spec: DatabaseSpec, subnets: Sequence[object]) -> list[Problem]:
    """What RDS refuses in a declaration: a Cloud SQL tier as the class, too little storage, one subnet, and
    ``privateServicesAccess`` (a GCP notion)."""
    out: list[Problem] = []
    if spec.instance_class is not None and not spec.instance_class.startswith("db."):
        out.append(
            Problem(
                f"{FIELD}.instanceClass",
                f"{spec.instance_class!r} is a Cloud SQL tier; on aws give an RDS DB instance class, e.g. "
                f"{DEFAULT_RDS_CLASS} (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/Concepts.DBInstanceClass.html)",
            )
        )
    if spec.volume_gib < MIN_STORAGE_GIB:
        out.append(
            Problem(
                f"{FIELD}.storageGib",
                f"{spec.volume_gib} GiB is below RDS for MySQL's {MIN_STORAGE_GIB} GiB of gp3 storage; give "
                f"{MIN_STORAGE_GIB} or more",
            )
        )
    if spec.private_services_access is not None:
        out.append(
            Problem(
                f"{FIELD}.privateServicesAccess",
                "is for gcp (Cloud SQL's peering with gcp.network); on aws the database sits in aws.subnetIds "
                "behind its own security group: remove it",
            )
        )
    if len(subnets) < MIN_SUBNETS:
        out.append(
            Problem(
                "aws.subnetIds",
                f"{len(subnets)} subnet(s); an RDS DB subnet group needs subnets in at least {MIN_SUBNETS} "
                "Availability Zones (slurm.accounting.database.kind: cloud): add a private subnet of another zone",
            )
        )
    return out


def rds_database(
    owner: CloudComponent,
    cluster: str,
    spec: DatabaseSpec,
    *,
    vpc_id: pulumi.Input[str],
    subnets: Sequence[pulumi.Input[str]],
    cluster_security_group: pulumi.Input[str],
) -> RdsDatabase:
    """The cluster's RDS instance and what surrounds it, children of ``owner``.

    Refuses (by field) what RDS would refuse at deploy time, before registering anything. Whether the
    subnets really lie in two zones is EC2's to say: RDS refuses the subnet group otherwise
    (DBSubnetGroupDoesNotCoverEnoughAZs).
    """
    problems = rds_problems(spec, subnets)
    if problems:
        raise DeclarationError(problems)
    name = rds_identifier(cluster, "slurmdbd")
    subnet_group = aws.rds.SubnetGroup(
        owner.child_name("rds-subnets"),
        aws.rds.SubnetGroupArgs(
            name=name,
            subnet_ids=list(subnets),
            description=f"slonk-infra {cluster}: slurmdbd's database",
            tags={"Name": name},
        ),
        opts=owner.child_opts(),
    )
    security_group = aws.ec2.SecurityGroup(
        owner.child_name("rds"),
        aws.ec2.SecurityGroupArgs(
            vpc_id=vpc_id,
            description=f"slonk-infra {cluster}: MySQL from the cluster's nodes only",
            # Only from the EKS cluster security group: the nodes (and pods on them) carry it.
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    from_port=vocab.MARIADB_PORT,
                    to_port=vocab.MARIADB_PORT,
                    protocol="tcp",
                    security_groups=[cluster_security_group],
                    description="MySQL from the cluster (slurmdbd)",
                )
            ],
            # No egress rule: a database answers, it never opens connections (replies pass statefully).
            egress=[],
            tags={"Name": f"{cluster}-slurmdbd-db"},
        ),
        opts=owner.child_opts(),
    )
    parameter_group = aws.rds.ParameterGroup(
        owner.child_name("rds-params"),
        aws.rds.ParameterGroupArgs(
            name=name,
            family=PARAMETER_FAMILY,
            description=f"slonk-infra {cluster}: slurmdbd's InnoDB settings",
            parameters=[
                aws.rds.ParameterGroupParameterArgs(name=key, value=value, apply_method="immediate")
                for key, value in PARAMETERS.items()
            ],
        ),
        opts=owner.child_opts(),
    )
    password = database_password(owner, "rds-password")
    instance = aws.rds.Instance(
        owner.child_name("rds-db"),
        aws.rds.InstanceArgs(
            identifier=name,
            engine=ENGINE,
            engine_version=ENGINE_VERSION,
            instance_class=spec.instance_class or DEFAULT_RDS_CLASS,
            allocated_storage=spec.volume_gib,
            max_allocated_storage=spec.volume_gib * AUTOSCALE_FACTOR,
            storage_type=STORAGE_TYPE,
            storage_encrypted=True,
            username=AccountingDatabase.user,
            password=password.result,
            port=vocab.MARIADB_PORT,
            db_subnet_group_name=subnet_group.name,
            vpc_security_group_ids=[security_group.id],
            parameter_group_name=parameter_group.name,
            publicly_accessible=False,
            multi_az=bool(spec.high_availability),
            backup_retention_period=BACKUP_RETENTION_DAYS,
            backup_window=BACKUP_WINDOW,
            maintenance_window=MAINTENANCE_WINDOW,
            copy_tags_to_snapshot=True,
            auto_minor_version_upgrade=True,
            deletion_protection=True,
            # If it is ever deleted (after unprotecting it twice), RDS keeps a last snapshot first.
            skip_final_snapshot=False,
            final_snapshot_identifier=rds_identifier(cluster, "slurmdbd-final"),
            tags={"Name": name, "slonk-cluster": cluster},
        ),
        opts=owner.stateful_opts(),
    )
    connection = database_connection(instance.address, password)
    return RdsDatabase(
        instance=instance,
        subnet_group=subnet_group,
        security_group=security_group,
        parameter_group=parameter_group,
        password=password,
        connection=connection,
    )
