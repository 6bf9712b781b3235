"""One vocabulary: the label and annotation keys of the library are spelled once, in slonk_infra/vocab.py."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "slonk_infra"
PREFIXES = ("slonk.dev/", "app.kubernetes.io/")
# Modules that may spell a key themselves, with the reason.
ALLOWED = {
    "vocab.py": "the vocabulary itself",
}


def _literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of the module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_label_and_annotation_keys_are_spelled_only_in_the_vocabulary() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in ALLOWED
        for line, text in _literals(path)
        if any(prefix in text for prefix in PREFIXES)
    ]
    assert found == [], "use the names in slonk_infra/vocab.py (or add one there)"


def test_the_vocabulary_imports_nothing_from_the_package() -> None:
    tree = ast.parse((PACKAGE / "vocab.py").read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert [name for name in imported if name and name.startswith("slonk_infra")] == []
