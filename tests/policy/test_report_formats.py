"""The check's report formats: one dedupe and one root-cause order for text, JSON and SARIF; SARIF checked
against the official SARIF 2.1.0 schema (tests/policy/sarif_schema.py says where it comes from)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from slonk_infra.policy import ALL_POLICIES, PolicyConfig
from slonk_infra.policy.config import read_raw, resolve
from slonk_infra.policy.report_formats import (
    FORMATS,
    JSON_REPORT_VERSION,
    SARIF_SCHEMA,
    findings,
    format_text,
    json_report,
    quoted_line,
    render,
    sarif_log,
    split_message,
    tool_version,
    urn_name,
    urn_type,
)
from slonk_infra.policy.runner import CheckResult, Violation, format_report
from tests.policy import sarif_schema

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "slonk_infra" / "policy" / "policy-config.json"
MANDATORY, ADVISORY = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY
IMAGE = "registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.8.1"
FLOATING = f"image {IMAGE} is not pinned by digest (@sha256:<64 hex digits>)"
STACK_YAML = f"""config:
  slonk-infra:cluster:
    name: slonk-gcp
    image:
      reference: {IMAGE}
      cudaVersion: "12.8"
"""


def urn(kind: str, name: str) -> str:
    return f"urn:pulumi:gcp::slonk-infra::slonk-infra:slurm:SlurmCluster$kubernetes:{kind}::{name}"


STS_A, STS_B, STS_C = (urn("apps/v1:StatefulSet", f"slonk-gcp-statefulset-{n}") for n in "abc")
RESTD = urn("apps/v1:Deployment", "slonk-gcp-deployment-slurmrestd")
HOME = urn("core/v1:PersistentVolumeClaim", "slonk-gcp-pvc-home")


def sample() -> CheckResult:
    """One floating image on four containers of three resources (and a duplicate report), three
    single-resource findings, and an advisory value shared by two workers."""
    v = Violation
    violations = [
        v("worker-on-delete-updates", MANDATORY, "StatefulSet slurm/b: updateStrategy is RollingUpdate", STS_B),
        v("uniform-cuda-image", MANDATORY, f"StatefulSet slurm/b container slurmd: {FLOATING}", STS_B),
        v("uniform-cuda-image", MANDATORY, f"StatefulSet slurm/a container slurmd: {FLOATING}", STS_A),
        v("uniform-cuda-image", MANDATORY, f"StatefulSet slurm/a init container munged: {FLOATING}", STS_A),
        v("uniform-cuda-image", MANDATORY, f"StatefulSet slurm/a container slurmd: {FLOATING}", STS_A),  # again
        v("uniform-cuda-image", MANDATORY, f"Deployment slurm/slurmrestd container slurmrestd: {FLOATING}", RESTD),
        v("worker-graceful-drain", ADVISORY, "StatefulSet slurm/b container slurmd: grace 30 s < 120 s", STS_B),
        v("worker-graceful-drain", ADVISORY, "StatefulSet slurm/a container slurmd: grace 30 s < 120 s", STS_A),
        v("stateful-resources-protected", MANDATORY, "PersistentVolumeClaim slurm/home: not protected", HOME),
        v("no-floating-image-tags", MANDATORY, "StatefulSet slurm/c container x: image busybox floats", STS_C),
        v("no-floating-image-tags", MANDATORY, "StatefulSet slurm/c init container y: image busybox floats", STS_C),
    ]
    undecided = [v("claims-name-a-storage-class", ADVISORY, "the stack: spec is unknown; not checked", "")] * 2
    return CheckResult(violations=violations, undecided=undecided, resources=40, policies=ALL_POLICIES)


@pytest.fixture(scope="module")
def config() -> PolicyConfig:
    """The packaged configuration with one policy disabled (a rule SARIF must still list)."""
    raw = read_raw(PACKAGED) | {"rbac-least-privilege": "disabled"}
    return resolve(raw, ALL_POLICIES, str(PACKAGED))


@pytest.fixture
def stack_file(tmp_path: Path) -> Path:
    path = tmp_path / "stacks" / "Pulumi.gcp.yaml"
    path.parent.mkdir()
    path.write_text(STACK_YAML, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------- the one order
def test_findings_are_deduped_grouped_by_root_cause_and_ordered() -> None:
    found = findings(sample().violations)
    assert [(f.policy, f.level, f.root_cause, len(f.places), len(f.resources)) for f in found] == [
        ("uniform-cuda-image", MANDATORY, True, 4, 3),  # the duplicate counted once
        ("no-floating-image-tags", MANDATORY, False, 2, 1),  # two containers of one resource
        ("stateful-resources-protected", MANDATORY, False, 1, 1),
        ("worker-on-delete-updates", MANDATORY, False, 1, 1),
        ("worker-graceful-drain", ADVISORY, True, 2, 2),
    ]
    image = found[0]
    assert image.text == FLOATING and image.message == FLOATING
    assert image.resources == tuple(sorted({STS_A, STS_B, RESTD}))
    assert [p.urn for p in image.places] == sorted(p.urn for p in image.places)
    assert found[3].message == "StatefulSet slurm/b: updateStrategy is RollingUpdate"


def test_the_order_does_not_depend_on_the_order_reported() -> None:
    result = sample()
    backwards = CheckResult(list(reversed(result.violations)), result.undecided, 40, ALL_POLICIES)
    assert findings(backwards.violations) == findings(result.violations)
    assert format_text("gcp", backwards, "cfg") == format_text("gcp", result, "cfg")


def test_a_message_without_a_subject_is_its_own_text() -> None:
    assert split_message("StatefulSet slurm/a container slurmd: image x floats") == (
        "StatefulSet slurm/a container slurmd",
        "image x floats",
    )
    assert split_message("no subject here") == ("", "no subject here")
    assert split_message("trailing: ") == ("", "trailing: ")
    assert urn_type(STS_A) == "kubernetes:apps/v1:StatefulSet" and urn_name(STS_A) == "slonk-gcp-statefulset-a"
    assert urn_type("") == urn_name("") == ""


# ------------------------------------------------------------------------------------------ text
def test_text_is_one_line_per_finding_root_cause_first() -> None:
    text = format_text("gcp", sample(), "packaged policy-config.json")
    lines = text.splitlines()
    assert lines[0] == "check gcp: 13 policies on 40 resources (packaged policy-config.json)"
    assert lines[1] == (
        f"[mandatory] uniform-cuda-image: {FLOATING} (4 violations on 3 resources: slonk-gcp-deployment-slurmrestd, "
        "slonk-gcp-statefulset-a, slonk-gcp-statefulset-b; --all lists each)"
    )
    assert lines[2] == (
        "[mandatory] no-floating-image-tags: StatefulSet slurm/c container x: image busybox floats "
        "(x2 on this resource; --all lists each)"
    )
    assert lines[3] == "[mandatory] stateful-resources-protected: PersistentVolumeClaim slurm/home: not protected"
    assert lines[4] == "[mandatory] worker-on-delete-updates: StatefulSet slurm/b: updateStrategy is RollingUpdate"
    assert lines[5].startswith("[advisory] worker-graceful-drain: grace 30 s < 120 s (2 violations on 2 resources:")
    assert lines[6] == "[not checked] claims-name-a-storage-class: the stack: spec is unknown; not checked"
    assert lines[7] == "how to fix:" and lines[8].startswith("  uniform-cuda-image: ")
    assert lines[-1] == "gcp: FAILED - 8 mandatory, 2 advisory violation(s)"  # deduped


def test_all_lists_each_violation_once_in_the_same_order() -> None:
    lines = format_text("gcp", sample(), "cfg", every=True).splitlines()
    listed = [line for line in lines if line.startswith(("[mandatory]", "[advisory]"))]
    assert len(listed) == len(set(listed)) == 10
    assert listed[:4] == [
        f"[mandatory] uniform-cuda-image: Deployment slurm/slurmrestd container slurmrestd: {FLOATING}",
        f"[mandatory] uniform-cuda-image: StatefulSet slurm/a container slurmd: {FLOATING}",
        f"[mandatory] uniform-cuda-image: StatefulSet slurm/a init container munged: {FLOATING}",
        f"[mandatory] uniform-cuda-image: StatefulSet slurm/b container slurmd: {FLOATING}",
    ]
    assert listed[-1].startswith("[advisory] worker-graceful-drain: StatefulSet slurm/b")


def test_the_runners_format_report_is_the_same_text() -> None:
    result = sample()
    assert format_report("gcp", result, "cfg", group=True) == format_text("gcp", result, "cfg")
    assert format_report("gcp", result, "cfg") == format_text("gcp", result, "cfg", every=True)


def test_a_clean_check_says_ok() -> None:
    clean = CheckResult(resources=40, policies=ALL_POLICIES)
    assert format_text("gcp", clean, "cfg").splitlines() == [
        "check gcp: 13 policies on 40 resources (cfg)",
        "gcp: OK - 0 mandatory, 0 advisory violation(s)",
    ]


# ------------------------------------------------------------------------------------------ JSON
def test_json_report_has_the_documented_fields(config: PolicyConfig, stack_file: Path) -> None:
    data = json.loads(render("json", "gcp", sample(), config, "packaged policy-config.json", stack_file))
    assert data == json_report("gcp", sample(), config, "packaged policy-config.json", stack_file)
    assert data["version"] == JSON_REPORT_VERSION
    assert data["tool"] == {"name": "slonk-infra", "version": tool_version()}
    assert data["stack"] == "gcp" and data["passed"] is False and data["resources"] == 40
    assert data["summary"] == {
        "mandatory": 8,
        "advisory": 2,
        "notChecked": 1,
        "findings": {"mandatory": 4, "advisory": 1},
    }
    policies = data["policyConfig"]["policies"]
    assert data["policyConfig"]["source"] == "packaged policy-config.json"
    assert data["policyConfig"]["path"] == str(PACKAGED)
    assert list(policies) == [p.name for p in ALL_POLICIES]
    assert policies["rbac-least-privilege"] == {"enforcementLevel": "disabled"}
    assert policies["worker-graceful-drain"] == {"enforcementLevel": "advisory", "minGraceSeconds": 120}
    assert policies["uniform-cuda-image"]["allowedRegistries"] == ["registry.example.com"]
    first = data["findings"][0]
    assert first == {
        "policy": "uniform-cuda-image",
        "enforcementLevel": "mandatory",
        "message": FLOATING,
        "rootCause": True,
        "resources": 3,
        "violations": [0, 1, 2, 3],
    }
    assert data["violations"][0] == {
        "policy": "uniform-cuda-image",
        "enforcementLevel": "mandatory",
        "message": f"Deployment slurm/slurmrestd container slurmrestd: {FLOATING}",
        "subject": "Deployment slurm/slurmrestd container slurmrestd",
        "urn": RESTD,
        "resourceType": "kubernetes:apps/v1:Deployment",
        "resourceName": "slonk-gcp-deployment-slurmrestd",
        "finding": 0,
    }
    # Every violation belongs to exactly the finding that lists it.
    for index, finding in enumerate(data["findings"]):
        assert all(data["violations"][i]["finding"] == index for i in finding["violations"])
    assert sum(len(f["violations"]) for f in data["findings"]) == len(data["violations"]) == 10
    assert [v["policy"] for v in data["notChecked"]] == ["claims-name-a-storage-class"]


def test_json_stack_file_is_relative_to_the_root(config: PolicyConfig, stack_file: Path, tmp_path: Path) -> None:
    assert json_report("gcp", sample(), config, "cfg", stack_file, tmp_path)["stackFile"] == "stacks/Pulumi.gcp.yaml"
    elsewhere = json_report("gcp", sample(), config, "cfg", stack_file, tmp_path / "stacks" / "x")["stackFile"]
    assert elsewhere == stack_file.resolve().as_uri()


# ----------------------------------------------------------------------------------------- SARIF
def test_sarif_log_is_valid_sarif_2_1_0(config: PolicyConfig, stack_file: Path, tmp_path: Path) -> None:
    log = sarif_log("gcp", sample(), config, stack_file, tmp_path)
    assert sarif_schema.errors(log) == []
    assert log["version"] == "2.1.0" and log["$schema"] == SARIF_SCHEMA
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "slonk-infra"
    assert run["tool"]["driver"]["version"] == tool_version()
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.resolve().as_uri() + "/"}}
    assert run["automationDetails"]["id"] == "slonk-infra/check/gcp/"


def test_sarif_rules_are_every_policy_with_its_level(config: PolicyConfig, stack_file: Path) -> None:
    rules = sarif_log("gcp", sample(), config, stack_file)["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [p.name for p in ALL_POLICIES]
    by_id = {r["id"]: r for r in rules}
    assert by_id["uniform-cuda-image"]["defaultConfiguration"] == {"level": "error"}
    assert by_id["worker-graceful-drain"]["defaultConfiguration"] == {"level": "warning"}
    assert by_id["rbac-least-privilege"]["defaultConfiguration"] == {"level": "none", "enabled": False}
    for rule, policy in zip(rules, ALL_POLICIES, strict=True):
        assert rule["shortDescription"] == {"text": policy.description}


def test_sarif_results_follow_the_findings(config: PolicyConfig, stack_file: Path, tmp_path: Path) -> None:
    log = sarif_log("gcp", sample(), config, stack_file, tmp_path)
    run = log["runs"][0]
    rules, results = run["tool"]["driver"]["rules"], run["results"]
    found = findings(sample().violations)
    assert [r["ruleId"] for r in results] == [f.policy for f in found] + ["claims-name-a-storage-class"]
    assert [r["level"] for r in results] == ["error"] * 4 + ["warning", "none"]
    assert results[-1]["kind"] == "open"
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        # GitHub code scanning needs a physical location: the stack file, relative to the repository root.
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"] == {
            "uri": "stacks/Pulumi.gcp.yaml",
            "uriBaseId": "%SRCROOT%",
        }
    image = results[0]
    assert image["message"]["text"].startswith(f"{FLOATING} (4 violations on 3 resources: Deployment slurm/slurmrestd")
    # The line of the stack file that declares the image the message quotes.
    assert image["locations"][0]["physicalLocation"]["region"] == {"startLine": 5}
    assert image["locations"][0]["logicalLocations"] == [
        {"name": urn_name(u), "fullyQualifiedName": u, "kind": "resource"} for u in sorted({STS_A, STS_B, RESTD})
    ]
    assert "region" not in results[3]["locations"][0]["physicalLocation"]
    assert "logicalLocations" not in results[-1]["locations"][0]  # the stack itself: no resource URN
    fingerprints = [r["partialFingerprints"]["slonkInfraFinding/v1"] for r in results]
    assert len(set(fingerprints)) == len(fingerprints)


def test_the_schema_rejects_what_is_not_sarif_2_1_0(config: PolicyConfig, stack_file: Path) -> None:
    """The validation can fail: a wrong version, level or missing tool each break the schema."""
    good = sarif_log("gcp", sample(), config, stack_file)
    wrong_version = copy.deepcopy(good) | {"version": "2.0.0"}
    assert any(e.startswith("version:") for e in sarif_schema.errors(wrong_version))
    wrong_level = copy.deepcopy(good)
    wrong_level["runs"][0]["results"][0]["level"] = "fatal"
    assert any("level" in e for e in sarif_schema.errors(wrong_level))
    no_tool = copy.deepcopy(good)
    del no_tool["runs"][0]["tool"]
    assert any("'tool' is a required property" in e for e in sarif_schema.errors(no_tool))
    bad_kind = copy.deepcopy(good)
    bad_kind["runs"][0]["results"][0]["locations"][0]["logicalLocations"] = [{"name": 7}]
    assert sarif_schema.errors(bad_kind)


def test_the_schema_is_the_oasis_one() -> None:
    assert sarif_schema.schema_sha256() == sarif_schema.OASIS_SCHEMA_SHA256
    assert sarif_schema.schema()["id"] == sarif_schema.OASIS_SCHEMA_ID
    assert sarif_schema.schema()["properties"]["version"]["enum"] == ["2.1.0"]


def test_sarif_for_a_stack_outside_the_root_uses_an_absolute_uri(config: PolicyConfig, stack_file: Path) -> None:
    log = sarif_log("gcp", sample(), config, stack_file, stack_file.parent / "elsewhere")
    run = log["runs"][0]
    assert "originalUriBaseIds" not in run
    artifact = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": stack_file.resolve().as_uri()}
    assert sarif_schema.errors(log) == []


def test_quoted_line_finds_the_declared_value() -> None:
    lines = STACK_YAML.splitlines()
    assert quoted_line(FLOATING, lines) == 5
    assert quoted_line("comes from evil.example.org, not in ['registry.example.com']", lines) == 5
    assert quoted_line("updateStrategy is RollingUpdate", lines) is None
    assert quoted_line(FLOATING, []) is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_a_clean_check(fmt: str, config: PolicyConfig, stack_file: Path) -> None:
    out = render(fmt, "gcp", CheckResult(resources=3, policies=ALL_POLICIES), config, "cfg", stack_file)
    if fmt == "text":
        assert out.endswith("gcp: OK - 0 mandatory, 0 advisory violation(s)")
        return
    data: dict[str, Any] = json.loads(out)
    if fmt == "sarif":
        assert sarif_schema.errors(data) == [] and data["runs"][0]["results"] == []
    else:
        assert data["passed"] is True and data["findings"] == [] and data["violations"] == []


def test_an_unknown_format_is_refused(config: PolicyConfig, stack_file: Path) -> None:
    with pytest.raises(ValueError, match="unknown report format 'xml'"):
        render("xml", "gcp", sample(), config, "cfg", stack_file)
