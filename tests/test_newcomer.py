"""The newcomer's path: the README's two commands, pinned installs, CI running what the README says, the license.

CI (``.ci/run``) runs the README's main command for real on Debian's own python3 in a fresh copy of the
repository (``tools/quickstart.py check``: it needs the package registry, which tests do not contact);
these tests keep the pieces that check depends on from drifting apart.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("quickstart", REPO / "tools" / "quickstart.py")
assert _SPEC is not None and _SPEC.loader is not None
quickstart = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(quickstart)

README = (REPO / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version and not re.search(r"[<>=!~,; ]", version), f"not an exact pin: {line!r}"
        assert canonical(name) not in out, f"pinned twice: {name}"
        out[canonical(name)] = version
    return out


def test_readme_quick_start_is_the_main_job_then_the_tests() -> None:
    main_job, tests = quickstart.quickstart_commands(README)
    assert main_job == "bash tools/venv.sh && .venv/bin/slonk-infra render local"
    assert tests == "bash tools/test.sh"


def test_quick_start_parser_rejects_a_block_of_several_commands() -> None:
    text = "## Quick start\n\n```sh\npip install x\nslonk-infra render local\n```\n\n## Next\n"
    with pytest.raises(ValueError, match="one command line"):
        quickstart.quickstart_commands(text)


def test_ci_runs_both_readme_commands_on_debians_python() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert 'PYTHON="${PYTHON:-/usr/bin/python3}"' in ci
    assert "\nbash tools/test.sh\n" in ci
    assert '\n"$PYTHON" tools/quickstart.py check\n' in ci
    assert "export CI=true" in ci


@pytest.mark.parametrize("script", ["tools/test.sh", "tools/venv.sh", "tools/lock.sh"])
def test_scripts_install_python_packages_only_into_virtual_environments(script: str) -> None:
    for line in (REPO / script).read_text(encoding="utf-8").splitlines():
        if "pip install" in line and not line.lstrip().startswith("#"):
            assert re.search(r'"\$[A-Za-z_]+(/[a-z]+)?/bin/python" -m pip install', line), f"{script}: {line.strip()}"


def test_venv_script_installs_at_the_pins_and_test_sh_uses_it() -> None:
    venv = (REPO / "tools" / "venv.sh").read_text(encoding="utf-8")
    assert "-c constraints.txt" in venv and "apt-get install -y -qq python3-venv" in venv
    test_sh = (REPO / "tools" / "test.sh").read_text(encoding="utf-8")
    assert "bash tools/venv.sh test" in test_sh
    assert "-c tools/checkov-constraints.txt" in test_sh


def test_test_sh_announces_each_phase() -> None:
    test_sh = (REPO / "tools" / "test.sh").read_text(encoding="utf-8")
    phases = re.findall(r'^phase "([^"]+)"', test_sh, re.MULTILINE)
    assert len(phases) >= 6 and phases[-1] == "done"
    # Every command line of the script belongs to an announced phase.
    first_phase = test_sh.index('\nphase "')
    assert all(
        line.startswith(("#", "set ", "cd ", "export ", "phase()")) or not line.strip()
        for line in test_sh[:first_phase].splitlines()
    )


def test_constraints_pin_every_declared_dependency_at_its_declared_version() -> None:
    locked = pins((REPO / "constraints.txt").read_text(encoding="utf-8").splitlines())
    extras = PYPROJECT["project"]["optional-dependencies"]
    # Every extra's own requirements; an extra naming the package itself (test -> slonk-infra[gcp,aws])
    # adds those extras' pins, which are checked where they are declared.
    own = [req for reqs in extras.values() for req in reqs if not req.startswith(PYPROJECT["project"]["name"] + "[")]
    declared = pins(PYPROJECT["project"]["dependencies"] + own)
    mismatched = {name: (v, locked.get(name)) for name, v in declared.items() if locked.get(name) != v}
    assert not mismatched, f"constraints.txt disagrees with pyproject.toml (run tools/lock.sh): {mismatched}"


def test_checkov_constraints_are_exact_pins_including_checkov() -> None:
    locked = pins((REPO / "tools" / "checkov-constraints.txt").read_text(encoding="utf-8").splitlines())
    assert locked["checkov"] == "3.3.30"


def test_license_is_apache_2_in_full_and_declared() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 200
    assert PYPROJECT["project"]["license"] == "Apache-2.0"


def test_package_root_documents_and_exports_its_public_api() -> None:
    root = importlib.import_module("slonk_infra")
    assert root.__doc__
    for name in root.__all__:
        assert getattr(root, name) is not None
        assert f"{name}`" in root.__doc__, f"{name} is exported but not described in slonk_infra's docstring"
