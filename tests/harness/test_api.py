"""The harnesses in testing/ are used through their public names only, and nothing outside tests/ imports
a test module: benchmarks and the harnesses themselves are programs, not tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import testing.e2e
import testing.nvml
import testing.slurmlab

ROOT = Path(__file__).resolve().parents[2]
TESTS = sorted(ROOT.joinpath("tests").rglob("test_*.py"))
BENCHMARKS = sorted(ROOT.joinpath("benchmarks").glob("*.py"))
# Every Python file of the checkout outside tests/ (and outside virtual environments and caches).
OUTSIDE_TESTS = sorted(
    path
    for path in ROOT.rglob("*.py")
    if not {"tests", ".venv", "venv", ".git", "build", "node_modules"} & set(path.relative_to(ROOT).parts)
)


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    """(module, names) of every ``from module import names``, and (module, {}) of every ``import module``."""
    out: list[tuple[str, set[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module, {a.name for a in node.names}))
        elif isinstance(node, ast.Import):
            out += [(a.name, set()) for a in node.names]
    return out


def _strings(path: Path) -> str:
    """The source, so imports inside script strings handed to a child interpreter count too."""
    return path.read_text(encoding="utf-8")


def test_nothing_outside_tests_imports_tests() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in OUTSIDE_TESTS
        for line in _strings(path).splitlines()
        if re.match(r"\s*(from tests[. ]|import tests\b)", line)
    ]
    assert found == []


def test_slurmlab_users_import_only_what_the_package_exports() -> None:
    exported = set(testing.slurmlab.__all__)
    for path in [*TESTS, *BENCHMARKS]:
        for module, names in _imports(path):
            if module.startswith("testing.slurmlab"):
                assert module == "testing.slurmlab", f"{path.name} imports {module}"
                assert names <= exported, f"{path.name} imports {sorted(names - exported)}"


def test_benchmarks_import_only_what_the_harnesses_export() -> None:
    packages = {"testing.e2e": set(testing.e2e.__all__), "testing.slurmlab": set(testing.slurmlab.__all__)}
    for path in BENCHMARKS:
        for module, names in _imports(path):
            if module.startswith("testing."):
                assert module in {*packages, "testing.fakekube"}, f"{path.name} imports {module}"
                assert names <= packages.get(module, names), f"{path.name} imports {sorted(names - packages[module])}"
                assert not any(n.startswith("_") for n in names), f"{path.name} imports {sorted(names)}"
    assert re.search(r"^from testing\.fakekube import FakeKube$", _strings(ROOT / "benchmarks" / "sync.py"), re.M)


def test_users_touch_no_private_attribute_of_a_lab_or_a_cluster() -> None:
    # In tests, ``cluster`` may be a Pulumi component; there only labs and fake API servers are checked.
    e2e = ROOT / "testing" / "e2e"
    e2e_users = [*BENCHMARKS, e2e / "scenarios.py", e2e / "node_scenarios.py", e2e / "__main__.py"]
    for paths, names in ((TESTS, "lab|fake|kube"), (e2e_users, "lab|fake|kube|cluster")):
        for path in paths:
            found = re.findall(rf"\b(?:{names})\._\w+", _strings(path))
            assert not found, f"{path.name}: {found}"


def test_every_export_exists() -> None:
    for package in (testing.slurmlab, testing.e2e, testing.nvml):
        for name in package.__all__:
            assert hasattr(package, name), f"{package.__name__}.{name}"
