"""The desired state as JSON: round trip, stable text, and clear refusals of what is not in its form."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slonk_infra.accounting.records import Assoc, Qos, State, User
from slonk_infra.accounting.wire import WireError, dump_state, load_state
from tests.accounting.test_reconcile import desired, recorded


def test_round_trip_of_a_declaration() -> None:
    state = desired()
    assert load_state(dump_state(state)) == state


def test_round_trip_of_what_slurmdbd_holds() -> None:
    # Per-partition associations, other TRES, a user without a default account, a missing cluster.
    state = recorded()
    assert load_state(dump_state(state)) == state
    bare = State(
        cluster="c",
        cluster_exists=False,
        qos={"q": Qos("q", max_tres_per_user={"cpu": 2, "gres/gpu": 1}, max_wall=60)},
        assocs={("a", "u", "p"): Assoc("a", "u", "p", fairshare=None)},
        users={"u": User("u", None)},
    )
    assert load_state(dump_state(bare)) == bare


def test_text_is_stable_whatever_the_insertion_order() -> None:
    state = desired()
    shuffled = State(
        cluster=state.cluster,
        qos=dict(reversed(list(state.qos.items()))),
        assocs=dict(reversed(list(state.assocs.items()))),
        users=dict(reversed(list(state.users.items()))),
    )
    text = dump_state(state)
    assert dump_state(shuffled) == text
    assert text.endswith("}\n")
    doc = json.loads(text)
    assert list(doc) == sorted(doc)
    assert [a["account"] for a in doc["assocs"]] == ["research", "research", "vision", "vision", "vision"]
    assert [a["user"] for a in doc["assocs"]] == [None, "alice", None, "alice", "bob"]
    assert doc["qos"][0] == {
        "maxTresPerAccount": {},
        "maxTresPerUser": {"gres/gpu": 64},
        "maxWallSeconds": None,
        "name": "high",
        "preempt": ["low"],
        "priority": 100,
    }


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(dump_state(desired()))
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(version=2), "version: 2 is not allowed"),
        (lambda d: d.pop("cluster"), "desired state.cluster: missing"),
        (lambda d: d.update(clusterExists="yes"), "clusterExists: 'yes' is not allowed; expected bool"),
        (lambda d: d["qos"][0].update(priority=True), "qos[0].priority: True is not allowed; expected int"),
        (lambda d: d["qos"][1].update(preempt=[3]), "qos[1].preempt[0]: 3 is not allowed"),
        (lambda d: d["qos"].append(d["qos"][0]), "qos[2].name: 'high' appears twice"),
        (
            lambda d: d["assocs"][0]["grpTres"].update({"gres/gpu": -1}),
            "assocs[0].grpTres.gres/gpu: -1 is not allowed; expected a count >= 0",
        ),
        (lambda d: d["assocs"][1].update(user=7), "assocs[1].user: 7 is not allowed; expected str or null"),
        (lambda d: d["assocs"].append(d["assocs"][4]), "user bob in account vision appears twice"),
        (lambda d: d["users"][0].pop("defaultAccount"), "users[0].defaultAccount: missing"),
        (lambda d: d.update(qos={}), "desired state.qos: {} is not allowed; expected list"),
    ],
)
def test_refusals_name_the_field(edit: Any, message: str) -> None:
    doc = _doc()
    edit(doc)
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_state(json.dumps(doc))


def test_not_json_is_refused() -> None:
    with pytest.raises(WireError, match="not JSON"):
        load_state("{")
    with pytest.raises(WireError, match=r"\[\] is not allowed; expected an object"):
        load_state("[]")
