"""Declaration errors that name the field path, the bad value and what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError


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


def from_validation_error(err: ValidationError, root: str = "") -> list[Problem]:
    """Translate pydantic's errors into problems with camelCase field paths and the bad value."""
    problems = []
    for e in err.errors(include_url=False):
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-after"))]
        path = format_path([root, *loc] if root else loc)
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling against the documented fields"
        elif e["type"] == "missing":
            msg = "required field is missing"
        elif "input" in e and e["type"] not in ("value_error",) and not isinstance(e["input"], dict | list):
            msg = f"{msg} (got {e['input']!r})"
        problems.append(Problem(path, msg))
    return problems


def choice(value: str, allowed: Iterable[str], what: str) -> str:
    """Message for a value outside a closed set, with the closest valid name when one is near."""
    options = sorted(set(allowed))
    near = difflib.get_close_matches(value, options, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"{value!r} is not a known {what}; allowed: {', '.join(options) or '(none)'}{hint}"
