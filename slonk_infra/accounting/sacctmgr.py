"""sacctmgr's listings, read: the ``show`` commands the reconciler runs and the parser of their output.

Every listing is asked for with ``-P -n`` (sacctmgr(1): ``--parsable2``, fields separated by ``|`` with no
``|`` at the end; ``--noheader``) and an explicit ``format=``, so each line has exactly the fields named here,
in this order, whatever the Slurm release's default columns are. A line with another number of fields is an
error, never guessed at. Lists inside a field (QOS, Preempt, TRES) are comma-separated.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from slonk_infra.accounting.records import Assoc, Qos, RecordError, State, User, parse_tres, wall_seconds

SACCTMGR = "sacctmgr"
LIST = (SACCTMGR, "-P", "-n", "show")
CLUSTER_FIELDS = ("Cluster",)
ACCOUNT_FIELDS = ("Account", "Descr", "Org")
USER_FIELDS = ("User", "DefaultAccount")
QOS_FIELDS = ("Name", "Priority", "Preempt", "MaxTRESPerUser", "MaxTRESPerAccount", "MaxWall")
ASSOC_FIELDS = (
    "Cluster",
    "Account",
    "User",
    "Partition",
    "ParentName",
    "Fairshare",
    "GrpTRES",
    "QOS",
    "DefaultQOS",
)


def _format(fields: Sequence[str]) -> str:
    return "format=" + ",".join(fields)


def show_commands(cluster: str) -> dict[str, tuple[str, ...]]:
    """The listings :func:`read_state` reads, by name: cluster, account, user, qos, assoc."""
    return {
        "cluster": (*LIST, "cluster", _format(CLUSTER_FIELDS)),
        "account": (*LIST, "account", _format(ACCOUNT_FIELDS)),
        "user": (*LIST, "user", _format(USER_FIELDS)),
        "qos": (*LIST, "qos", _format(QOS_FIELDS)),
        "assoc": (*LIST, "assoc", "where", f"cluster={cluster}", _format(ASSOC_FIELDS)),
    }


def rows(text: str, fields: Sequence[str], what: str) -> Iterator[dict[str, str]]:
    """The lines of a ``-P -n`` listing as dicts keyed by ``fields``; blank lines are skipped."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) != len(fields):
            raise RecordError(
                f"sacctmgr show {what}, line {number}: {len(values)} fields, expected {len(fields)} "
                f"({','.join(fields)}): {line!r}"
            )
        yield dict(zip(fields, (v.strip() for v in values), strict=True))


def _names(text: str) -> frozenset[str]:
    return frozenset(n for n in (p.strip() for p in text.split(",")) if n)


def _int(text: str, what: str) -> int | None:
    if not text or text == "parent":
        return None
    try:
        return int(text)
    except ValueError:
        raise RecordError(f"{what}: {text!r} is not a number") from None


def parse_clusters(text: str) -> list[str]:
    """``show cluster format=Cluster``: the cluster names."""
    return [r["Cluster"] for r in rows(text, CLUSTER_FIELDS, "cluster")]


def parse_accounts(text: str) -> list[str]:
    """``show account format=Account,Descr,Org``: the account names (of every cluster)."""
    return [r["Account"] for r in rows(text, ACCOUNT_FIELDS, "account")]


def parse_users(text: str) -> dict[str, User]:
    """``show user format=User,DefaultAccount``: users by name."""
    return {r["User"]: User(r["User"], r["DefaultAccount"] or None) for r in rows(text, USER_FIELDS, "user")}


def parse_qos(text: str) -> dict[str, Qos]:
    """``show qos format=Name,Priority,Preempt,MaxTRESPerUser,MaxTRESPerAccount,MaxWall``: QOS by name."""
    out = {}
    for r in rows(text, QOS_FIELDS, "qos"):
        name = r["Name"]
        out[name] = Qos(
            name=name,
            priority=_int(r["Priority"], f"qos {name} Priority") or 0,
            preempt=_names(r["Preempt"]),
            max_tres_per_user=parse_tres(r["MaxTRESPerUser"]),
            max_tres_per_account=parse_tres(r["MaxTRESPerAccount"]),
            max_wall=wall_seconds(r["MaxWall"]),
        )
    return out


def parse_assocs(text: str, cluster: str) -> dict[tuple[str, str | None, str], Assoc]:
    """``show assoc where cluster=C format=...``: the cluster's associations by (account, user, partition).

    An account's own association has no user; its ParentName is the parent account (empty for root). Rows
    of another cluster (a listing without the ``where``) are left out.
    """
    out = {}
    for r in rows(text, ASSOC_FIELDS, "assoc"):
        if r["Cluster"] != cluster:
            continue
        user = r["User"] or None
        assoc = Assoc(
            account=r["Account"],
            user=user,
            partition=r["Partition"],
            parent=(r["ParentName"] or None) if user is None else None,
            fairshare=_int(r["Fairshare"], f"assoc {r['Account']}/{user} Fairshare"),
            grp_tres=parse_tres(r["GrpTRES"]),
            qos=_names(r["QOS"]),
            default_qos=r["DefaultQOS"] or None,
        )
        out[assoc.key] = assoc
    return out


def read_state(cluster: str, outputs: dict[str, str]) -> State:
    """The cluster's :class:`State` from the outputs of :func:`show_commands` (by the same names)."""
    return State(
        cluster=cluster,
        cluster_exists=cluster in parse_clusters(outputs.get("cluster", "")),
        qos=parse_qos(outputs.get("qos", "")),
        assocs=parse_assocs(outputs.get("assoc", ""), cluster),
        users=parse_users(outputs.get("user", "")),
    )


def parse_running(text: str) -> set[tuple[str, str]]:
    """``squeue -h -t RUNNING,SUSPENDED -o '%a|%u'``: the (account, user) pairs that have jobs on nodes."""
    out = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        account, sep, user = line.strip().partition("|")
        if not sep:
            raise RecordError(f"squeue line {number}: expected account|user, got {line!r}")
        out.add((account.lower(), user))
    return out


RUNNING_JOBS = ("squeue", "-h", "-t", "RUNNING,SUSPENDED", "-o", "%a|%u")
"""The listing :func:`parse_running` reads (squeue(1): %a account, %u user name)."""

__all__ = [
    "ASSOC_FIELDS",
    "QOS_FIELDS",
    "RUNNING_JOBS",
    "parse_accounts",
    "parse_assocs",
    "parse_clusters",
    "parse_qos",
    "parse_running",
    "parse_users",
    "read_state",
    "rows",
    "show_commands",
]
