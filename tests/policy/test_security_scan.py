"""Checkov on the rendered manifests: every finding left is justified in docs/checkov-accepted.yaml."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.manifests import COMPONENT, build_manifests
from slonk_infra.slurm import render_slurm_files

ACCEPTED = Path(__file__).resolve().parents[2] / "docs" / "checkov-accepted.yaml"


def checkov() -> str:
    found = os.environ.get("SLONK_CHECKOV") or shutil.which("checkov")
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but checkov is missing (tools/test.sh installs it)", pytrace=False)
        pytest.skip("checkov not installed; run tools/test.sh")
    return found


def scan(stack: str, tmp: Path) -> tuple[set[tuple[str, str]], dict[str, str]]:
    plan = build_plan(load_declaration(stack))
    roles: dict[str, str] = {}
    for i, obj in enumerate(build_manifests(plan, render_slurm_files(plan))):
        (tmp / f"{i:03d}.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(obj))), encoding="utf-8")
        ns = obj["metadata"].get("namespace", "default")
        roles[f"{obj['kind']}.{ns}.{obj['metadata']['name']}"] = obj["metadata"]["labels"][COMPONENT]
    out = subprocess.run(
        [checkov(), "-d", str(tmp), "--framework", "kubernetes", "--quiet", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report: Any = json.loads(out.stdout)
    report = report[0] if isinstance(report, list) else report
    findings = {(f["check_id"], roles[f["resource"]]) for f in report["results"]["failed_checks"]}
    return findings, roles


def test_every_checkov_finding_is_justified(tmp_path: Path) -> None:
    accepted: dict[str, dict[str, Any]] = yaml.safe_load(ACCEPTED.read_text(encoding="utf-8"))
    allowed = {(check, role) for check, entry in accepted.items() for role in entry["roles"]}
    seen: set[tuple[str, str]] = set()
    for stack in ("local", "gcp", "aws"):
        d = tmp_path / stack
        d.mkdir()
        findings, _ = scan(stack, d)
        unjustified = sorted(findings - allowed)
        assert not unjustified, f"{stack}: checkov findings not justified in {ACCEPTED.name}: {unjustified}"
        seen |= findings
    stale = sorted(allowed - seen)
    assert not stale, f"entries in {ACCEPTED.name} that match no finding any more (remove them): {stale}"
    assert all(entry["why"].strip() for entry in accepted.values())
