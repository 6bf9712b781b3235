"""The pods' scripts: shipped as package files, every placeholder filled from one source, shellcheck-clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest

from slonk_infra import vocab
from slonk_infra.slurm.scripts import (
    HEALTH_GROUPS,
    HEALTH_SPEC,
    PLACEHOLDER,
    SCRIPTS,
    SETTINGS,
    fill,
    render_scripts,
    source,
)
from tests.kube_support import plan_for

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(str(resources.files("slonk_infra.slurm.scripts")))


def test_every_shipped_file_is_rendered_and_every_rendered_script_is_shipped() -> None:
    shipped = sorted(p.name for p in PACKAGE_DIR.glob("*.sh"))
    assert shipped == sorted(SCRIPTS)
    assert list(render_scripts(plan_for("local"))) == [*SCRIPTS, HEALTH_SPEC, HEALTH_GROUPS]


def test_package_data_ships_the_scripts() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["slonk_infra"]
    for name in SCRIPTS:
        rel = (PACKAGE_DIR / name).relative_to(ROOT / "slonk_infra").as_posix()
        assert any(fnmatch(rel, pattern) for pattern in patterns), rel


def test_placeholders_are_all_filled_and_every_setting_is_used() -> None:
    used: set[str] = set()
    for name in SCRIPTS:
        used |= set(PLACEHOLDER.findall(source(name)))
    assert used == set(SETTINGS)
    for name, text in render_scripts(plan_for("gcp")).items():
        assert not PLACEHOLDER.search(text)
        assert name in (HEALTH_SPEC, HEALTH_GROUPS) or text.startswith("#!/bin/sh\n")
    rendered = render_scripts(plan_for("gcp"))
    assert f"export SLURM_CONF={vocab.PINNED_CONF_DIR}/slurm.conf" in rendered["slurmctld.sh"]
    assert f"for f in {vocab.CONF_DIR}/*; do" in rendered["slurmctld.sh"]
    assert '--conf-server "$SLURM_CONF_SERVER"' in rendered["slurmd.sh"]
    assert f":{vocab.SLURMCTLD_PORT},/g'):{vocab.SLURMCTLD_PORT}\"" in rendered["slurmd.sh"]


def test_an_unknown_placeholder_is_an_error_naming_it() -> None:
    with pytest.raises(KeyError, match="@NOPE@"):
        fill("x.sh", "echo @NOPE@\n", SETTINGS)
    assert fill("x.sh", "user@host @CONF_DIR@", SETTINGS) == f"user@host {vocab.CONF_DIR}"


def test_scripts_are_executable_in_the_tree() -> None:
    for name in SCRIPTS:
        assert os.access(PACKAGE_DIR / name, os.X_OK), name


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed; run tools/test.sh")
def test_rendered_scripts_pass_shellcheck(tmp_path: Path) -> None:
    files = []
    for name, text in render_scripts(plan_for("aws")).items():
        if not name.endswith(".sh"):
            continue
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        files.append(str(path))
    result = subprocess.run(["shellcheck", "--shell=sh", *files], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("controllers", "expected"),
    [("a.ns.svc", "a.ns.svc:{port}"), ("a.ns.svc,b.ns.svc", "a.ns.svc:{port},b.ns.svc:{port}")],
)
def test_slurmd_asks_every_controller_for_its_config(controllers: str, expected: str) -> None:
    text = render_scripts(plan_for("gcp"))["slurmd.sh"]
    [line] = [ln for ln in text.splitlines() if ln.startswith("SLURM_CONF_SERVER=")]
    out = subprocess.run(
        ["sh", "-c", f'{line}\necho "$SLURM_CONF_SERVER"'],
        env={**os.environ, "SLONK_CONTROLLER": controllers},
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert out == expected.format(port=vocab.SLURMCTLD_PORT)
