"""A :class:`~slonk_infra.accounting.records.State` as JSON: what the render writes (the ConfigMap key
``desired.json``) and the reconciler process reads.

The text is stable: keys sorted, lists sorted (QOS by name, associations by (account, user, partition), users
by name), so the same declaration renders the same bytes and a diff of two renders shows only what changed.
Limits are written as TRES maps (``{"gres/gpu": 8}``) and run times as seconds, as the records hold them.

``load_state`` refuses what it cannot read with an error naming the field, the value and what is allowed,
so a hand-edited ConfigMap fails loudly at the reconciler rather than reconciling something else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slonk_infra.accounting.records import Assoc, AssocKey, Qos, State, User

FORMAT_VERSION = 1
"""Bumped when a field changes meaning; :func:`load_state` refuses other versions."""


class WireError(ValueError):
    """A desired-state document that is not in the form :func:`dump_state` writes."""


def _qos(q: Qos) -> dict[str, Any]:
    return {
        "name": q.name,
        "priority": q.priority,
        "preempt": sorted(q.preempt),
        "maxTresPerUser": dict(q.max_tres_per_user),
        "maxTresPerAccount": dict(q.max_tres_per_account),
        "maxWallSeconds": q.max_wall,
    }


def _assoc(a: Assoc) -> dict[str, Any]:
    return {
        "account": a.account,
        "user": a.user,
        "partition": a.partition,
        "parent": a.parent,
        "fairshare": a.fairshare,
        "grpTres": dict(a.grp_tres),
        "qos": sorted(a.qos),
        "defaultQos": a.default_qos,
    }


def _sort_key(key: AssocKey) -> tuple[str, str, str]:
    account, user, partition = key
    return (account, user or "", partition)


def dump_state(state: State) -> str:
    """The state as JSON text (sorted keys and lists, two-space indent, trailing newline)."""
    doc = {
        "version": FORMAT_VERSION,
        "cluster": state.cluster,
        "clusterExists": state.cluster_exists,
        "qos": [_qos(state.qos[n]) for n in sorted(state.qos)],
        "assocs": [_assoc(state.assocs[k]) for k in sorted(state.assocs, key=_sort_key)],
        "users": [{"name": u.name, "defaultAccount": u.default_account} for _, u in sorted(state.users.items())],
    }
    return json.dumps(doc, sort_keys=True, indent=2) + "\n"


# --- reading ------------------------------------------------------------------------------------------------


def _field(obj: Mapping[str, Any], name: str, where: str, kinds: tuple[type, ...], *, optional: bool = False) -> Any:
    if name not in obj:
        raise WireError(f"{where}.{name}: missing")
    value = obj[name]
    if value is None and optional:
        return None
    # bool is an int in Python; a count must not be true/false.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        allowed = " or ".join(k.__name__ for k in kinds) + (" or null" if optional else "")
        raise WireError(f"{where}.{name}: {value!r} is not allowed; expected {allowed}")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise WireError(f"{where}: {value!r} is not allowed; expected an object")
    return value


def _names(obj: Mapping[str, Any], name: str, where: str) -> frozenset[str]:
    items = _field(obj, name, where, (list,))
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise WireError(f"{where}.{name}[{i}]: {item!r} is not allowed; expected a string")
    return frozenset(items)


def _tres(obj: Mapping[str, Any], name: str, where: str) -> dict[str, int]:
    tres = _object(_field(obj, name, where, (dict,)), f"{where}.{name}")
    for key, count in tres.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise WireError(f"{where}.{name}.{key}: {count!r} is not allowed; expected a count >= 0")
    return dict(tres)


def _load_qos(value: Any, where: str) -> Qos:
    obj = _object(value, where)
    return Qos(
        name=_field(obj, "name", where, (str,)),
        priority=_field(obj, "priority", where, (int,)),
        preempt=_names(obj, "preempt", where),
        max_tres_per_user=_tres(obj, "maxTresPerUser", where),
        max_tres_per_account=_tres(obj, "maxTresPerAccount", where),
        max_wall=_field(obj, "maxWallSeconds", where, (int,), optional=True),
    )


def _load_assoc(value: Any, where: str) -> Assoc:
    obj = _object(value, where)
    return Assoc(
        account=_field(obj, "account", where, (str,)),
        user=_field(obj, "user", where, (str,), optional=True),
        partition=_field(obj, "partition", where, (str,)),
        parent=_field(obj, "parent", where, (str,), optional=True),
        fairshare=_field(obj, "fairshare", where, (int,), optional=True),
        grp_tres=_tres(obj, "grpTres", where),
        qos=_names(obj, "qos", where),
        default_qos=_field(obj, "defaultQos", where, (str,), optional=True),
    )


def load_state(text: str) -> State:
    """The state :func:`dump_state` wrote; :class:`WireError` names the first field that is not in its form."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise WireError(f"desired state: not JSON ({e})") from None
    doc = _object(raw, "desired state")
    version = doc.get("version")
    if version != FORMAT_VERSION:
        raise WireError(f"version: {version!r} is not allowed; this reconciler reads version {FORMAT_VERSION}")
    qos: dict[str, Qos] = {}
    for i, item in enumerate(_field(doc, "qos", "desired state", (list,))):
        q = _load_qos(item, f"qos[{i}]")
        if q.name in qos:
            raise WireError(f"qos[{i}].name: {q.name!r} appears twice; QOS names are unique")
        qos[q.name] = q
    assocs: dict[AssocKey, Assoc] = {}
    for i, item in enumerate(_field(doc, "assocs", "desired state", (list,))):
        a = _load_assoc(item, f"assocs[{i}]")
        if a.key in assocs:
            raise WireError(f"assocs[{i}]: {a.describe()} appears twice; associations are unique")
        assocs[a.key] = a
    users: dict[str, User] = {}
    for i, item in enumerate(_field(doc, "users", "desired state", (list,))):
        obj = _object(item, f"users[{i}]")
        name = _field(obj, "name", f"users[{i}]", (str,))
        if name in users:
            raise WireError(f"users[{i}].name: {name!r} appears twice; user names are unique")
        users[name] = User(name, _field(obj, "defaultAccount", f"users[{i}]", (str,), optional=True))
    return State(
        cluster=_field(doc, "cluster", "desired state", (str,)),
        cluster_exists=_field(doc, "clusterExists", "desired state", (bool,)),
        qos=qos,
        assocs=assocs,
        users=users,
    )


__all__ = ["FORMAT_VERSION", "WireError", "dump_state", "load_state"]
