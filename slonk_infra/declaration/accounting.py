"""Accounting, fair share and quotas as code: the ``slurm.accounting`` section of the declaration.

With it, slurm.conf points slurmctld at a slurmdbd (``database``), turns on multifactor priority with the
declared weights, and enforces associations, limits and QOS; the accounts, users and QOS declared here are
what the reconciler (:mod:`slonk_infra.accounting`) makes the slurmdbd hold, with ``sacctmgr``.

The old form, ``accounting: true`` with ``accountingHost``, still parses: it reads as an external slurmdbd
at that host, recording jobs only (``enforce: false``, no priority weights), so a stack written for it
renders and schedules as before. See docs/accounting.md.

Cross-field checks (an account's users are declared users, names that refer to one another exist, limits
fit the cluster's GPUs) are in :func:`accounting_problems`, called from :mod:`slonk_infra.plan.checks`,
which knows the cluster's GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

# (field path, message): what :class:`slonk_infra.declaration.errors.Problem` holds. Plain pairs, because the
# errors module reads the declaration model, which imports this module.
Problem = tuple[str, str]


# slurmdbd.conf(5) DbdPort: "The port number that the Slurm Database Daemon (slurmdbd) listens to for work.
# The default value is SLURMDBD_PORT as established at system build time", 6819 in Slurm's own build
# (slurm.conf(5) AccountingStoragePort says the same of its default).
SLURMDBD_PORT = 6819
# Default size of the database volume of an in-cluster or cloud database. A choice, not a Slurm figure:
# job records are a few kB each, so 50 GiB holds tens of millions of jobs before purging is needed.
DEFAULT_DATABASE_GIB = 50
# The in-cluster MariaDB's memory (memoryMib): the server's own memory and connections beside the buffer pool,
# and how far below the limit the request is set. 3072 gives the 2048 MiB buffer pool slurmdbd 26.05 is
# content with (slonk_infra/kube/accounting.py); 1536, a 512 MiB pool, fits a laptop cluster.
DEFAULT_DATABASE_MEMORY_MIB = 3072
# Purge*After (slurmdbd.conf(5)): without it records are never purged and the database only grows. A year of
# job records, as CoreWeave SUNK's chart keeps them.
DEFAULT_RETAIN_MONTHS = 12
DATABASE_SERVER_MIB = 1024
DATABASE_REQUEST_MARGIN_MIB = 512
MIN_DATABASE_MEMORY_MIB = 1536
MAX_DATABASE_MEMORY_MIB = 1024 * 1024
# kind: cloud's default server sizes, both 2 vCPUs and 8 GiB (slurmdbd's load is its job records; Slurm's
# accounting.html asks for an InnoDB buffer pool of 5-50% of the server's memory, which both clouds size from
# the memory themselves). Cloud SQL Enterprise custom tier db-custom-<vCPUs>-<MiB>
# (https://cloud.google.com/sql/docs/mysql/instance-settings); RDS db.m6g.large
# (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/Concepts.DBInstanceClass.Summary.html).
DEFAULT_CLOUD_SQL_TIER = "db-custom-2-8192"
DEFAULT_RDS_CLASS = "db.m6g.large"
# Cloud SQL tiers are db-<...> with dashes, RDS classes db.<family>.<size>; the adapters check which one.
INSTANCE_CLASS_PATTERN = r"^db[-.][a-z0-9][a-z0-9.-]{1,62}$"
# Slurm creates the root account itself and keeps "normal", the QOS every association gets unless told
# otherwise (sacctmgr(1); accounting.html). Neither may be declared; both may be named.
ROOT_ACCOUNT = "root"
BUILTIN_QOS = "normal"
# slurmdbd keeps names in lower case (sacctmgr(1) NOTE), so only lower-case names are accepted: a name
# with capitals would come back from sacctmgr different and never match.
ACCOUNTING_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
# Slurm's time string as sacctmgr reads MaxWall (sacctmgr(1); same forms as slurm.conf MaxTime).
SLURM_TIME = re.compile(r"^(\d+-\d+(:\d+(:\d+)?)?|\d+(:\d+(:\d+)?)?)$")
# A 32-bit unsigned value: the PriorityWeight* keys of slurm.conf(5) and a QOS Priority.
MAX_UINT32 = 2**32 - 1


def _name(value: str) -> str:
    """Lowercase letters, digits, '_', '.' and '-', starting with a letter or digit, at most 64 characters."""
    if not ACCOUNTING_NAME.match(value):
        raise ValueError(
            f"{value!r} is not an accounting name: lowercase letters, digits, '_', '.' and '-', starting with a "
            "letter or digit, at most 64 (slurmdbd keeps names in lower case)"
        )
    return value


def _wall(value: str) -> str:
    """A Slurm time: MINUTES, MM:SS, HH:MM:SS, DAYS-HH, DAYS-HH:MM or DAYS-HH:MM:SS."""
    if SLURM_TIME.match(value):
        return value
    raise ValueError(
        f"{value!r} is not a Slurm time: use MINUTES, MM:SS, HH:MM:SS, DAYS-HH, DAYS-HH:MM or DAYS-HH:MM:SS"
    )


AccountingName = Annotated[str, AfterValidator(_name)]
WallTime = Annotated[str, AfterValidator(_wall)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class DatabaseSpec(_Model):
    """Where job accounting is stored: which slurmdbd slurmctld talks to, and its database."""

    kind: Literal["in-cluster", "cloud", "external"] = Field(
        default="in-cluster",
        description="in-cluster: MariaDB (a StatefulSet with a retained claim) and slurmdbd run as pods in the "
        "namespace; cloud: slurmdbd in the namespace on the cloud's managed MySQL (Cloud SQL, RDS), created with "
        "backups and deletion protection; external: an existing slurmdbd at host:port, yours to run and upgrade.",
    )
    host: str | None = Field(
        default=None,
        min_length=1,
        description="external: the host name or address of the existing slurmdbd (AccountingStorageHost). Not "
        "allowed with in-cluster or cloud, whose slurmdbd is the namespace's own Service.",
    )
    port: int = Field(
        default=SLURMDBD_PORT,
        ge=1,
        le=65535,
        description=f"The port slurmdbd listens on (AccountingStoragePort; slurmdbd's default {SLURMDBD_PORT}).",
    )
    storage_gib: int | None = Field(
        default=None,
        gt=0,
        description=f"in-cluster / cloud: size of the database's volume in GiB (default {DEFAULT_DATABASE_GIB}). "
        "Not allowed with external.",
    )

    memory_mib: int | None = Field(
        default=None,
        ge=MIN_DATABASE_MEMORY_MIB,
        le=MAX_DATABASE_MEMORY_MIB,
        description=f"in-cluster: the MariaDB container's memory limit in MiB (default {DEFAULT_DATABASE_MEMORY_MIB}). "
        f"Its InnoDB buffer pool gets all but {DATABASE_SERVER_MIB} MiB of it (slurmdbd 26.05 asks for 2048 MiB "
        f"of buffer pool and logs a warning below); the request is {DATABASE_REQUEST_MARGIN_MIB} MiB less than "
        "the limit. Only with kind: in-cluster.",
    )
    instance_class: str | None = Field(
        default=None,
        pattern=INSTANCE_CLASS_PATTERN,
        description=f"cloud: the database server's size: a Cloud SQL machine tier on gcp (default "
        f"{DEFAULT_CLOUD_SQL_TIER}: 2 vCPUs, 8 GiB) or an RDS DB instance class on aws (default "
        f"{DEFAULT_RDS_CLASS}: 2 vCPUs, 8 GiB). Only with kind: cloud.",
    )
    high_availability: bool | None = Field(
        default=None,
        description="cloud: a standby in a second zone that takes over on failure (Cloud SQL availability type "
        "REGIONAL, RDS Multi-AZ); default false (one zone; backups and point-in-time recovery still on). Only with "
        "kind: cloud.",
    )
    private_services_access: Literal["create", "existing"] | None = Field(
        default=None,
        description="cloud on gcp: how Cloud SQL gets its private address in gcp.network. create (the default): "
        "this stack reserves a range for Google's services and peers the network with them (private services "
        "access); existing: the network already has that connection (one per network: another stack or service "
        "made it), and Cloud SQL takes an address from its ranges. Only with kind: cloud.",
    )

    @model_validator(mode="after")
    def _kind(self) -> DatabaseSpec:
        if self.kind != "cloud":
            for key, value in (
                ("instanceClass", self.instance_class),
                ("highAvailability", self.high_availability),
                ("privateServicesAccess", self.private_services_access),
            ):
                if value is not None:
                    raise ValueError(
                        f"{key} is for kind: cloud (the cloud's managed MySQL); with kind: {self.kind} there is no "
                        "cloud database to size or place; remove it or use kind: cloud"
                    )
        if self.kind == "external" and not self.host:
            raise ValueError("kind: external needs host (the existing slurmdbd's host name or address)")
        if self.kind != "external" and self.host is not None:
            raise ValueError(
                f"host is for kind: external; with kind: {self.kind} slurmdbd is the namespace's own Service"
            )
        if self.kind != "in-cluster" and self.memory_mib is not None:
            raise ValueError(
                f"memoryMib is for kind: in-cluster (the MariaDB pod); with kind: {self.kind} the database is "
                + ("the cloud's: size it with instanceClass" if self.kind == "cloud" else "yours")
            )
        if self.kind == "external" and self.storage_gib is not None:
            raise ValueError("storageGib is for kind: in-cluster or cloud; an external slurmdbd's database is yours")
        return self

    @property
    def memory(self) -> tuple[int, int, int]:
        """The in-cluster database's (buffer pool, memory request, memory limit), in MiB."""
        limit = self.memory_mib or DEFAULT_DATABASE_MEMORY_MIB
        return limit - DATABASE_SERVER_MIB, limit - DATABASE_REQUEST_MARGIN_MIB, limit

    @property
    def volume_gib(self) -> int:
        """The database volume's size (in-cluster and cloud)."""
        return self.storage_gib or DEFAULT_DATABASE_GIB


class PriorityWeightsSpec(_Model):
    """The weights of priority/multifactor (slurm.conf(5) PriorityWeight*): a job's priority is the sum of
    each factor (0..1) times its weight, so only their ratios matter."""

    fairshare: int = Field(
        default=10000,
        ge=0,
        le=MAX_UINT32,
        description="PriorityWeightFairshare: how much an account's unused share lifts its jobs.",
    )
    qos: int = Field(
        default=10000, ge=0, le=MAX_UINT32, description="PriorityWeightQOS: how much the job's QOS priority counts."
    )
    age: int = Field(
        default=1000, ge=0, le=MAX_UINT32, description="PriorityWeightAge: how much time waiting in the queue counts."
    )
    job_size: int = Field(
        default=0, ge=0, le=MAX_UINT32, description="PriorityWeightJobSize: how much the job's size counts."
    )
    partition: int = Field(
        default=0,
        ge=0,
        le=MAX_UINT32,
        description="PriorityWeightPartition: how much the partition's PriorityJobFactor counts (not its "
        "priorityTier, which orders and preempts partitions regardless).",
    )


class AccountSpec(_Model):
    """A Slurm account (a bank account in the association tree): its share, its limits and its users."""

    name: AccountingName = Field(description="Account name (lower case; 'root' is Slurm's own and the default parent).")
    parent: AccountingName | None = Field(
        default=None, description="Parent account (another declared account); default: root."
    )
    fairshare: int = Field(
        default=1,
        ge=0,
        description="Fairshare: the account's share among its siblings (sacctmgr Fairshare); relative, not a percentage.",
    )
    qos: list[AccountingName] = Field(
        default_factory=list,
        description="QOS the account's users may submit with (sacctmgr QOS); default: every declared QOS and normal.",
    )
    default_qos: AccountingName | None = Field(
        default=None, description="QOS of a job that names none (sacctmgr DefaultQOS); one of `qos`."
    )
    max_gpus_per_user: int | None = Field(
        default=None,
        gt=0,
        description="GPUs each user may hold at once in this account (GrpTRES=gres/gpu=N on each user's association).",
    )
    max_gpus: int | None = Field(
        default=None,
        gt=0,
        description="GPUs the account and its sub-accounts may hold at once (GrpTRES=gres/gpu=N on the account).",
    )
    users: list[str] = Field(
        default_factory=list,
        description="Login names of the account's users (declared `users`, or the directory's with `directory`). "
        "A user's default account is the first account listing them.",
    )


class QosSpec(_Model):
    """A Quality of Service: a priority, whom it preempts and per-user / per-account limits."""

    name: AccountingName = Field(description="QOS name ('normal' is Slurm's own and may not be declared).")
    priority: int = Field(
        default=0, ge=0, le=MAX_UINT32, description="Priority added through PriorityWeightQOS (sacctmgr Priority)."
    )
    preempt: list[AccountingName] = Field(
        default_factory=list,
        description="QOS whose jobs this QOS's jobs may preempt (sacctmgr Preempt). Any non-empty list makes "
        "slurm.conf PreemptType=preempt/qos, replacing preemption by partition priorityTier.",
    )
    max_gpus_per_user: int | None = Field(
        default=None, gt=0, description="GPUs each user may hold at once with this QOS (MaxTRESPerUser=gres/gpu=N)."
    )
    max_gpus_per_account: int | None = Field(
        default=None,
        gt=0,
        description="GPUs each account may hold at once with this QOS (MaxTRESPerAccount=gres/gpu=N).",
    )
    max_wall: WallTime | None = Field(
        default=None,
        description="Longest run time of one job with this QOS (MaxWall): MINUTES, HH:MM:SS, DAYS-HH:MM:SS, ...",
    )


class AccountingSpec(_Model):
    """Job accounting through slurmdbd, multifactor priority, and the accounts, users and QOS it holds."""

    database: DatabaseSpec = Field(
        default_factory=DatabaseSpec, description="The slurmdbd slurmctld reports to and its database."
    )
    enforce: bool = Field(
        default=True,
        description="AccountingStorageEnforce=associations,limits,qos,safe: a job runs only under a known "
        "association, within its limits and QOS. false: slurmdbd only records jobs (what the old "
        "`accounting: true` did).",
    )
    retain_months: int | None = Field(
        default=DEFAULT_RETAIN_MONTHS,
        ge=1,
        le=1200,
        description="in-cluster / cloud: months slurmdbd keeps job, step, reservation, suspend, event and transaction "
        "records before deleting them (slurmdbd.conf Purge*After; the usage rollups behind sreport and fair share are "
        "kept twice as long); null keeps every record and the database grows with every job. An external slurmdbd's "
        "own settings apply there.",
    )
    priority_weights: PriorityWeightsSpec | None = Field(
        default_factory=PriorityWeightsSpec,
        description="priority/multifactor weights; null keeps Slurm's default priority/basic (first in, first out).",
    )
    accounts: list[AccountSpec] = Field(
        default_factory=list, description="Accounts, parents before or after their children; users join them."
    )
    qos: list[QosSpec] = Field(default_factory=list, description="QOS beside Slurm's own 'normal'.")

    @property
    def legacy(self) -> bool:
        """Whether this is what the old ``accounting: true`` reads as: record jobs only."""
        return not self.enforce and self.priority_weights is None and not self.accounts and not self.qos


def read_legacy(data: Any) -> Any:
    """``slurm`` as declared, with the old ``accounting: true/false`` + ``accountingHost`` read as the new form.

    Called before validation of the ``slurm`` section. The old form meant "point slurmctld at an existing
    slurmdbd and record jobs": an external database at that host, nothing enforced, priority untouched.
    """
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    host_keys = [k for k in ("accountingHost", "accounting_host") if k in out]
    host = out.get(host_keys[0]) if host_keys else None
    value = out.get("accounting")
    if isinstance(value, bool):
        for k in host_keys:
            out.pop(k)
        if not value:
            out["accounting"] = None
        elif not host:
            raise ValueError(
                "accounting: true needs accountingHost (an existing slurmdbd); or use the new form "
                "accounting: {database: {kind: in-cluster}} (docs/accounting.md)"
            )
        else:
            out["accounting"] = {
                "database": {"kind": "external", "host": host},
                "enforce": False,
                "priorityWeights": None,
            }
    elif host is not None and value is not None:
        raise ValueError(
            "accountingHost is the old form; with accounting: {...} give accounting.database: {kind: external, "
            f"host: {host}}}"
        )
    else:
        # accountingHost without accounting: true was ignored before, and still is.
        for k in host_keys:
            out.pop(k)
    return out


# ------------------------------------------------------------------------------------------------ checks
ROOT = "slurm.accounting"


def _duplicates(where: str, names: Sequence[str], what: str) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for i, name in enumerate(names):
        if name in seen:
            out.append((f"{where}[{i}].name", f"duplicate {what} {name!r}"))
        seen.add(name)
    return out


def _unknown(path: str, value: str, known: Iterable[str], what: str) -> Problem:
    allowed = ", ".join(sorted(known)) or "(none declared)"
    return (path, f"{value!r} is not a declared {what}; declared: {allowed}")


def _cycles(accounts: Sequence[AccountSpec]) -> list[Problem]:
    parents = {a.name: a.parent for a in accounts}
    index = {a.name: i for i, a in enumerate(accounts)}
    out = []
    reported: set[str] = set()
    for a in accounts:
        chain = [a.name]
        node = a.parent
        while node is not None and node in parents and node not in chain:
            chain.append(node)
            node = parents[node]
        if node is not None and node in chain and node not in reported:
            loop = [*chain[chain.index(node) :], node]
            reported.update(loop)
            out.append(
                (
                    f"{ROOT}.accounts[{index[node]}].parent",
                    f"accounts form a cycle of parents: {' -> '.join(loop)}; every chain of parents must end at root",
                )
            )
    return out


def accounting_problems(
    spec: AccountingSpec | None,
    *,
    user_names: Sequence[str],
    directory: bool,
    partitions: Sequence[tuple[str, Sequence[str]]] | None,
    cluster_gpus: int,
) -> list[Problem]:
    """What is wrong with ``slurm.accounting`` and the partitions' ``allowQos``, by field.

    ``user_names`` are the declared users (``users[].name``); with a ``directory``, an account may also list
    users only the directory knows. ``partitions`` are the declared partitions' (name, allowQos), None for
    the default set. ``cluster_gpus`` is the GPUs of every pool at its node count: a GPU limit above it can
    never bind and is a typo (8 for 80).
    """
    if spec is None:
        return [
            (
                f"slurm.partitions[{i}].allowQos",
                f"partition {name!r} names QOS {list(allow)} but slurm.accounting is off: QOS exist only "
                "in slurmdbd; declare them under slurm.accounting.qos",
            )
            for i, (name, allow) in enumerate(partitions or ())
            if allow
        ]
    qos_names = {q.name for q in spec.qos} | {BUILTIN_QOS}
    out: list[Problem] = []
    out += _duplicates(f"{ROOT}.accounts", [a.name for a in spec.accounts], "account")
    out += _duplicates(f"{ROOT}.qos", [q.name for q in spec.qos], "QOS")
    account_names = {a.name for a in spec.accounts}
    for i, a in enumerate(spec.accounts):
        out += _account_problems(i, a, account_names, qos_names, user_names, directory, cluster_gpus)
    out += _cycles(spec.accounts)
    for i, q in enumerate(spec.qos):
        out += _qos_problems(i, q, qos_names, cluster_gpus)
    for i, (name, allow) in enumerate(partitions or ()):
        out += [
            _unknown(f"slurm.partitions[{i}].allowQos[{j}]", q, qos_names, f"QOS (partition {name!r})")
            for j, q in enumerate(allow)
            if q not in qos_names
        ]
    if spec.enforce and spec.accounts:
        members = {u for a in spec.accounts for u in a.users}
        out += [
            (
                f"users[{i}].name",
                f"{user!r} is in no account of slurm.accounting.accounts: with enforce on, slurmctld refuses "
                "every job of a user without an association; add them to an account's users",
            )
            for i, user in enumerate(user_names)
            if user not in members
        ]
    return out


def _account_problems(
    i: int,
    a: AccountSpec,
    account_names: set[str],
    qos_names: set[str],
    user_names: Sequence[str],
    directory: bool,
    cluster_gpus: int,
) -> list[Problem]:
    at = f"{ROOT}.accounts[{i}]"
    out = []
    if a.name == ROOT_ACCOUNT:
        out.append((f"{at}.name", "'root' is Slurm's own top account; it is every account's default parent"))
    if a.parent is not None and a.parent not in account_names | {ROOT_ACCOUNT}:
        out.append(_unknown(f"{at}.parent", a.parent, account_names | {ROOT_ACCOUNT}, "account"))
    out += [_unknown(f"{at}.qos[{j}]", q, qos_names, "QOS") for j, q in enumerate(a.qos) if q not in qos_names]
    if a.default_qos is not None and a.default_qos not in qos_names:
        out.append(_unknown(f"{at}.defaultQos", a.default_qos, qos_names, "QOS"))
    elif a.default_qos is not None and a.qos and a.default_qos not in a.qos:
        out.append(
            (
                f"{at}.defaultQos",
                f"{a.default_qos!r} is not in the account's qos {a.qos}: slurmdbd refuses a default QOS the "
                "association may not use",
            )
        )
    seen: set[str] = set()
    for j, user in enumerate(a.users):
        if user in seen:
            out.append((f"{at}.users[{j}]", f"{user!r} is listed twice in account {a.name!r}"))
        seen.add(user)
        if not directory and user not in user_names:
            out.append(_unknown(f"{at}.users[{j}]", user, user_names, "user (users[].name)"))
    for field, limit in (("maxGpus", a.max_gpus), ("maxGpusPerUser", a.max_gpus_per_user)):
        if limit is not None and limit > cluster_gpus:
            out.append(_too_many(f"{at}.{field}", limit, cluster_gpus))
    return out


def _qos_problems(i: int, q: QosSpec, qos_names: set[str], cluster_gpus: int) -> list[Problem]:
    at = f"{ROOT}.qos[{i}]"
    out = []
    if q.name == BUILTIN_QOS:
        out.append((f"{at}.name", "'normal' is Slurm's own QOS; name yours otherwise"))
    for j, target in enumerate(q.preempt):
        if target not in qos_names:
            out.append(_unknown(f"{at}.preempt[{j}]", target, qos_names, "QOS"))
        elif target == q.name:
            out.append((f"{at}.preempt[{j}]", f"QOS {q.name!r} cannot preempt itself"))
    for field, limit in (("maxGpusPerUser", q.max_gpus_per_user), ("maxGpusPerAccount", q.max_gpus_per_account)):
        if limit is not None and limit > cluster_gpus:
            out.append(_too_many(f"{at}.{field}", limit, cluster_gpus))
    return out


def _too_many(path: str, limit: int, cluster_gpus: int) -> Problem:
    return (
        path,
        f"{limit} GPUs is more than the cluster has ({cluster_gpus}: every GPU pool's nodes x GPUs per node); "
        "a limit above it never binds",
    )


__all__ = [
    "BUILTIN_QOS",
    "DEFAULT_CLOUD_SQL_TIER",
    "DEFAULT_DATABASE_GIB",
    "DEFAULT_RDS_CLASS",
    "ROOT_ACCOUNT",
    "SLURMDBD_PORT",
    "AccountSpec",
    "AccountingSpec",
    "DatabaseSpec",
    "PriorityWeightsSpec",
    "Problem",
    "QosSpec",
    "accounting_problems",
    "read_legacy",
]
