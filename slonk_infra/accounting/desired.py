"""The :class:`~slonk_infra.accounting.records.State` a declaration's ``slurm.accounting`` asks for."""

from __future__ import annotations

from slonk_infra.accounting.records import GPU_TRES, Assoc, AssocKey, Qos, State, User, wall_seconds
from slonk_infra.declaration.accounting import BUILTIN_QOS, ROOT_ACCOUNT, AccountingSpec


def _gpus(limit: int | None) -> dict[str, int]:
    return {GPU_TRES: limit} if limit is not None else {}


def desired_state(spec: AccountingSpec, cluster: str) -> State:
    """QOS, account and user associations, and users' default accounts, as declared.

    An account's QOS list is its ``qos``, else every declared QOS and ``normal``; its parent is ``root``
    unless declared. A user's association carries the account's ``maxGpusPerUser`` as its GrpTRES and
    inherits QOS and default QOS from the account. A user's default account is the first that lists them.
    """
    qos = {
        q.name: Qos(
            name=q.name,
            priority=q.priority,
            preempt=frozenset(q.preempt),
            max_tres_per_user=_gpus(q.max_gpus_per_user),
            max_tres_per_account=_gpus(q.max_gpus_per_account),
            max_wall=wall_seconds(q.max_wall) if q.max_wall else None,
        )
        for q in spec.qos
    }
    every_qos = frozenset(qos) | {BUILTIN_QOS}
    assocs: dict[AssocKey, Assoc] = {}
    users: dict[str, User] = {}
    for a in spec.accounts:
        own = Assoc(
            account=a.name,
            parent=a.parent or ROOT_ACCOUNT,
            fairshare=a.fairshare,
            grp_tres=_gpus(a.max_gpus),
            qos=frozenset(a.qos) or every_qos,
            default_qos=a.default_qos,
        )
        assocs[own.key] = own
        for name in a.users:
            member = Assoc(account=a.name, user=name, grp_tres=_gpus(a.max_gpus_per_user))
            assocs[member.key] = member
            users.setdefault(name, User(name, a.name))
    return State(cluster=cluster, qos=qos, assocs=assocs, users=users)


__all__ = ["desired_state"]
