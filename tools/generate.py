"""Regenerate every checked-in generated file; after a declaration change this is the one command to run.

    python tools/generate.py            # rewrite the generated files that are stale
    python tools/generate.py --check    # write nothing; name the stale files and exit 1

Every file derives from the pydantic declaration (``slonk_infra/declaration/model.py``), in this order:

- ``slonk_infra/declaration/args.py``: its ``TypedDict`` mirror (:mod:`slonk_infra.declaration.typegen`),
  formatted by ruff with the project's settings, so ``ruff format --check`` agrees with the file;
- ``components/schema.json``: the cross-language package schema, which Pulumi's analyzer builds from that
  mirror as the component provider does (``components/provider.py``);
- ``docs/declaration.md``: the field reference (:mod:`slonk_infra.declaration.reference`), whose examples
  are taken from the shipped stack files (``stacks/``, ``examples/``), so editing one may change it too;
- ``docs/stack.schema.json``: the JSON Schema of a stack file, which the shipped stacks name on their
  first line for editors (the same module).

The component schema is read from the mirror as imported, so it is built after ``args.py`` is written, in an
interpreter that had not imported the mirror before: run this as a command, not from a process that has
loaded :mod:`slonk_infra.cluster`. ``tests/declaration/test_generated.py`` fails while any file is stale.

It lives beside the package rather than in it: the schema needs the top-level component and the
``components/`` folder, which only a checkout has, and the declaration layer may not import either.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python tools/generate.py"
TYPED_ARGS = "slonk_infra/declaration/args.py"
SCHEMA = "components/schema.json"
REFERENCE = "docs/declaration.md"
STACK_SCHEMA = "docs/stack.schema.json"
# The shipped stack files; the reference takes its examples from them, in this order.
STACK_FOLDERS = ("stacks", "examples")

if str(ROOT) not in sys.path:
    # Run as a script, only tools/ is on the path; ``components`` imports from the repository root.
    sys.path.insert(0, str(ROOT))


def typed_args() -> str:
    """``args.py``'s text: the generated mirror as ``ruff format`` leaves it."""
    from slonk_infra.declaration.typegen import generate

    return subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", TYPED_ARGS, "-"],
        input=generate(),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout


def schema() -> str:
    """``schema.json``'s text, from the mirror as imported (see the module docstring for the order)."""
    from components import provider

    return provider.render()


def shipped_stacks() -> list[tuple[str, dict[str, Any]]]:
    """``(repository-relative path, raw declaration)`` of every shipped stack file."""
    from slonk_infra.declaration.stacks import load_declaration

    paths = [p for folder in STACK_FOLDERS for p in sorted((ROOT / folder).glob("Pulumi.*.yaml"))]
    return [(p.relative_to(ROOT).as_posix(), load_declaration(str(p))) for p in paths]


def reference() -> str:
    """``declaration.md``'s text: every field, with examples from the shipped stacks."""
    from slonk_infra.declaration.reference import reference_markdown

    return reference_markdown(shipped_stacks())


def stack_schema() -> str:
    """``stack.schema.json``'s text."""
    from slonk_infra.declaration.reference import stack_schema_text

    return stack_schema_text()


# Repository-relative path -> its text. Dict order is the order of writing: the schema reads the mirror.
GENERATED: dict[str, Callable[[], str]] = {
    TYPED_ARGS: typed_args,
    SCHEMA: schema,
    REFERENCE: reference,
    STACK_SCHEMA: stack_schema,
}


def stale(root: Path = ROOT) -> list[str]:
    """The generated files under ``root`` whose text differs from what their generator produces now."""
    out = []
    for path, produce in GENERATED.items():
        target = root / path
        if not target.is_file() or target.read_text(encoding="utf-8") != produce():
            out.append(path)
    return out


def write(root: Path = ROOT) -> list[str]:
    """Rewrite the stale generated files under ``root``; the paths rewritten. Current files keep their mtime."""
    written = []
    for path, produce in GENERATED.items():
        target = root / path
        text = produce()
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print(__doc__, file=sys.stderr)
        return 2
    if argv == ["--check"]:
        paths = stale()
        for path in paths:
            print(f"{path} is stale: run {COMMAND}", file=sys.stderr)
        return 1 if paths else 0
    for path in write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
