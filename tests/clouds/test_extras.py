"""One cloud's SDK per extra: a stack whose cloud's extra is missing stops with the install line.

Each case runs the installed command in a fresh interpreter where the named provider SDKs cannot be
imported (a meta-path finder refuses them, as if the extra had not been installed), so what is proven is
what a one-cloud user sees.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from slonk_infra.clouds import registry

ROOT = Path(__file__).resolve().parents[2]

HIDE = """
import sys
HIDDEN = set(sys.argv.pop(1).split(","))

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
import importlib.util
real = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: None if name.split(".")[0] in HIDDEN else real(name, package)
from slonk_infra.cli import main
sys.argv[0] = "slonk-infra"
main()
"""


def _run(hidden: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE, hidden, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(("stack", "sdk"), [("gcp", "pulumi_gcp"), ("aws", "pulumi_aws")])
def test_a_stack_without_its_clouds_extra_says_what_to_install(tmp_path: Path, stack: str, sdk: str) -> None:
    proc = _run(sdk, "render", str(ROOT / "stacks" / f"Pulumi.{stack}.yaml"), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"pip install -c constraints.txt '.[{stack}]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists(), "nothing is rendered when the SDK is missing"


def test_local_renders_with_neither_cloud_sdk(tmp_path: Path) -> None:
    proc = _run(
        "pulumi_gcp,pulumi_aws",
        "render",
        str(ROOT / "stacks" / "Pulumi.local.yaml"),
        "-o",
        str(tmp_path / "out"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "kubernetes" / "all.yaml").is_file()


def test_validate_needs_no_cloud_sdk(tmp_path: Path) -> None:
    proc = _run("pulumi_gcp", "validate", str(ROOT / "stacks" / "Pulumi.gcp.yaml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_every_sdk_a_target_names_is_what_its_extra_installs() -> None:
    """The descriptor's module and extra name agree with pyproject's extras (module = distribution with _)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for cloud, target in registry.targets().items():
        if not target.sdk_modules:
            assert target.extra is None, cloud
            continue
        assert target.extra in extras, cloud
        installed = {req.split("==")[0].replace("-", "_") for req in extras[str(target.extra)]}
        assert set(target.sdk_modules) <= installed, (cloud, installed)
        # The core install carries no cloud SDK; the extras add them.
        core = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
        assert not any(req.split("==")[0].replace("-", "_") in target.sdk_modules for req in core), cloud
