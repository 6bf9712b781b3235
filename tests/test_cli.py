"""The ``slonk-infra`` command as a newcomer meets it: any directory, stack paths, one clear message per bad file."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections import Counter
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


def test_check_reports_a_shared_wrong_image_once_as_its_root_cause(tmp_path: Path) -> None:
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
    # Every Slurm StatefulSet runs the image at least twice (munged init container and the main container),
    # slurmrestd's Deployment once, slurmdbd's in each of its containers. All of them run the stack's one
    # image: one finding, one line.
    per_resource = Counter(line.split(" container ")[0].removesuffix(" init") for line in every)
    resources = set(per_resource)
    assert len(every) == len(set(every))
    assert all(n >= 2 for r, n in per_resource.items() if " StatefulSet " in r), per_resource
    assert any("Deployment slurm/slurmdbd" in r for r in resources), sorted(resources)
    (line,) = lines
    assert line.startswith(
        f"[mandatory] uniform-cuda-image: image {shipped} is not the configured Slurm image {other} "
        f"({len(every)} violations on {len(resources)} resources: "
    )
    assert line.endswith("; --all lists each)")
    # --all: the same finding, each violation once, by resource URN (the Deployments sort first).
    assert "Deployment slurm/slurmdbd container reconciler" in every[0]
    verdict = f"gcp: FAILED - {len(every)} mandatory, 0 advisory violation(s)"
    assert verdict in grouped.output and verdict in listed.output


@pytest.fixture
def floating_gcp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder whose gcp stack declares the image by tag only (no digest); the current directory."""
    (tmp_path / "stacks").mkdir()
    digest = GCP.index("@sha256:")
    floating = GCP[:digest] + GCP[digest + len("@sha256:") + 64 :]
    (tmp_path / "stacks" / "Pulumi.gcp.yaml").write_text(floating, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_check_json_output_parses_and_names_the_root_cause(floating_gcp: Path) -> None:
    result = invoke("check", "gcp", "--format", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["stack"] == "gcp" and report["passed"] is False
    assert report["stackFile"] == "stacks/Pulumi.gcp.yaml"
    assert report["policyConfig"]["source"] == "packaged policy-config.json"
    assert report["policyConfig"]["path"] == str(DEFAULT_POLICY_CONFIG)
    assert report["summary"]["mandatory"] == len(report["violations"]) > 2
    assert [f["message"].split(" is ", 1)[1] for f in report["findings"]] == [
        "not pinned by digest (@sha256:<64 hex digits>)",
        "not the configured Slurm image "
        + json.loads(DEFAULT_POLICY_CONFIG.read_text())["uniform-cuda-image"]["image"],
    ]
    assert all(f["rootCause"] and f["policy"] == "uniform-cuda-image" for f in report["findings"])
    assert {v["resourceType"] for v in report["violations"]} == {
        "kubernetes:apps/v1:StatefulSet",
        "kubernetes:apps/v1:Deployment",
    }
    assert all(v["urn"].endswith("::" + v["resourceName"]) for v in report["violations"])


def test_check_sarif_to_a_file_is_valid_and_points_at_the_stack_file(floating_gcp: Path) -> None:
    from tests.policy import sarif_schema

    result = invoke("check", "gcp", "--format", "sarif", "--out", "policy.sarif")
    assert result.exit_code == 1, result.output
    # Standard output keeps the text report for the CI log.
    assert result.output.splitlines()[0].startswith("check gcp: ")
    assert result.output.endswith(
        "gcp: FAILED - 38 mandatory, 0 advisory violation(s)\nsarif report written to policy.sarif\n"
    )
    log = json.loads((floating_gcp / "policy.sarif").read_text(encoding="utf-8"))
    assert sarif_schema.errors(log) == []
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "slonk-infra"
    assert run["tool"]["driver"]["version"] == importlib.metadata.version("slonk-infra")
    assert len(run["results"]) == 2
    reference_line = GCP.splitlines().index(next(line for line in GCP.splitlines() if "reference:" in line)) + 1
    for item in run["results"]:
        physical = item["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"] == {"uri": "stacks/Pulumi.gcp.yaml", "uriBaseId": "%SRCROOT%"}
        assert physical["region"] == {"startLine": reference_line}
        assert {loc["kind"] for loc in item["locations"][0]["logicalLocations"]} == {"resource"}


def test_a_teams_own_registry_and_digest_pass_through_policy_config(tmp_path: Path) -> None:
    """docs/policies.md: copy the packaged file, change the image settings, point the stacks and --policy-config at it."""
    own = "europe-docker.pkg.dev/acme-ml/slurm/slurm-cuda:25.05.3-cuda12.8.1@sha256:" + "ab" * 32
    config = json.loads(DEFAULT_POLICY_CONFIG.read_text())
    config["uniform-cuda-image"] |= {"image": own, "allowedRegistries": ["europe-docker.pkg.dev/acme-ml"]}
    (tmp_path / "my-policy.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    shipped = json.loads(DEFAULT_POLICY_CONFIG.read_text())["uniform-cuda-image"]["image"]
    assert shipped in GCP
    (tmp_path / "Pulumi.gcp.yaml").write_text(GCP.replace(shipped, own), encoding="utf-8")
    result = invoke("check", str(tmp_path / "Pulumi.gcp.yaml"), "--policy-config", str(tmp_path / "my-policy.json"))
    assert result.exit_code == 0, result.output
    assert f"({tmp_path / 'my-policy.json'})" in result.output.splitlines()[0]
    assert "gcp: OK - 0 mandatory" in result.output


def test_check_help_points_at_policy_config_not_at_the_package() -> None:
    result = invoke("check", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--format [text|json|sarif]" in text and "--out FILE" in text
    assert "a copy of the packaged policy-config.json" in text


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


def test_status_reads_the_stacks_namespace_and_context_and_exits_by_readiness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from slonk_infra import cli, vocab

    seen: dict[str, object] = {}
    ready = {"n": 0}

    def sts(name: str, role: str, desired: int, n: int) -> SimpleNamespace:
        return SimpleNamespace(
            metadata=SimpleNamespace(name=name, labels=vocab.labels(role)),
            spec=SimpleNamespace(replicas=desired),
            status=SimpleNamespace(ready_replicas=n),
        )

    class Apps:
        def list_namespaced_stateful_set(self, namespace: str, label_selector: str = "") -> SimpleNamespace:
            seen["namespace"] = namespace
            return SimpleNamespace(items=[sts("slurmctld", "controller", 1, 1), sts("cpu-a", "worker", 2, ready["n"])])

        def list_namespaced_deployment(self, namespace: str, label_selector: str = "") -> SimpleNamespace:
            return SimpleNamespace(items=[])

    class Core:
        def read_namespaced_service(self, name: str, namespace: str) -> SimpleNamespace:
            return SimpleNamespace(spec=SimpleNamespace(type="ClusterIP", cluster_ip="10.96.0.7"), status=None)

        def list_namespaced_pod(self, namespace: str, label_selector: str = "") -> SimpleNamespace:
            return SimpleNamespace(items=[])

    def apis(kubeconfig: str | None, context: str | None) -> tuple[Apps, Core]:
        seen["context"] = context
        return Apps(), Core()

    monkeypatch.setattr(cli, "_kube_apis", apis)
    waiting = invoke("status", "--stack", str(STACKS / "Pulumi.local.yaml"))
    assert waiting.exit_code == 1, waiting.output
    assert "cpu-a" in waiting.output and "0/2 NOT READY" in waiting.output
    assert seen == {"namespace": "slurm", "context": "kind-slonk"}  # from the local stack's declaration
    ready["n"] = 2
    done = invoke("status", "--context", "other", "-n", "research", "--no-slurm-states")
    assert done.exit_code == 0 and done.output.rstrip().endswith("ready"), done.output
    assert seen == {"namespace": "research", "context": "other"}


def test_status_without_a_reachable_cluster_is_one_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    result = invoke("status", "--kubeconfig", str(missing))
    assert_one_clear_error(result, "cannot read the cluster")


def test_accounting_prints_the_intended_associations_and_the_reconcilers_input() -> None:
    from slonk_infra.accounting.desired import desired_state
    from slonk_infra.accounting.wire import load_state
    from slonk_infra.clouds import build_plan
    from slonk_infra.declaration.stacks import load_declaration

    stack = str(REPO / "examples" / "Pulumi.research.yaml")
    result = invoke("accounting", stack)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "stack research: cluster research, slurmdbd (external) is to hold:"
    assert "    interactive      Priority=100 Preempt=scavenge MaxWall=04:00:00" in lines
    # Children under their parent, each account followed by its users.
    accounts = [ln.split()[1] for ln in lines if ln.startswith("    account ")]
    assert accounts.index("lab") < accounts.index("students")
    assert any(ln.startswith("      user alice ") and ln.endswith("(default account)") for ln in lines)
    as_json = invoke("accounting", stack, "--json")
    assert as_json.exit_code == 0, as_json.output
    spec = build_plan(load_declaration(stack)).declaration.slurm.accounting
    assert spec is not None
    assert load_state(as_json.output) == desired_state(spec, "research")


def test_accounting_of_a_stack_without_it_says_so(tmp_path: Path) -> None:
    # The shipped local stack without its accounting section (and the researchers its accounts hold).
    stack = yaml.safe_load((STACKS / "Pulumi.local.yaml").read_text(encoding="utf-8"))
    cluster = stack["config"]["slonk-infra:cluster"]
    del cluster["slurm"]["accounting"], cluster["users"]
    path = tmp_path / "Pulumi.local.yaml"
    path.write_text(yaml.safe_dump(stack), encoding="utf-8")
    result = invoke("accounting", str(path))
    assert result.exit_code == 0, result.output
    assert result.output == "stack local: cluster slonk-local has no slurm.accounting; slurmdbd holds nothing\n"


def test_accounting_of_the_local_stack_is_its_researchers_accounts() -> None:
    result = invoke("accounting", str(STACKS / "Pulumi.local.yaml"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "stack local: cluster slonk-local, slurmdbd (in-cluster) is to hold:" in lines
    held = [ln.split()[:2] for ln in lines if ln.startswith(("    account ", "      user "))]
    assert held == [["account", "chemistry"], ["user", "bob"], ["account", "physics"], ["user", "alice"]]


@pytest.mark.parametrize("command", ["render", "check"])
def test_render_and_check_print_what_slurmdbd_is_to_hold(command: str, tmp_path: Path) -> None:
    """A change to the accounts shows in the render and the policy check, as `accounting` prints it."""
    stack = str(STACKS / "Pulumi.local.yaml")
    args = [command, stack, *(["--out", str(tmp_path / "out")] if command == "render" else [])]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    held = invoke("accounting", stack).output.splitlines()
    lines = result.output.splitlines()
    assert lines[-len(held) :] == held
    assert any(ln.startswith("      user alice ") for ln in lines)
