"""tests/slurmlab is used through its package API only: no test and no benchmark reaches into its modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tests.slurmlab

ROOT = Path(__file__).resolve().parent.parent
USERS = sorted([*ROOT.joinpath("tests").glob("test_*.py"), *ROOT.joinpath("benchmarks").glob("*.py")])


def test_users_import_only_what_the_package_exports() -> None:
    exported = set(tests.slurmlab.__all__)
    for path in USERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.slurmlab"):
                assert node.module == "tests.slurmlab", f"{path.name} imports {node.module}"
                names = {a.name for a in node.names}
                assert names <= exported, f"{path.name} imports {sorted(names - exported)}"


def test_users_touch_no_private_attribute_of_a_lab() -> None:
    for path in USERS:
        found = re.findall(r"\blab\._\w+", path.read_text(encoding="utf-8"))
        assert not found, f"{path.name}: {found}"


def test_every_export_exists() -> None:
    for name in tests.slurmlab.__all__:
        assert hasattr(tests.slurmlab, name), name
