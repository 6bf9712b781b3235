"""Pulumi Outputs in a declaration: which fields take them, and how they get past validation.

A program often creates the network it deploys into, or reads it from another stack, so the fields
that only *name* an existing cloud object (the GCP project and network, the AWS VPC, subnets and node
role, reservations, an existing cluster's kubeconfig and context) may be given as a Pulumi ``Output``
(any ``pulumi.Input``): ``{"aws": {"vpcId": vpc.id, "subnetIds": [subnet.id]}}``. The model types them
:data:`~slonk_infra.declaration.model.CloudRef` (``Annotated[str, ACCEPTS_OUTPUT]``); this module reads
that mark (:func:`accepts_output`), and so do the generated ``TypedDict`` mirror and the cross-language
schema, which type those fields as inputs.

How, and why this way: the declaration is validated and planned completely before any resource is
declared, and a plan cannot wait for values that exist only after deployment. So, before pydantic sees
the declaration, :func:`hold_outputs` replaces each Output at a marked field by a stand-in string that
passes validation (``<pulumi output: aws.vpcId>``) and keeps the Output under that string. The plan
carries the kept Outputs (``ClusterPlan.pulumi_inputs``), and the cloud adapters hand a resource the
Output wherever a marked value goes into a resource input (``ClusterPlan.pulumi_input``), where Pulumi
accepts Inputs; nothing else reads these values. The alternative, an ``Output`` type throughout the
model, would make every validator, the plan and the renderers Output-aware for a handful of values that
none of them inspects. The stand-in names its field, so a message that quotes the value still says where
it came from, and ``cluster.plan.declaration`` shows it; the Outputs are kept per plan, never in module
state, so several clusters in one program (or several runs in one process) cannot mix them up.

An Output anywhere else (a machine type, a node count, a name) would have to decide the plan before it
exists; it is refused with a :class:`~slonk_infra.declaration.errors.DeclarationError` naming the field
and the fields that do accept Outputs. So is an Output standing for a whole list (``subnetIds``): the
number of subnets decides the resources (one EFS mount target per subnet), so the list is plain and its
items may be Outputs.

Nothing here imports the Pulumi SDK for a plain declaration: an Output can only exist once a program
has imported ``pulumi``, so the check looks for the SDK among the loaded modules.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import BaseModel

from slonk_infra.declaration.errors import DeclarationError, Problem, format_path
from slonk_infra.declaration.model import ACCEPTS_OUTPUT, ClusterDeclaration

STAND_IN = "<pulumi output: {path}>"


def is_output(value: Any) -> bool:
    """Whether ``value`` is a Pulumi Output or another awaitable ``pulumi.Input``."""
    pulumi = sys.modules.get("pulumi")
    output = getattr(pulumi, "Output", None) if pulumi is not None else None
    return (isinstance(output, type) and isinstance(value, output)) or inspect.isawaitable(value)


def accepted_fields(model: type[BaseModel] = ClusterDeclaration) -> list[str]:
    """The field paths (as written in YAML, ``[*]`` for any item) that accept an Output, sorted."""
    return sorted(_accepted(model, ""))


def hold_outputs(
    raw: Mapping[str, Any], model: type[BaseModel] = ClusterDeclaration
) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """``raw`` with each Output at a marked field replaced by its stand-in, and the Outputs by stand-in.

    ``raw`` itself is returned when it holds no Output. Raises :class:`DeclarationError` naming every
    Output at a field that does not accept one.
    """
    walk = _Walk()
    held = walk.value(raw, model, (), ())
    if walk.misplaced:
        allowed = ", ".join(accepted_fields(model))
        raise DeclarationError(
            [Problem(path, f"{why}; fields that accept Outputs: {allowed}") for path, why in walk.misplaced]
        )
    return (held if walk.held else raw), walk.held


class _Walk:
    """One pass over a raw declaration beside the model's types."""

    def __init__(self) -> None:
        self.held: dict[str, Any] = {}
        self.misplaced: list[tuple[str, str]] = []

    def value(self, value: Any, annotation: Any, metadata: tuple[Any, ...], loc: tuple[int | str, ...]) -> Any:
        path = format_path(loc)
        if is_output(value):
            if accepts_output(annotation, metadata):
                stand_in = STAND_IN.format(path=path)
                self.held[stand_in] = _as_output(value)
                return stand_in
            self.misplaced.append((path, _refusal(annotation)))
            return value
        members = _members(annotation)
        if isinstance(value, Mapping):
            models = [m for m in members if _is_model(m)]
            if models:
                return self._fields(value, models, loc)
            values = [typing.get_args(m)[1] for m in members if typing.get_origin(m) is dict]
            item = values[0] if values else None
            out = {k: self.value(v, item, (), (*loc, str(k))) for k, v in value.items()}
            return out if any(out[k] is not v for k, v in value.items()) else value
        if isinstance(value, list | tuple):
            items = [typing.get_args(m)[0] for m in members if typing.get_origin(m) is list]
            item = items[0] if items else None
            seq = [self.value(v, item, (), (*loc, i)) for i, v in enumerate(value)]
            return seq if any(a is not b for a, b in zip(seq, value, strict=True)) else value
        return value

    def _fields(self, value: Mapping[str, Any], models: list[type[BaseModel]], loc: tuple[int | str, ...]) -> Any:
        out: dict[str, Any] = {}
        for key, item in value.items():
            found = _field(models, key)
            if found is None:
                # Unknown keys are pydantic's to report; an Output inside one is still refused here.
                out[key] = self.value(item, None, (), (*loc, str(key)))
                continue
            name, info = found
            out[key] = self.value(item, info.annotation, tuple(info.metadata), (*loc, name))
        return out if any(out[k] is not v for k, v in value.items()) else value


def _as_output(value: Any) -> Any:
    """An Output for ``value``: an awaitable is awaited once and shared by every resource it goes into."""
    import pulumi  # a program that made an Output or awaitable has the SDK

    return value if isinstance(value, pulumi.Output) else pulumi.Output.from_input(value)


def _refusal(annotation: Any) -> str:
    inner = [typing.get_args(m)[0] for m in _members(annotation) if typing.get_origin(m) is list]
    if inner and accepts_output(inner[0], ()):
        return (
            "a Pulumi Output of the whole list is not accepted: the number of items decides what is created, "
            "so give a list whose items are Outputs"
        )
    return (
        "a Pulumi Output is not accepted here: this value decides the plan (machines, nodes, names, Slurm "
        "configuration) when the program runs, before any resource exists; give a plain value"
    )


def _members(annotation: Any) -> list[Any]:
    """``annotation`` with Annotated, Optional and unions unwrapped into member types."""
    if annotation is None:
        return []
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) if arg is not type(None) for m in _members(arg)]
    return [annotation]


def accepts_output(annotation: Any, metadata: tuple[Any, ...] = ()) -> bool:
    """Whether a field of this annotation (and pydantic ``metadata``) carries the mark, through ``| None``."""
    return ACCEPTS_OUTPUT in metadata or ACCEPTS_OUTPUT in _annotated_metadata(annotation)


def _annotated_metadata(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return tuple(getattr(annotation, "__metadata__", ()))
    if origin is typing.Union or origin is types.UnionType:
        return tuple(m for arg in typing.get_args(annotation) for m in _annotated_metadata(arg))
    return ()


def _is_model(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, BaseModel)


def _field(models: list[type[BaseModel]], key: str) -> tuple[str, Any] | None:
    """(the YAML name, the FieldInfo) of ``key``, given by Python or YAML name, on any of ``models``."""
    for model in models:
        for name, info in model.model_fields.items():
            if key in (name, info.alias):
                return str(info.alias or name), info
    return None


def _accepted(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}" if prefix else str(info.alias or name)
        yield from _accepted_at(info.annotation, tuple(info.metadata), path)


def _accepted_at(annotation: Any, metadata: tuple[Any, ...], path: str) -> Iterator[str]:
    if accepts_output(annotation, metadata):
        yield path
        return
    for member in _members(annotation):
        if _is_model(member):
            yield from _accepted(member, path)
        elif typing.get_origin(member) is list:
            yield from _accepted_at(typing.get_args(member)[0], (), f"{path}[*]")
        elif typing.get_origin(member) is dict:
            yield from _accepted_at(typing.get_args(member)[1], (), f"{path}.*")
