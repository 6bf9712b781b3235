"""What a module of the package imports, read from its source (for the house-plan and image tests)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path


def _nodes(tree: ast.AST, runtime_only: bool) -> Iterator[ast.AST]:
    """Every node; with ``runtime_only``, none under ``if TYPE_CHECKING:`` (never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if runtime_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
            continue
        todo += list(ast.iter_child_nodes(node))


def imported_modules(
    module: str, path: Path, is_module: Callable[[str], bool], *, runtime_only: bool = False, lazy: bool = False
) -> Iterator[str]:
    """Modules ``module`` (its source at ``path``) imports, relative forms resolved; ``from pkg import sub``
    names the submodule when ``is_module`` says it is one, else the package. With ``lazy``, a string
    constant naming a module of the package (``slonk_infra.x``: what the lazy exports import on first use)
    counts too; with ``runtime_only``, nothing under ``if TYPE_CHECKING:``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _nodes(ast.parse(path.read_text(encoding="utf-8")), runtime_only):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif (
            lazy
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("slonk_infra.")
        ):
            # A "module:attribute" string (a cloud's deployer) only names its target; is_module filters it.
            yield node.value
