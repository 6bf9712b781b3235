"""slonk-health --publish: the verdict lands in the Slurm node's Comment in the form the operations
controller parses (tested through the controller's own parser, so the two cannot drift apart)."""

from __future__ import annotations

import json
from pathlib import Path

from slonk_infra.health.publish import MAX_REASON, compact_verdict
from slonk_infra.health.result import EXIT_CODES
from slonk_infra.ops.model import parse_verdict
from tests.health.test_cli import DATA, calls, fake_scontrol, health, variant


def test_a_failing_run_publishes_a_verdict_the_controller_reads(tmp_path: Path) -> None:
    rec = variant(tmp_path, "lost-lanes", {"pcie.currentWidth": 8})
    scontrol, log = fake_scontrol(tmp_path)
    code, report, _ = health(
        "--mode", "interval", "--gpus", "1", "--nvml-replay", str(rec), "--publish",
        "--scontrol", str(scontrol), "--node-name", "h100-3",
    )  # fmt: skip
    assert code == EXIT_CODES["replace-machine"]
    [update] = calls(log)
    assert update[:2] == ["update", "nodename=h100-3"] and update[2].startswith("comment=")
    comment = update[2].removeprefix("comment=")
    verdict = parse_verdict(comment, source="slurm")
    assert verdict.action == "replace-machine"
    assert verdict.fingerprint == report.fingerprint.value and verdict.fingerprint.startswith("sha256:")
    assert [c.check for c in verdict.checks] == ["gpu-pcie"]
    assert "\n" not in comment


def test_a_healthy_run_publishes_ok(tmp_path: Path) -> None:
    scontrol, log = fake_scontrol(tmp_path)
    code, _, _ = health(
        "--gpus", "1", "--nvml-replay", str(DATA / "h100-idle.json"), "--publish", "--scontrol", str(scontrol),
        "--node-name", "n0",
    )  # fmt: skip
    assert code == 0
    [update] = calls(log)
    data = json.loads(update[2].removeprefix("comment="))
    assert data["ok"] is True and data["action"] == "none" and data["results"] == []
    assert parse_verdict(update[2].removeprefix("comment="), source="slurm").action == "none"


def test_reasons_are_cut_to_keep_the_comment_short(tmp_path: Path) -> None:
    rec = variant(tmp_path, "lost-lanes", {"pcie.currentWidth": 8})
    _, report, _ = health("--gpus", "1", "--nvml-replay", str(rec))
    long = report.model_copy(update={"results": [r.model_copy(update={"reason": "x" * 1000}) for r in report.results]})
    data = json.loads(compact_verdict(long, now=1))
    assert data["time"] == 1 and all(len(r["reason"]) == MAX_REASON for r in data["results"])
