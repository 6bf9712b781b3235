"""The house plan holds: the layers of docs/architecture.md, read from its table, against the real imports.

Every import counts: top-level, inside functions, under ``TYPE_CHECKING``, and module names handed to
``importlib`` as strings (the lazy exports). A test that reads the table keeps the document and the
code from drifting apart: a new arrow needs a new word in the table, where a reader sees it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.source_imports import imported_modules

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "slonk_infra"
PLAN = ROOT / "docs" / "architecture.md"
MAX_ROOT_MODULES = 10


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[str]:
    """Library modules ``module`` imports, in any form."""
    return imported_modules(module, path, MODULES.__contains__, lazy=True)


def _graph() -> dict[str, set[str]]:
    return {m: {t for t in _imports(m, p) if t in MODULES and t != m} for m, p in MODULES.items()}


def _layers() -> list[tuple[str, list[str], list[str]]]:
    """(layer, its module prefixes, the layers it may import) from the table in docs/architecture.md."""
    rows = []
    for line in PLAN.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.startswith("|") or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        name, modules, may_import = cells[0], cells[1], cells[2]
        rows.append(
            (name.strip("*`"), re.findall(r"`([\w.]+)`", modules), re.findall(r"\*\*(\w[\w-]*)\*\*", may_import))
        )
    return rows


LAYERS = _layers()


def _layer_of(module: str) -> str:
    best, length = "", -1
    for name, prefixes, _ in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = name, len(prefix)
    return best


def test_the_table_is_read_and_places_every_module() -> None:
    assert len(LAYERS) >= 8, "docs/architecture.md lost its layer table"
    unplaced = sorted(m for m in MODULES if m != "slonk_infra" and not _layer_of(m))
    assert not unplaced, f"modules in no layer of docs/architecture.md: {unplaced}"


def test_every_import_follows_the_layer_table() -> None:
    allowed = {name: {name, *may} for name, _, may in LAYERS}
    wrong = [
        f"{m} ({_layer_of(m)}) imports {t} ({_layer_of(t)})"
        for m, targets in sorted(_graph().items())
        if m != "slonk_infra"
        for t in sorted(targets)
        if _layer_of(t) not in allowed[_layer_of(m)]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph = _graph()
    graph.pop("slonk_infra")  # the root's lazy exports point down only; nothing imports the root's names
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_the_root_holds_at_most_ten_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


@pytest.mark.parametrize("where", ["slonk_infra", "benchmarks", "components", "policies", "tools", "testing"])
def test_nothing_outside_tests_imports_tests(where: str) -> None:
    for path in sorted((ROOT / where).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path
