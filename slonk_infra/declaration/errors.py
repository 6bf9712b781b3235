"""Declaration errors that name the field path, the bad value and what is allowed."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a declaration."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class DeclarationError(ValueError):
    """A declaration was rejected; carries every problem found, each naming its field path."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid cluster declaration ({len(self.problems)} problem(s)):\n{lines}")


def format_path(loc: Iterable[int | str]) -> str:
    """Render a pydantic location tuple as ``pools[1].accelerator.type``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


class StackFileError(ValueError):
    """A stack file that cannot be read as one: missing, not YAML, not a mapping, no declaration in it."""


def from_validation_error(
    err: ValidationError, root: str = "", model: Any = None, tagged: Sequence[str] = ()
) -> list[Problem]:
    """Translate pydantic's errors into problems with camelCase field paths and the bad value.

    ``model`` is the type that was validated (default: the cluster declaration); an unknown field's
    message lists the fields allowed where it stands and the closest one. ``tagged`` names the tags
    of a tagged union (the declaration's clouds): pydantic leads each location with the tag, which
    is not a field the user wrote, so it is dropped, and a bad or missing tag is reported on ``cloud``.
    """
    if model is None:
        # Imported here: the declaration module imports this one.
        from slonk_infra.declaration.model import ClusterDeclaration

        model = ClusterDeclaration
    problems = []
    for e in err.errors(include_url=False):
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-after"))]
        cloud = ""
        if tagged and loc and loc[0] in tagged:
            cloud = str(loc.pop(0))
        if e["type"] == "union_tag_invalid":
            got = e.get("ctx", {}).get("tag", e.get("input"))
            problems.append(Problem(_join(root, "cloud"), choice(str(got), tagged, "cloud")))
            continue
        if e["type"] == "union_tag_not_found":
            problems.append(Problem(_join(root, "cloud"), f"required field is missing; one of: {', '.join(tagged)}"))
            continue
        path = format_path([root, *loc] if root else loc)
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = unknown_field(str(loc[-1]), fields_at(model, loc[:-1]))
        elif e["type"] == "missing":
            msg = "required field is missing"
            if cloud and len(loc) == 1:
                msg = f"required when cloud is {cloud}"
        elif e["type"] == "none_required" and cloud:
            msg = f"given but cloud is {cloud}"
        elif (
            e["type"] == "string_type" and isinstance(e.get("input"), int | float) and not isinstance(e["input"], bool)
        ):
            # YAML reads 1.30 as 1.3 and 30:00 as 1800: what was written is gone, so say how to keep it.
            msg = f'{msg} (got the number {e["input"]!r}); quote it in the YAML file, e.g. "1.30" or "30:00"'
        elif "input" in e and e["type"] not in ("value_error",) and not isinstance(e["input"], dict | list):
            msg = f"{msg} (got {e['input']!r})"
        problems.append(Problem(path, msg))
    return problems


def _join(root: str, name: str) -> str:
    return f"{root}.{name}" if root else name


def choice(value: str, allowed: Iterable[str], what: str) -> str:
    """Message for a value outside a closed set, with the closest valid name when one is near."""
    options = sorted(set(allowed))
    near = difflib.get_close_matches(value, options, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"{value!r} is not a known {what}; allowed: {', '.join(options) or '(none)'}{hint}"


def unknown_field(name: str, allowed: Sequence[str] | None) -> str:
    """Message for a key the model does not have: the fields allowed there and the closest one."""
    if not allowed:
        return "unknown field; check the spelling against the documented fields"
    near = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"unknown field {name!r}; allowed here: {', '.join(sorted(allowed))}{hint}"


def fields_at(model: Any, loc: Sequence[int | str]) -> list[str] | None:
    """The field names (as written in YAML) of the model found at ``loc`` inside ``model``, if any.

    Follows model fields, list items, mapping values, ``X | None`` and unions; a location part that
    no union member has (a tagged union's tag) is stepped over.
    """
    current = _members(model)
    for part in loc:
        following = [child for typ in current for child in _child(typ, part)]
        if not following and isinstance(part, str):
            continue  # a union tag in the location, not a field
        current = [m for typ in following for m in _members(typ)]
    names = {_yaml_name(n, f) for typ in current if _is_model(typ) for n, f in typ.model_fields.items()}
    return sorted(names) or None


def _is_model(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, BaseModel)


def _members(typ: Any) -> list[Any]:
    """``typ`` with Annotated, Optional and unions unwrapped into their member types."""
    origin = typing.get_origin(typ)
    if origin is typing.Annotated:
        return _members(typing.get_args(typ)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(typ) if arg is not type(None) for m in _members(arg)]
    return [typ]


def _child(typ: Any, part: int | str) -> list[Any]:
    if _is_model(typ):
        for name, info in typ.model_fields.items():
            if part in (name, info.alias):
                return [info.annotation]
        return []
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if isinstance(part, int) and origin in (list, tuple, Sequence) and args:
        return [args[0]]
    if isinstance(part, str) and origin in (dict, Mapping) and len(args) == 2:
        return [args[1]]
    return []


def _yaml_name(name: str, info: Any) -> str:
    return str(info.alias or name)
