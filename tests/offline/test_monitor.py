"""The recording monitor's shortcuts: one deserialisation per resource, no stack traces, memoised type helpers.

Each shortcut must leave what is recorded, and what the fake clouds are handed, as the SDK's own path would.
"""

from __future__ import annotations

from typing import Any

import pulumi
from google.protobuf import struct_pb2  # type: ignore[import-untyped]
from pulumi import _types as sdk_types
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc

from slonk_infra.offline import runner
from slonk_infra.offline.fake_clouds import FakeClouds
from slonk_infra.offline.runner import UNKNOWN, run_offline

SECRET = {rpc._special_sig_key: rpc._special_secret_sig, "value": {"key": UNKNOWN, "kept": "s"}}
WIRE = {
    "top": UNKNOWN,
    "nested": {"gone": UNKNOWN, "n": 1.0, "deeper": {"x": [UNKNOWN, "a", {"y": UNKNOWN}]}},
    "list": [UNKNOWN, "x", [UNKNOWN]],
    "secret": SECRET,
    "plain": "text",
}


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


class Probe(pulumi.CustomResource):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__("test:index:Probe", name, props)


async def _value(value: Any) -> Any:
    return value


async def _unknown() -> bool:
    return False


def test_one_deserialisation_gives_the_mocks_what_the_sdk_would() -> None:
    seen: list[tuple[Any, Any]] = []

    def program() -> None:
        # Inside a run, so the SDK's settings are those of `pulumi up` (not a preview).
        kept = rpc.deserialize_properties(_struct(WIRE), keep_unknowns=True)
        seen.append((runner._without_unknowns(kept), rpc.deserialize_properties(_struct(WIRE))))

    run_offline(program)
    ours, sdk = seen[0]
    assert ours == sdk
    assert "top" not in ours and ours["list"][0] is None and "gone" not in ours["nested"]


def test_unknown_inputs_are_recorded_as_the_sentinel_and_handed_to_the_mocks_dropped(monkeypatch: Any) -> None:
    handed: list[dict[str, Any]] = []
    original = FakeClouds.new_resource

    def new_resource(self: FakeClouds, args: pulumi.runtime.MockResourceArgs) -> Any:
        if args.typ == "test:index:Probe":
            handed.append(args.inputs)
        return original(self, args)

    monkeypatch.setattr(FakeClouds, "new_resource", new_resource)

    def program() -> None:
        later: pulumi.Output[str] = pulumi.Output(set(), _value("later"), _unknown())
        Probe("p", {"a": later, "b": {"c": later, "d": 1}, "l": [later, "x"], "known": "k"})
        Probe("q", {"only": "known"})

    run = run_offline(program)
    p, q = run.named("p"), run.named("q")
    assert p.inputs == {"a": UNKNOWN, "b": {"c": UNKNOWN, "d": 1}, "l": [UNKNOWN, "x"], "known": "k"}
    assert handed[0] == {"b": {"d": 1}, "l": [None, "x"], "known": "k"}
    assert q.inputs == handed[1] == {"only": "known"}


def test_stack_traces_are_skipped_and_type_helpers_memoised_only_during_a_run() -> None:
    trace, unwrap = sdk_resource._get_stack_trace, sdk_types.unwrap_type
    during: list[Any] = []

    def program() -> None:
        during.append((sdk_resource._get_stack_trace, sdk_types.unwrap_type, sdk_resource._get_stack_trace()))
        Probe("p", {"a": 1})

    run = run_offline(program)
    patched_trace, patched_unwrap, stack = during[0]
    assert patched_trace is not trace and patched_unwrap is not unwrap
    assert not stack.frames  # an empty trace: the engine gets no source position
    assert sdk_resource._get_stack_trace is trace and sdk_types.unwrap_type is unwrap
    assert run.named("p").inputs == {"a": 1}


def test_memoised_answers_once_per_argument_and_passes_unhashable_arguments_through() -> None:
    calls: list[Any] = []

    def double(x: Any) -> Any:
        calls.append(x)
        return x * 2

    memo = runner._memoised(double)
    assert memo(2) == memo(2) == 4
    assert memo([1]) == memo([1]) == [1, 1]
    assert calls == [2, [1], [1]]
