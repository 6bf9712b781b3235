"""From what slurmdbd holds to what the declaration asks for: ordered ``sacctmgr -i`` commands.

Order matters to slurmdbd: a QOS must exist before an account lists it or another QOS preempts it, and a
parent account before its children; a user's default account must be one of their associations. So:

1. the cluster, if slurmdbd does not know it;
2. QOS added (without Preempt) and changed, then every Preempt list (all QOS exist by then);
3. accounts, parents before children, each added or changed;
4. users' associations added or changed, then users' default accounts;
5. only with ``prune``: what the declaration lacks, deleted: users' associations, then accounts children
   first, then QOS. An association with running jobs (or an account with running jobs below it) is never
   deleted: it is reported as held and left for the next run.

Without ``prune`` nothing is deleted: what slurmdbd holds and the declaration lacks is reported as drift.
Limits the declaration does not manage (a TRES other than gres/gpu) are reported, never changed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from slonk_infra.accounting.records import (
    GPU_TRES,
    Assoc,
    Qos,
    State,
    format_tres,
    format_wall,
)
from slonk_infra.accounting.sacctmgr import SACCTMGR

# Slurm's own: the root account and its root user, and the default QOS (sacctmgr(1), accounting.html).
OWN_ACCOUNTS = frozenset({"root"})
OWN_USERS = frozenset({"root"})
OWN_QOS = frozenset({"normal"})
# sacctmgr(1): "To clear a previously set value use the modify command with a new value of -1"; a Preempt
# list is emptied with nothing after '=': sacctmgr(1)'s "Preempt=''" is what a shell turns into "Preempt=".
# Checked against slurmdbd 22.05: the argument "Preempt=''" (quotes kept, as without a shell) is refused
# ("You gave me an empty qos list"), "Preempt=-1" too ("You gave a bad qos '1'"); "Preempt=" empties it.
CLEAR = "-1"
CLEAR_LIST = ""


@dataclass(frozen=True)
class Command:
    """One ``sacctmgr -i`` command and why it is run."""

    args: tuple[str, ...]
    reason: str

    @property
    def argv(self) -> tuple[str, ...]:
        """The full command line (``-i``: commit at once, no prompt)."""
        return (SACCTMGR, "-i", *self.args)

    def __str__(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True)
class Reconciliation:
    """What a reconcile run does and reports."""

    commands: tuple[Command, ...]
    drift: tuple[str, ...] = ()
    """What slurmdbd holds that the declaration lacks (left alone without ``prune``)."""
    held: tuple[str, ...] = field(default=())
    """What ``prune`` would delete but running jobs hold back."""


def _tres_value(want: Mapping[str, int], have: Mapping[str, int]) -> str | None:
    """The TRES setting that makes the managed key (gres/gpu) ``want``'s, or None when it already is."""
    if want.get(GPU_TRES) == have.get(GPU_TRES):
        return None
    return format_tres(want) if GPU_TRES in want else f"{GPU_TRES}={CLEAR}"


def _unmanaged(what: str, name: str, tres: Mapping[str, int]) -> list[str]:
    extra = {k: v for k, v in tres.items() if k != GPU_TRES}
    return [f"{what} of {name} also limits {format_tres(extra)}, which the declaration does not"] if extra else []


def _qos_settings(want: Qos, have: Qos | None) -> list[str]:
    out = []
    if (have is None and want.priority) or (have is not None and want.priority != have.priority):
        out.append(f"Priority={want.priority}")
    for key, w, h in (
        ("MaxTRESPerUser", want.max_tres_per_user, have.max_tres_per_user if have else {}),
        ("MaxTRESPerAccount", want.max_tres_per_account, have.max_tres_per_account if have else {}),
    ):
        value = _tres_value(w, h)
        if value is not None and (have is not None or GPU_TRES in w):
            out.append(f"{key}={value}")
    if want.max_wall != (have.max_wall if have else None):
        if want.max_wall is not None:
            out.append(f"MaxWall={format_wall(want.max_wall)}")
        elif have is not None:
            out.append(f"MaxWall={CLEAR}")
    return out


def _account_settings(want: Assoc, have: Assoc | None) -> list[str]:
    out = []
    if want.fairshare is not None and (have is None or want.fairshare != have.fairshare):
        out.append(f"Fairshare={want.fairshare}")
    value = _tres_value(want.grp_tres, have.grp_tres if have else {})
    if value is not None and (have is not None or GPU_TRES in want.grp_tres):
        out.append(f"GrpTRES={value}")
    if want.qos and (have is None or want.qos != have.qos):
        out.append("QOS=" + ",".join(sorted(want.qos)))
    if want.default_qos != (have.default_qos if have else None):
        if want.default_qos is not None:
            out.append(f"DefaultQOS={want.default_qos}")
        elif have is not None:
            out.append(f"DefaultQOS={CLEAR}")
    return out


def _depth(account: str, parents: Mapping[str, str | None]) -> int:
    depth, seen = 0, {account}
    node = parents.get(account)
    while node is not None and node in parents and node not in seen:
        seen.add(node)
        depth += 1
        node = parents.get(node)
    return depth


def _accounts_top_down(assocs: Iterable[Assoc]) -> list[Assoc]:
    """Account associations, parents before children (then by name, for the same commands every run)."""
    own = [a for a in assocs if a.user is None]
    parents = {a.account: a.parent for a in own}
    return sorted(own, key=lambda a: (_depth(a.account, parents), a.account))


def reconcile(
    desired: State,
    current: State,
    running: Collection[tuple[str, str]] = (),
    *,
    prune: bool = False,
) -> Reconciliation:
    """The commands that make ``current`` hold ``desired``; ``running`` are the (account, user) pairs with
    running jobs (:data:`slonk_infra.accounting.sacctmgr.RUNNING_JOBS`)."""
    run = _Run(desired, current, set(running), prune)
    if not current.cluster_exists:
        run.add(("add", "cluster", desired.cluster), f"slurmdbd does not know cluster {desired.cluster}")
    run.qos()
    run.accounts()
    run.users()
    run.extra_users()
    run.extra_accounts()
    run.extra_qos()
    return Reconciliation(tuple(run.cmds), tuple(run.drift), tuple(run.held))


@dataclass
class _Run:
    desired: State
    current: State
    running: set[tuple[str, str]]
    prune: bool
    cmds: list[Command] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)
    """Accounts that keep an association with running jobs, so they cannot be deleted."""
    introduced: set[str] = field(default_factory=set)
    """Users this run adds; the first add of a user names their default account."""

    @property
    def where(self) -> str:
        return f"cluster={self.desired.cluster}"

    def add(self, args: tuple[str, ...], reason: str) -> None:
        self.cmds.append(Command(args, reason))

    def qos(self) -> None:
        """QOS added or changed, then every changed Preempt list (its targets all exist by then)."""
        for name in sorted(self.desired.qos):
            want, have = self.desired.qos[name], self.current.qos.get(name)
            settings = _qos_settings(want, have)
            if have is None:
                self.add(("add", "qos", name, *settings), f"QOS {name} is declared")
                continue
            if settings:
                self.add(("modify", "qos", "where", f"name={name}", "set", *settings), f"QOS {name} changed")
            self.drift += _unmanaged("MaxTRESPerUser", f"QOS {name}", have.max_tres_per_user)
            self.drift += _unmanaged("MaxTRESPerAccount", f"QOS {name}", have.max_tres_per_account)
        for name in sorted(self.desired.qos):
            want_preempt = self.desired.qos[name].preempt
            have = self.current.qos.get(name)
            if want_preempt != (have.preempt if have else frozenset()):
                value = ",".join(sorted(want_preempt)) or CLEAR_LIST
                self.add(("modify", "qos", "where", f"name={name}", "set", f"Preempt={value}"), f"QOS {name} preempts")

    def accounts(self) -> None:
        """Accounts added or changed, parents before children."""
        for want in _accounts_top_down(self.desired.assocs.values()):
            have = self.current.assocs.get(want.key)
            name = want.account
            settings = _account_settings(want, have)
            if have is None:
                parent = () if want.parent is None else (f"Parent={want.parent}",)
                self.add(
                    ("add", "account", name, f"Cluster={self.desired.cluster}", *parent, *settings),
                    f"account {name} is declared",
                )
                continue
            if want.parent != have.parent:
                self.add(
                    ("modify", "account", "where", f"name={name}", self.where, "set", f"Parent={want.parent}"),
                    f"account {name} moves from {have.parent} to {want.parent}",
                )
            if settings:
                self.add(
                    ("modify", "account", "where", f"name={name}", self.where, "set", *settings),
                    f"account {name} changed",
                )
            self.drift += _unmanaged("GrpTRES", f"account {name}", have.grp_tres)

    def users(self) -> None:
        """Users' associations added or changed, then default accounts (each names an association by then)."""
        for key in sorted((k for k in self.desired.assocs if k[1] is not None), key=str):
            want = self.desired.assocs[key]
            have = self.current.assocs.get(key)
            account, user = want.account, str(want.user)
            if have is None:
                args = ["add", "user", user, f"Account={account}", f"Cluster={self.desired.cluster}"]
                if user not in self.current.users and user not in self.introduced:
                    self.introduced.add(user)
                    default = self.desired.users[user].default_account if user in self.desired.users else account
                    args.append(f"DefaultAccount={default}")
                if GPU_TRES in want.grp_tres:
                    args.append(f"GrpTRES={format_tres(want.grp_tres)}")
                self.add(tuple(args), f"user {user} is declared in account {account}")
                continue
            value = _tres_value(want.grp_tres, have.grp_tres)
            if value is not None:
                self.add(
                    (
                        "modify",
                        "user",
                        "where",
                        f"name={user}",
                        f"account={account}",
                        self.where,
                        "set",
                        f"GrpTRES={value}",
                    ),
                    f"GPU limit of user {user} in account {account} changed",
                )
            self.drift += _unmanaged("GrpTRES", f"user {user} in account {account}", have.grp_tres)
        for name in sorted(self.desired.users):
            want_default = self.desired.users[name].default_account
            have_user = self.current.users.get(name)
            if have_user is not None and have_user.default_account != want_default:
                self.add(
                    ("modify", "user", "where", f"name={name}", "set", f"DefaultAccount={want_default}"),
                    f"default account of {name} is {want_default}",
                )

    def extra_users(self) -> None:
        """Users' associations the declaration lacks: drift; with prune deleted unless they have running jobs."""
        extra = sorted(
            (
                a
                for k, a in self.current.assocs.items()
                if a.user is not None and k not in self.desired.assocs and a.user not in OWN_USERS
            ),
            key=lambda a: (a.account, str(a.user), a.partition),
        )
        for a in extra:
            self.drift.append(f"{a.describe()} is in slurmdbd, not in the declaration")
            if not self.prune:
                continue
            if (a.account, str(a.user)) in self.running:
                self.held.append(f"{a.describe()} has running jobs; not deleted")
                self.kept.add(a.account)
                continue
            part = (f"partition={a.partition}",) if a.partition else ()
            self.add(
                ("delete", "user", "where", f"name={a.user}", f"account={a.account}", self.where, *part),
                f"{a.describe()} is not declared",
            )

    def extra_accounts(self) -> None:
        """Accounts the declaration lacks, children first; one with running jobs in or below it is kept."""
        busy = {account for account, _ in self.running} | self.kept
        parents = {a.account: a.parent for a in self.current.assocs.values() if a.user is None}
        extra = [
            a
            for a in _accounts_top_down(self.current.assocs.values())
            if a.key not in self.desired.assocs and a.account not in OWN_ACCOUNTS
        ]
        for a in reversed(extra):
            self.drift.append(f"{a.describe()} is in slurmdbd, not in the declaration")
            if not self.prune:
                continue
            if any(_under(x, a.account, parents) for x in busy):
                self.held.append(f"{a.describe()} has running jobs in it or below it; not deleted")
                busy.add(a.account)
                continue
            self.add(("delete", "account", "where", f"name={a.account}", self.where), f"{a.describe()} is not declared")

    def extra_qos(self) -> None:
        """QOS the declaration lacks (Slurm's own normal aside)."""
        for name in sorted(set(self.current.qos) - set(self.desired.qos) - OWN_QOS):
            self.drift.append(f"QOS {name} is in slurmdbd, not in the declaration")
            if self.prune:
                self.add(("delete", "qos", "where", f"name={name}"), f"QOS {name} is not declared")


def _under(account: str, ancestor: str, parents: Mapping[str, str | None]) -> bool:
    """Whether ``account`` is ``ancestor`` or below it."""
    node: str | None = account
    seen: set[str] = set()
    while node is not None and node not in seen:
        if node == ancestor:
            return True
        seen.add(node)
        node = parents.get(node)
    return False


__all__ = ["Command", "Reconciliation", "reconcile"]
