"""The ``slonk-infra`` command as a newcomer meets it: any directory, stack paths, one clear message per bad file."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from slonk_infra.cli import DEFAULT_POLICY_CONFIG, main

REPO = Path(__file__).resolve().parents[1]
STACKS = REPO / "stacks"
GCP = (STACKS / "Pulumi.gcp.yaml").read_text(encoding="utf-8")


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """Run in a private folder with no stacks/ and no Pulumi.yaml above it."""
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_one_clear_error(result: Result, *expected: str) -> None:
    """Exit status 2, one message naming what is wrong, and no traceback."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.output.startswith("error: "), result.output
    assert "Traceback" not in result.output
    for text in expected:
        assert text in result.output, result.output


def test_version_is_the_installed_distribution() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"slonk-infra, version {importlib.metadata.version('slonk-infra')}"


def test_render_from_another_directory_takes_a_stack_path_and_writes_under_cwd(elsewhere: Path) -> None:
    result = invoke("render", str(STACKS / "Pulumi.local.yaml"))
    assert result.exit_code == 0, result.output
    summary = json.loads((elsewhere / "out" / "local" / "summary.json").read_text())
    assert summary["stack"] == "local" and summary["resources"] > 0
    assert f"-> {Path('out') / 'local'}/" in result.output


def test_render_help_names_the_default_output_folder() -> None:
    text = " ".join(invoke("render", "--help").output.split())
    assert "Default: out/<stack name> under the current directory." in text


def test_named_stack_is_found_from_a_subfolder_through_pulumi_yaml(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "config").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text("name: x\nruntime: python\nstackConfigDir: config\n")
    (project / "config" / "Pulumi.gcp.yaml").write_text(GCP)
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    old = Path.cwd()
    os.chdir(deep)
    try:
        result = invoke("validate", "gcp")
    finally:
        os.chdir(old)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("stack gcp: cluster slonk-gcp on gcp - OK")


def test_named_stack_with_no_project_around_says_how_to_name_it(elsewhere: Path) -> None:
    assert_one_clear_error(invoke("validate", "local"), "no stack 'local'", "Pulumi.local.yaml", "--stacks-dir")


def test_misspelled_stack_name_offers_the_closest() -> None:
    assert_one_clear_error(
        invoke("validate", "locl", "--stacks-dir", str(STACKS)), "no stack 'locl'", "did you mean 'local'?"
    )


def test_missing_stack_file_path(elsewhere: Path) -> None:
    assert_one_clear_error(invoke("render", "nope/Pulumi.x.yaml"), "stack file nope/Pulumi.x.yaml not found")


BAD_FILES = [
    pytest.param(
        "config:\n  slonk-infra:cluster:\n    name: x\n   cloud: gcp\n",
        ["not valid YAML", "line 4, column 4"],
        id="broken-yaml",
    ),
    pytest.param("- a\n- b\n", ["a stack file is a mapping with a 'config:' key", "holds a list"], id="list-file"),
    pytest.param("just text\n", ["holds a string"], id="scalar-file"),
    pytest.param("config: [1, 2]\n", ["'config' must be a mapping of config keys, not a list"], id="config-list"),
    pytest.param(
        GCP.replace("slonk-infra:cluster:", "slonk-infra:clustr:", 1),
        ["no 'slonk-infra:cluster' object under 'config:'", "did you mean 'slonk-infra:clustr'?"],
        id="declaration-key-misspelled",
    ),
    pytest.param(
        "config:\n  slonk-infra:cluster: [a]\n",
        ["slonk-infra:cluster must be a mapping (the cluster declaration), not a list"],
        id="declaration-list",
    ),
    pytest.param(
        GCP.replace("\n    image:", "\n    imagee:", 1),
        ["imagee: unknown field 'imagee'; allowed here: aws, cloud,", "did you mean 'image'?"],
        id="unknown-top-level-field",
    ),
    pytest.param(
        GCP.replace("nodes:", "nodez:", 1),
        ["pools[0].nodez: unknown field 'nodez'; allowed here: accelerator,", "did you mean 'nodes'?"],
        id="unknown-pool-field",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_FILES)
@pytest.mark.parametrize("command", ["validate", "render", "check"])
def test_bad_stack_file_gives_one_clear_message(tmp_path: Path, command: str, text: str, expected: list[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text, encoding="utf-8")
    result = invoke(command, str(path), *(["-o", str(tmp_path / "out")] if command == "render" else []))
    assert_one_clear_error(result, *expected)
    assert not (tmp_path / "out").exists()


def test_bad_file_from_the_installed_command_prints_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text("config: {slonk-infra:cluster: {name: x", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "slonk_infra.cli", "render", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: {path}: not valid YAML: line 1, column 39:"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


def test_policy_config_default_is_packaged_and_the_pack_reads_the_same_file(elsewhere: Path) -> None:
    assert DEFAULT_POLICY_CONFIG.is_file()
    assert (REPO / "policies" / "policy-config.json").resolve() == DEFAULT_POLICY_CONFIG
    result = invoke("check", str(STACKS / "Pulumi.local.yaml"))
    assert result.exit_code == 0, result.output
    assert "(packaged policy-config.json)" in result.output
    assert "local: OK - 0 mandatory, 0 advisory violation(s)" in result.output


def test_check_groups_repeated_violations_per_policy_and_resource(tmp_path: Path) -> None:
    config = json.loads(DEFAULT_POLICY_CONFIG.read_text())
    shipped = config["uniform-cuda-image"]["image"]
    other = shipped.rsplit("@sha256:", 1)[0] + "@sha256:" + "0" * 64
    config["uniform-cuda-image"]["image"] = other
    path = tmp_path / "policy-config.json"
    path.write_text(json.dumps(config))
    grouped = invoke("check", "gcp", "--stacks-dir", str(STACKS), "--policy-config", str(path))
    listed = invoke("check", "gcp", "--stacks-dir", str(STACKS), "--policy-config", str(path), "--all")
    assert grouped.exit_code == listed.exit_code == 1
    every = [line for line in listed.output.splitlines() if line.startswith("[mandatory]")]
    lines = [line for line in grouped.output.splitlines() if line.startswith("[mandatory]")]
    # Every Slurm StatefulSet runs the image twice (munged init container and the main container);
    # slurmrestd's Deployment once.
    resources = {line.split(" container ")[0].split(" init")[0] for line in every}
    statefulsets = {r for r in resources if " StatefulSet " in r}
    assert len(lines) == len(resources)
    assert len(every) == 2 * len(statefulsets) + len(resources - statefulsets)
    assert sum(line.endswith("(x2 on this resource; --all lists each)") for line in lines) == len(statefulsets)
    verdict = f"gcp: FAILED - {len(every)} mandatory, 0 advisory violation(s)"
    assert verdict in grouped.output and verdict in listed.output


def test_rendered_munge_key_secret_shows_its_key_name_and_no_wire_envelope(tmp_path: Path) -> None:
    result = invoke("render", "gcp", "--stacks-dir", str(STACKS), "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    (secret_file,) = (tmp_path / "kubernetes").glob("*-secret-munge-key.yaml")
    secret = yaml.safe_load(secret_file.read_text())
    assert secret["data"] == {"munge.key": "<secret: kept in Pulumi state as a secret and in the cluster as a Secret>"}
    # Pulumi's secret envelope ({<sig key>: <secret sig>, "value": ...}) is nowhere in what was written.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "4dabf18193072939515e22adb298388d" not in text and "1b47061264138c4ac30d75fd1eb44270" not in text


def test_check_runs_a_users_program_with_its_transforms_as_preview_would(tmp_path: Path) -> None:
    """A project's __main__.py that unprotects every claim through a stack transform fails the check."""
    program = tmp_path / "__main__.py"
    program.write_text(
        "import pulumi\n"
        "from slonk_infra.program import main\n\n"
        "def unprotect(args):\n"
        "    if args.type_ == 'kubernetes:core/v1:PersistentVolumeClaim':\n"
        "        opts = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(protect=False))\n"
        "        return pulumi.ResourceTransformResult(args.props, opts)\n"
        "    return None\n\n"
        "pulumi.runtime.register_resource_transform(unprotect)\n"
        "main()\n",
        encoding="utf-8",
    )
    own = invoke("check", "gcp", "--stacks-dir", str(STACKS))
    users = invoke("check", "gcp", "--stacks-dir", str(STACKS), "--program", str(program))
    assert own.exit_code == 0 and "transforms:" not in own.output, own.output
    assert users.exit_code == 1, users.output
    assert "[mandatory] stateful-resources-protected:" in users.output
    assert "resource transform call(s) applied as `pulumi preview` would" in users.output
