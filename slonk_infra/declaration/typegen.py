"""Generate ``slonk_infra/declaration/args.py``: the declaration as ``TypedDict`` types, from the pydantic model.

The pydantic :class:`~slonk_infra.declaration.model.ClusterDeclaration` is the one source of truth. Pulumi's
component analyzer (which builds the cross-language schema) reads only ``TypedDict`` arguments, and a
Python user benefits from a type checker seeing the argument shape, so the ``TypedDict`` mirror is
generated from the model and checked in; a test fails when it is stale. ``python tools/generate.py``
regenerates it (formatted by ruff) together with the component schema built from it.

Mapping: ``Literal`` becomes ``str`` (its allowed values go into the docstring; pydantic still checks
them), a field with a default or ``None`` becomes ``NotRequired``, nested models become their own
``...Args`` types, and a field that accepts a Pulumi Output (:mod:`slonk_infra.declaration.inputs`)
becomes ``pulumi.Input[...]``, which the schema turns into a non-plain property. Keys are the Python
(snake_case) names; the schema and YAML use camelCase.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from slonk_infra.declaration.inputs import accepts_output
from slonk_infra.declaration.model import ClusterDeclaration

HEADER = '''"""The cluster declaration as ``TypedDict`` types (generated: do not edit).

Generated from :mod:`slonk_infra.declaration.model` by ``python tools/generate.py``; a test fails when this
file is stale. Pydantic validates the values (allowed literals, ranges, cross-field rules)
when :class:`slonk_infra.Cluster` is constructed. Fields typed ``pulumi.Input`` also take a Pulumi
Output (see :mod:`slonk_infra.declaration.inputs`).
"""

# No ``from __future__ import annotations``: Pulumi's component analyzer reads these annotations.
from typing import NotRequired, TypedDict

import pulumi
'''


def _type_name(model: type[BaseModel]) -> str:
    base = model.__name__.removesuffix("Spec").removesuffix("Declaration")
    return f"{base}Args"


def _literal_values(annotation: Any) -> list[str] | None:
    if get_origin(annotation) is Literal:
        return [str(v) for v in get_args(annotation)]
    return None


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """``(inner, optional)`` of ``X | None`` / ``Annotated[X, ...]``."""
    optional = False
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            annotation = get_args(annotation)[0]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            optional = optional or len(members) < len(get_args(annotation))
            if len(members) != 1:
                raise TypeError(f"unions other than X | None are not supported: {annotation!r}")
            annotation = members[0]
            continue
        return annotation, optional


class _Generator:
    def __init__(self) -> None:
        self.order: list[type[BaseModel]] = []

    def visit(self, model: type[BaseModel]) -> None:
        if model in self.order:
            return
        for info in model.model_fields.values():
            for nested in _models_in(info.annotation):
                self.visit(nested)
        self.order.append(model)

    def py_type(self, annotation: Any, metadata: tuple[Any, ...] = ()) -> str:
        if accepts_output(annotation, metadata):
            return f"pulumi.Input[{self.py_type(_unwrap(annotation)[0])}]"
        inner, _ = _unwrap(annotation)
        if _literal_values(inner) is not None:
            return "str"
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return _type_name(inner)
        origin = get_origin(inner)
        if origin is list:
            return f"list[{self.py_type(get_args(inner)[0])}]"
        if origin is dict:
            return f"dict[str, {self.py_type(get_args(inner)[1])}]"
        if inner in (str, int, bool, float):
            return str(inner.__name__)
        raise TypeError(f"no TypedDict mapping for {inner!r}")

    def field(self, name: str, info: FieldInfo) -> list[str]:
        typ = self.py_type(info.annotation, tuple(info.metadata))
        _, optional = _unwrap(info.annotation)
        required = info.is_required() and not optional
        line = f"    {name}: {typ}" if required else f"    {name}: NotRequired[{typ}]"
        doc = (info.description or "").strip()
        values = _literal_values(_unwrap(info.annotation)[0])
        if values:
            doc = f"{doc} One of: {', '.join(values)}."
        if not required and info.default is not None and not callable(info.default_factory):
            default = info.default
            if isinstance(default, bool | int | float | str) and default != "":
                doc = f"{doc} Default: {default}."
        doc = doc.replace('"""', "'''").replace("\\", "\\\\")
        return [line, f'    """{doc}"""']

    def render(self) -> str:
        out = [HEADER]
        for model in self.order:
            out.append("")
            out.append(f"class {_type_name(model)}(TypedDict):")
            summary = (model.__doc__ or model.__name__).strip().splitlines()[0]
            out.append(f'    """{summary}"""')
            out.append("")
            for name, info in model.model_fields.items():
                out.extend(self.field(name, info))
            out.append("")
        return "\n".join(out).rstrip() + "\n"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    inner, _ = _unwrap(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return [inner]
    found: list[type[BaseModel]] = []
    for arg in get_args(inner):
        found.extend(_models_in(arg))
    return found


def generate(model: type[BaseModel] = ClusterDeclaration) -> str:
    """Source of the ``TypedDict`` module mirroring ``model`` and every model it nests."""
    gen = _Generator()
    gen.visit(model)
    return gen.render()
