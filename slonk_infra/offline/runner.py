"""Run a Pulumi program offline against fake clouds and record what it would register.

The Pulumi CLI is not needed. :func:`run_offline` drives the program through Pulumi's public test API
(``pulumi.runtime.set_mocks`` with a :class:`pulumi.runtime.Mocks`, ``pulumi.runtime.test``) with
``preview=False``, so every ``apply`` on a known value runs, against the fake clouds of
:mod:`slonk_infra.offline.fake_clouds` (a table of what each resource type answers). With
``kubernetes_outputs=False`` (slonk-infra's own program) the outputs of the Kubernetes objects the fake
clouds answer nothing for stay unknown, and applies on them do not run (:func:`_kubernetes_outputs_unknown`).
Every registration is recorded with the options the engine would receive (``protect``,
``retain_on_delete``, parent, dependencies); tests and offline checks read that record. Two things the
public API does not offer: the options are read by a :class:`pulumi.runtime.mocks.MockMonitor` subclass
(passed through ``set_mocks(monitor=...)``), and secrets are recognised by their wire envelope.

Transforms: the mock monitor of the SDK does not run ``transforms=`` resource options or
``pulumi.runtime.register_resource_transform`` callbacks (the engine does). The recording monitor here
runs them as the engine does before it registers a resource: the resource's own transforms, then each
ancestor's, then the stack's, each called through the program's callback server over gRPC, so what
is recorded (and checked by ``slonk-infra check``) is what ``pulumi preview`` would see. Invoke
transforms (``register_invoke_transform``) are not run offline.

Stack outputs: under the SDK's mocks the root stack registers its outputs when the runtime is set up,
before the program has exported anything. :func:`run_offline` registers them again once the program has
run, as the engine receives them at the end of ``pulumi up``, and the monitor keeps them in their wire
form (secrets in their envelope, unknowns as the sentinel) for the render to mask.

Stack references: no other stack is read offline, so a ``pulumi.StackReference``'s ``outputs`` are unknown,
and with them every ``get_output`` / ``require_output`` value (their applies do not run; passed to a
resource, they are recorded as the unknown sentinel and render as known after deploy). The mocks cannot
answer an unknown: with ``preview=False`` the SDK resolves whatever they answer as known (the wire's
unknown sentinel becomes ``None``), so :func:`run_offline` marks ``outputs`` unknown as each reference is
constructed.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import grpc  # type: ignore[import-untyped]
import pulumi
from google.protobuf import json_format, struct_pb2  # type: ignore[import-untyped]
from pulumi import _types as sdk_types
from pulumi.output import Unknown
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor, _resolve_callbacks
from pulumi.runtime.proto import callback_pb2, callback_pb2_grpc, resource_pb2, source_pb2
from pulumi.runtime.stack import Stack, massage
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

# The fake clouds live in their own module; their names stay importable from here.
from slonk_infra.offline.fake_clouds import (
    FAKE_CALLS,
    FAKE_OUTPUTS,
    FAKE_RANDOM_B64,
    FAKE_VPC_CIDR,
    Fake,
    FakeClouds,
    after_deploy,
    answers_nothing,
)

T = TypeVar("T")

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's wire sentinel for an unknown value
SECRET_SIG_KEY = rpc._special_sig_key  # the wire envelope of a secret: {SECRET_SIG_KEY: SECRET_SIG, "value": ...}
SECRET_SIG = rpc._special_secret_sig
# The wire envelope of a resource reference: {SECRET_SIG_KEY: RESOURCE_SIG, "urn": ..., "id": ...}.
RESOURCE_SIG = rpc._special_resource_sig
SECRET_PLACEHOLDER = "<secret: kept in Pulumi state as a secret and in the cluster as a Secret>"


# Start of what str() of an Output returns instead of its value.
OUTPUT_STR_MARKER = "Calling __str__ on an Output"


@dataclass(frozen=True)
class Registration:
    """One ``RegisterResource`` call as the engine would receive it (inputs use wire camelCase)."""

    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    dependencies: tuple[str, ...]
    provider: str
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """The ``customTimeouts`` option (create / update / delete, as Go durations), where set."""


# ---------------------------------------------------------------------------- the recording monitor
# RegisterResourceRequest field -> TransformResourceOptions field, for the options a transform sees and sets.
_OPTION_FIELDS = (
    ("dependencies", "depends_on"),
    ("protect", "protect"),
    ("ignoreChanges", "ignore_changes"),
    ("replaceOnChanges", "replace_on_changes"),
    ("version", "version"),
    ("aliases", "aliases"),
    ("provider", "provider"),
    ("customTimeouts", "custom_timeouts"),
    ("pluginDownloadURL", "plugin_download_url"),
    ("retainOnDelete", "retain_on_delete"),
    ("deletedWith", "deleted_with"),
    ("deleteBeforeReplace", "delete_before_replace"),
    ("additionalSecretOutputs", "additional_secret_outputs"),
    ("providers", "providers"),
    ("pluginChecksums", "plugin_checksums"),
    ("importId", "import"),
    ("hideDiffs", "hide_diff"),
    ("replace_with", "replace_with"),
)


def _timeouts(request: Any) -> dict[str, str]:
    """The create / update / delete custom timeouts a registration asks for (empty where none is set)."""
    if not request.HasField("customTimeouts"):
        return {}
    return {k: v for k in ("create", "update", "delete") if (v := getattr(request.customTimeouts, k))}


def _copy_field(src: Any, src_name: str, dst: Any, dst_name: str) -> None:
    """Copy one protobuf field across messages whose fields have the same shape but other names."""
    fd = src.DESCRIPTOR.fields_by_name[src_name]
    if fd.label == fd.LABEL_REPEATED:
        target = getattr(dst, dst_name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            target.clear()
            for key, value in getattr(src, src_name).items():
                if fd.message_type.fields_by_name["value"].message_type is not None:
                    target[key].CopyFrom(value)
                else:
                    target[key] = value
        else:
            del target[:]
            target.extend(getattr(src, src_name))
    elif fd.message_type is not None:
        if src.HasField(src_name):
            getattr(dst, dst_name).CopyFrom(getattr(src, src_name))
        else:
            dst.ClearField(dst_name)
    elif fd.has_presence and not src.HasField(src_name):
        dst.ClearField(dst_name)
    else:
        setattr(dst, dst_name, getattr(src, src_name))


def _has_unknown(value: Any) -> bool:
    """Whether deserialised inputs hold an unknown anywhere (one walk; they hold no cycles)."""
    if isinstance(value, Unknown):
        return True
    if isinstance(value, dict):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return False


def _with_sentinels(value: Any) -> Any:
    """Deserialised inputs with each unknown as the wire's sentinel, which the render shows as known after
    deploy (deserialised as under ``pulumi up``, an unknown would be ``None`` and its key dropped)."""
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _with_sentinels(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_sentinels(v) for v in value]
    return value


def _without_unknowns(value: Any) -> Any:
    """What ``rpc.deserialize_properties`` without ``keep_unknowns`` gives for the same wire value: an unknown
    is ``None``, and a mapping drops the keys whose value is ``None``."""
    if isinstance(value, Unknown):
        return None
    if isinstance(value, dict):
        return {k: v for k, item in value.items() if (v := _without_unknowns(item)) is not None}
    if isinstance(value, list):
        return [_without_unknowns(v) for v in value]
    return value


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, running transforms as the engine does and keeping every registration in order."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.transforms_run = 0
        self._stack_callbacks: list[Any] = []
        self._own_callbacks: dict[str, list[Any]] = {}
        self._parents: dict[str, str] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._stack_urn = ""
        self.stack_outputs: dict[str, Any] = {}

    def RegisterStackTransform(self, request: Any) -> Any:
        self._stack_callbacks.append(request)
        return super().RegisterStackTransform(request)  # type: ignore[no-untyped-call]

    def RegisterResource(self, request: Any) -> Any:
        if request.type == "pulumi:pulumi:Stack":
            response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
            self._stack_urn = response.urn
            return response
        own = list(request.transforms)
        request = self._transformed(request)
        # What the SDK's MockMonitor.RegisterResource does, but with the inputs deserialised once, keeping
        # unknowns: the record needs them, and the mocks get them as the SDK would hand them over
        # (unknowns dropped). Deserialising twice cost about a tenth of a large program's run. The event
        # loop is the one resource references in the inputs are rehydrated on, on this worker thread.
        urn = self.make_urn(request.parent, request.type, request.name)
        _ensure_event_loop()  # type: ignore[no-untyped-call]
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        unknowns = _has_unknown(inputs)
        args = pulumi.runtime.MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=_without_unknowns(inputs) if unknowns else inputs,
            provider=request.provider,
            resource_id=request.importId,
            custom=request.custom or False,
            transforms=_resolve_callbacks(request.transforms),
        )
        rid: Any  # None where the mocks give no id: passed on as the SDK's monitor passes it
        rid, state = self.mocks.new_resource(args)
        answer = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, rid, state)
        self._own_callbacks[urn] = own
        self._parents[urn] = request.parent
        self.registrations.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=urn,
                parent=request.parent,
                custom=bool(request.custom),
                inputs=_with_sentinels(inputs) if unknowns else inputs,
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                delete_before_replace=bool(request.deleteBeforeReplace),
                dependencies=tuple(request.dependencies),
                provider=request.provider,
                custom_timeouts=_timeouts(request),
            )
        )
        return resource_pb2.RegisterResourceResponse(urn=urn, id=rid, object=answer)

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if request.urn and request.urn == self._stack_urn:
            # The wire form, as the engine stores it: the render masks secrets and unknowns from it.
            self.stack_outputs = json_format.MessageToDict(request.outputs)
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]

    def _chain(self, request: Any) -> list[Any]:
        """The resource's own transforms, then each ancestor's, then the stack's (the engine's order)."""
        chain = list(request.transforms)
        parent = request.parent
        while parent:
            chain += self._own_callbacks.get(parent, [])
            parent = self._parents.get(parent, "")
        return chain + self._stack_callbacks

    def _transformed(self, request: Any) -> Any:
        chain = self._chain(request)
        if not chain:
            return request
        result = resource_pb2.RegisterResourceRequest()
        result.CopyFrom(request)
        for callback in chain:
            ask = resource_pb2.TransformRequest(
                type=result.type, name=result.name, custom=result.custom, parent=result.parent
            )
            ask.properties.CopyFrom(result.object)
            for ours, theirs in _OPTION_FIELDS:
                _copy_field(result, ours, ask.options, theirs)
            answer = resource_pb2.TransformResponse.FromString(self._invoke(callback, ask.SerializeToString()))
            self.transforms_run += 1
            result.object.CopyFrom(answer.properties)
            if answer.HasField("options"):
                for ours, theirs in _OPTION_FIELDS:
                    _copy_field(answer.options, theirs, result, ours)
                result.deleteBeforeReplaceDefined = answer.options.HasField("delete_before_replace")
        return result

    def _invoke(self, callback: Any, request: bytes) -> bytes:
        """Call the program's callback server, as the engine does (this runs on a worker thread)."""
        channel = self._channels.get(callback.target)
        if channel is None:
            channel = self._channels[callback.target] = grpc.insecure_channel(callback.target)
        stub = callback_pb2_grpc.CallbacksStub(channel)
        reply = stub.Invoke(callback_pb2.CallbackInvokeRequest(token=callback.token, request=request))
        response: bytes = reply.response
        return response

    def close(self) -> None:
        """Close the channels to callback servers."""
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()


# ------------------------------------------------------------------------------------------ a run
@dataclass
class OfflineRun(Generic[T]):
    """What a program returned, its resolved outputs, and every registration it made."""

    value: T
    resolved: Any
    registrations: list[Registration] = field(default_factory=list)
    transforms_run: int = 0
    exports: dict[str, Any] = field(default_factory=dict)
    """The stack outputs the program exported (``pulumi.export``), in wire form (secret envelopes, unknowns)."""

    def of_type(self, typ: str) -> list[Registration]:
        """Registrations of one resource type token."""
        return [r for r in self.registrations if r.type == typ]

    def named(self, name: str) -> Registration:
        """The one registration with logical name ``name``."""
        found = [r for r in self.registrations if r.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} registrations named {name!r}")
        return found[0]

    def duplicate_urns(self) -> list[str]:
        """URNs registered more than once (the mock accepts them; the real engine fails the update)."""
        seen = Counter(r.urn for r in self.registrations)
        return sorted(urn for urn, n in seen.items() if n > 1)

    def output_leaks(self) -> list[str]:
        """Strings that carry Pulumi's text for an ``Output`` formatted with ``str()``."""
        return [s for s in self.strings() if OUTPUT_STR_MARKER in s]

    def strings(self) -> Iterator[str]:
        """Every string in the recorded inputs and the resolved value."""
        yield from _strings([r.inputs for r in self.registrations])
        yield from _strings(self.resolved)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


class _EngineLogFormat(logging.Formatter):
    """``warning: <message>``, as the Pulumi CLI and this project's CLI print a program's log lines."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at each record (a test or a CLI runner may have replaced it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _program_log() -> logging.Logger:
    """Where a program's ``pulumi.log`` lines go offline: standard error, one ``severity: message`` line each
    (the mock engine hands them to a logger; without one, Python prints them bare)."""
    log = logging.getLogger("slonk_infra.offline.program")
    log.propagate = False
    log.setLevel(logging.INFO)
    if not log.handlers:
        handler = _StderrHandler()
        handler.setFormatter(_EngineLogFormat())
        log.addHandler(handler)
    return log


PROGRAM_LOG = _program_log()


def run_offline(
    program: Callable[[], T],
    resolve: Callable[[T], Any] | None = None,
    *,
    project: str = "slonk-infra",
    stack: str = "offline",
    config: dict[str, str] | None = None,
    kubernetes_outputs: bool = True,
) -> OfflineRun[T]:
    """Run ``program`` against :class:`FakeClouds`; ``resolve`` picks outputs to resolve from its value.

    ``kubernetes_outputs=False`` is for programs known not to read the outputs of the Kubernetes objects
    they declare (slonk-infra's own): those outputs stay unknown instead of being rebuilt from the inputs
    (see :func:`_kubernetes_outputs_unknown`). Not thread-safe and not re-entrant: Pulumi's runtime
    settings are process-global.
    """
    monitor = RecordingMonitor(FakeClouds())
    # A fresh root stack per run, so runs do not parent resources to an earlier run's stack.
    pulumi.runtime.reset_options(project=project, stack=stack, preview=False)
    pulumi.runtime.set_mocks(
        monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=PROGRAM_LOG
    )
    pulumi.runtime.set_all_config(config or {})
    holder: dict[str, Any] = {}

    def body() -> Any:
        value = program()
        holder["value"] = value
        _register_exports()
        if resolve is None:
            return None
        return pulumi.Output.from_input(resolve(value)).apply(lambda v: holder.__setitem__("resolved", v))

    try:
        with (
            _unknown_stack_references(),
            _no_stack_traces(),
            _memoised_type_helpers(),
            nullcontext() if kubernetes_outputs else _kubernetes_outputs_unknown(),
        ):
            pulumi.runtime.test(body)()  # type: ignore[no-untyped-call]
    finally:
        monitor.close()
    return OfflineRun(
        value=holder["value"],
        resolved=holder.get("resolved"),
        registrations=monitor.registrations,
        transforms_run=monitor.transforms_run,
        exports=monitor.stack_outputs,
    )


@contextmanager
def _unknown_stack_references() -> Iterator[None]:
    """While it lasts, each ``pulumi.StackReference`` constructed has unknown ``outputs`` (see the module's notes).

    The unknown keeps the read's resources and secretness, and resolves once the read has, as a real one would.
    """
    cls = pulumi.StackReference
    original = cls.__init__

    def init(self: pulumi.StackReference, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        read = self.outputs
        unknown: pulumi.Output[Any] = pulumi.Output(read.resources(), read.future(), _false(), read.is_secret())
        self.outputs = unknown

    cls.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.__init__ = original  # type: ignore[method-assign]


@contextmanager
def _no_stack_traces() -> Iterator[None]:
    """While it lasts, resources register with an empty stack trace and no source position.

    The SDK walks the Python stack (``traceback.extract_stack``, reading every frame's source line) for each
    resource it registers and sends the frames to the engine, which shows them in its diagnostics. The
    mock monitor drops them, and on a large program the walk cost about a tenth of the run.
    """
    original = getattr(sdk_resource, "_get_stack_trace", None)
    if original is None:  # another SDK release: leave it as it is
        yield
        return
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = original


@contextmanager
def _kubernetes_outputs_unknown() -> Iterator[None]:
    """While it lasts, the output properties of a Kubernetes object the fake cloud answers nothing for
    (:func:`~slonk_infra.offline.fake_clouds.answers_nothing`) resolve as unknown.

    Under ``pulumi up`` (``preview=False``, which offline runs use so that every ``apply`` runs) the SDK
    rebuilds each output property the engine did not answer from the resource's inputs: it deserialises
    them again and builds the provider SDK's typed output objects (a pod spec is a few hundred of them).
    On the L-gcp declaration that was about a fifth of the run, for outputs slonk-infra's own program never
    reads. Unknown rather than empty: an ``apply`` on one does not run, and what it feeds shows as known
    after deploy, so a program that did read one would render differently: tests/offline/test_runner.py
    renders every example stack both ways.
    """
    original = rpc.resolve_outputs

    def resolve_outputs(res: Any, serialized_props: Any, outputs: Any, *args: Any, **kwargs: Any) -> Any:
        if not len(outputs) and answers_nothing(getattr(res, "_type", ""), "kind" in serialized_props):
            kwargs["resolve_missing_as_unknown"] = True
            return original(res, _NO_PROPERTIES, outputs, *args, **kwargs)
        return original(res, serialized_props, outputs, *args, **kwargs)

    rpc.resolve_outputs = resolve_outputs
    try:
        yield
    finally:
        rpc.resolve_outputs = original


_NO_PROPERTIES = struct_pb2.Struct()


# Pure functions of a type annotation that the SDK calls for every value it serialises or resolves (about
# 100,000 calls in a large program, each taking the annotation apart again with typing.get_origin).
_TYPE_HELPERS = (
    (sdk_types, "unwrap_type"),
    (sdk_types, "unwrap_optional_type"),
    (sdk_types, "_is_optional_type"),
    (sdk_types, "_is_union_type"),
    (rpc, "_get_list_element_type"),
)


def _memoised(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` with its answers kept by argument (an unhashable argument is passed through, not kept)."""
    answers: dict[Any, Any] = {}

    def call(arg: Any) -> Any:
        try:
            return answers[arg]
        except KeyError:
            answer = answers[arg] = fn(arg)
            return answer
        except TypeError:
            return fn(arg)

    return call


@contextmanager
def _memoised_type_helpers() -> Iterator[None]:
    """While it lasts, the SDK's type-annotation helpers of :data:`_TYPE_HELPERS` remember their answers."""
    originals = [(module, name, getattr(module, name)) for module, name in _TYPE_HELPERS if hasattr(module, name)]
    for module, name, fn in originals:
        setattr(module, name, _memoised(fn))
    try:
        yield
    finally:
        for module, name, fn in originals:
            setattr(module, name, fn)


async def _false() -> bool:
    return False


def _register_exports() -> None:
    """Register the root stack's exports, as the engine receives them when a real program ends."""
    stack = pulumi.runtime.get_root_resource()
    if isinstance(stack, Stack) and stack.outputs:
        stack.register_outputs(massage(stack.outputs, []))


__all__ = [
    "FAKE_CALLS",
    "FAKE_OUTPUTS",
    "FAKE_RANDOM_B64",
    "FAKE_VPC_CIDR",
    "RESOURCE_SIG",
    "SECRET_PLACEHOLDER",
    "UNKNOWN",
    "Fake",
    "FakeClouds",
    "OfflineRun",
    "RecordingMonitor",
    "Registration",
    "after_deploy",
    "run_offline",
]
