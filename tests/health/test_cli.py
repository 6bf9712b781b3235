"""The slonk-health program end to end: report on stdout, lines on stderr, exit codes, draining."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.health import DRAIN_REASON_PREFIX, cli
from slonk_infra.health.checks import CHECKS
from slonk_infra.health.cli import parse_job_gpus
from slonk_infra.health.drain import MAX_REASON, drain, drain_reason
from slonk_infra.health.result import EXIT_CODES, Action, CheckResult, HealthReport

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nvml"


def health(*args: str, env: dict[str, str] | None = None) -> tuple[int, HealthReport, str]:
    """Run the program (no GPU, no spec file: everything from flags and recordings)."""
    run_env = {k: v for k, v in os.environ.items() if k != "SLURMD_NODENAME"}
    run_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "slonk_infra.health", "--home", "/", "--scratch", "/", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=run_env,
        timeout=60,
        check=False,
    )
    report = HealthReport.model_validate_json(proc.stdout)
    assert report.exit_code == proc.returncode
    return proc.returncode, report, proc.stderr


def variant(tmp_path: Path, name: str, edit: dict[str, Any], base: str = "h100-idle") -> Path:
    rec = json.loads((DATA / f"{base}.json").read_text())
    for key, value in edit.items():
        scope = rec["system"] if key in ("events", "deviceCount") else rec["devices"]["0"]
        scope[key] = {"value": value}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(rec))
    return path


def fake_scontrol(tmp_path: Path, state: str = "IDLE", reason: str | None = None) -> tuple[Path, Path]:
    """An scontrol that answers `show node` with ``state``/``reason`` and logs every call."""
    log = tmp_path / "scontrol.log"
    show = f"NodeName=n0 Arch=x86_64\n   State={state} ThreadsPerCore=1\n"
    if reason:
        show += f"   Reason={reason} [root@2026-11-20T10:00:00]\n"
    script = tmp_path / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"if sys.argv[1] == 'show':\n    sys.stdout.write({show!r})\n"
    )
    script.chmod(0o755)
    return script, log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_healthy_recorded_h100_exits_0() -> None:
    code, report, err = health("--gpus", "1", "--nvml-replay", str(DATA / "h100-idle.json"))
    assert code == 0 and report.ok and report.action == "none" and err == ""
    assert {r.check for r in report.results} >= {"gpu-count", "gpu-ecc", "gpu-xid", "gpu-idle", "disk-home"}
    assert report.fingerprint.kind == "gpu-uuids"


@pytest.mark.parametrize(
    ("edit", "action"),
    [
        ({"computeProcesses": [[4242, 1 << 30]]}, "restart-pod"),
        ({"pcie.currentWidth": 4}, "replace-machine"),
        ({"remappedRows": [0, 8, 0, 1]}, "needs-person"),
    ],
)
def test_exit_code_is_the_worst_actions(tmp_path: Path, edit: dict[str, Any], action: Action) -> None:
    rec = variant(tmp_path, "bad", edit)
    code, report, err = health("--gpus", "1", "--nvml-replay", str(rec))
    assert code == EXIT_CODES[action] and report.action == action and not report.ok
    failing = [r for r in report.results if not r.ok]
    assert len(failing) == 1
    assert err.strip() == f"slonk-health boot: {failing[0].check}: {action}: {failing[0].reason}"


def test_exit_codes_are_distinct_and_nonzero_for_failures() -> None:
    assert EXIT_CODES["none"] == 0
    assert len(set(EXIT_CODES.values())) == 4 and 1 not in EXIT_CODES.values() and 2 not in EXIT_CODES.values()


@pytest.mark.parametrize(("code", "action"), [(12, "needs-person"), (9, "replace-machine")])
def test_nvml_not_loadable(tmp_path: Path, code: int, action: Action) -> None:
    rec = json.loads((DATA / "h100-idle.json").read_text())
    rec["init"] = {"error": code, "message": "from the test"}
    path = tmp_path / "no-nvml.json"
    path.write_text(json.dumps(rec))
    exit_code, report, err = health("--gpus", "8", "--nvml-replay", str(path))
    assert exit_code == EXIT_CODES[action]
    assert [r.check for r in report.results if r.check.startswith("gpu-")] == ["gpu-count"]
    assert "NVML unavailable" in report.results[0].reason and "gpu-count" in err
    assert report.fingerprint.kind in ("machine-id", "unknown")


def test_fewer_gpus_than_declared() -> None:
    code, report, _ = health("--gpus", "8", "--check", "gpu-count", "--nvml-replay", str(DATA / "h100-idle.json"))
    assert code == EXIT_CODES["replace-machine"] and report.results[0].reason == "1 of 8 GPUs visible"


def test_recording_on_the_fly(tmp_path: Path) -> None:
    out = tmp_path / "again.json"
    code, _, _ = health("--gpus", "1", "--nvml-replay", str(DATA / "h100-idle.json"), "--nvml-record", str(out))
    assert code == 0
    assert json.loads(out.read_text()) == json.loads((DATA / "h100-idle.json").read_text())


def test_bad_spec_exits_2_and_judges_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "health.json"
    spec.write_text('{"gpu": {"count": "eight"}}')
    scontrol, log = fake_scontrol(tmp_path)
    code, report, err = health("--spec", str(spec), "--drain", "--scontrol", str(scontrol))
    assert code == 2 and report.results == [] and report.drain is None
    assert "gpu.count: 'eight'" in (report.error or "") and "gpu.count" in err
    assert calls(log) == []  # a broken configuration must never drain nodes


def test_unknown_check_name_is_a_usage_error() -> None:
    code, report, _ = health("--check", "gpu-magic")
    assert code == 2 and "unknown check(s) gpu-magic" in (report.error or "")


def test_drain_on_failure_with_the_prefixed_reason(tmp_path: Path) -> None:
    rec = variant(tmp_path, "lost-lanes", {"pcie.currentWidth": 8})
    scontrol, log = fake_scontrol(tmp_path)
    code, report, _ = health(
        "--mode", "interval", "--gpus", "1", "--nvml-replay", str(rec), "--drain", "--scontrol", str(scontrol),
        env={"SLURMD_NODENAME": "h100-3"},
    )  # fmt: skip
    assert code == EXIT_CODES["replace-machine"]
    reason = "slonk-health: gpu-pcie: GPU 0: PCIe link x8, below its maximum x16"
    assert report.drain is not None and report.drain.done and report.drain.reason == reason
    assert calls(log) == [
        ["show", "node", "h100-3"],
        ["update", "nodename=h100-3", "state=drain", f"reason={reason}"],
    ]


def test_healthy_run_never_calls_scontrol(tmp_path: Path) -> None:
    scontrol, log = fake_scontrol(tmp_path)
    code, report, _ = health(
        "--gpus", "1", "--nvml-replay", str(DATA / "h100-idle.json"), "--drain", "--scontrol", str(scontrol)
    )
    assert code == 0 and report.drain is not None and not report.drain.done
    assert calls(log) == []


def test_someone_elses_drain_is_kept(tmp_path: Path) -> None:
    rec = variant(tmp_path, "bad", {"remappedRows": [0, 1, 1, 0]})
    scontrol, log = fake_scontrol(tmp_path, state="IDLE+DRAIN", reason="disk swap, ticket 42")
    code, report, err = health(
        "--gpus", "1", "--nvml-replay", str(rec), "--drain", "--scontrol", str(scontrol), "--node-name", "n0"
    )
    assert code == EXIT_CODES["replace-machine"]
    assert report.drain is not None and not report.drain.done
    assert report.drain.note == "already drained by someone else: disk swap, ticket 42"
    assert [c[0] for c in calls(log)] == ["show"] and "not drained" in err


def test_our_own_earlier_drain_is_refreshed(tmp_path: Path) -> None:
    rec = variant(tmp_path, "bad", {"remappedRows": [0, 1, 1, 0]})
    scontrol, log = fake_scontrol(tmp_path, state="DRAINED", reason=f"{DRAIN_REASON_PREFIX} gpu-xid: GPU 0: XID 79")
    _, report, _ = health(
        "--gpus", "1", "--nvml-replay", str(rec), "--drain", "--scontrol", str(scontrol), "--node-name", "n0"
    )
    assert report.drain is not None and report.drain.done
    assert [c[0] for c in calls(log)] == ["show", "update"]


def test_scontrol_failure_is_reported_not_raised(tmp_path: Path) -> None:
    rec = variant(tmp_path, "bad", {"remappedRows": [0, 1, 1, 0]})
    _, report, _ = health(
        "--gpus", "1", "--nvml-replay", str(rec), "--drain", "--scontrol", str(tmp_path / "no-scontrol")
    )
    assert report.drain is not None and not report.drain.done and report.drain.note


def test_drain_reason_format_and_length() -> None:
    assert drain_reason("gpu-ecc", "two\nlines") == "slonk-health: gpu-ecc: two lines"
    long = drain_reason("gpu-xid", "x" * 500)
    assert len(long) == MAX_REASON and long.startswith(DRAIN_REASON_PREFIX) and long.endswith("...")


def test_drain_reads_a_multi_word_reason_with_its_stamp() -> None:
    shown = "NodeName=n0\n   State=MIXED+DRAIN ThreadsPerCore=1\n   Reason=bad fan [slurm@2026-11-20T10:00:00]\n"
    seen: list[list[str]] = []

    def run(argv: Any) -> subprocess.CompletedProcess[str]:
        seen.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, stdout=shown, stderr="")

    outcome = drain("n0", "slonk-health: gpu-ecc: x", run=run)
    assert not outcome.done and outcome.note == "already drained by someone else: bad fan" and len(seen) == 1


def test_report_file_is_written(tmp_path: Path) -> None:
    out = tmp_path / "last.json"
    code, report, _ = health("--report-file", str(out))
    assert code == 0 and HealthReport.model_validate_json(out.read_text()) == report


def test_two_writers_of_one_report_both_succeed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two jobs allocated on one node together run two prologs that write one report file at once.

    The second writer runs whole between the first's write and its rename, the interleaving that
    drained a node with "Prolog error" when both shared one temporary name.
    """
    out = tmp_path / "slonk-health-prolog.json"
    real_replace = os.replace
    calls: list[str] = []

    def replace(src: Any, dst: Any) -> None:
        calls.append(str(src))
        if len(calls) == 1:
            cli._write(out, "second\n")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    cli._write(out, "first\n")
    assert len(calls) == 2 and out.read_text() == "first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name], "no temporary file is left behind"
    assert out.stat().st_mode & 0o777 == 0o644


def test_an_unwritable_report_path_does_not_change_the_verdict(tmp_path: Path) -> None:
    """A user job may make a directory where the prolog writes its report (the shared /tmp): the check's
    verdict, not the side file, decides the exit code, so the node is not drained for it."""
    out = tmp_path / "slonk-health-prolog.json"
    out.mkdir()
    code, report, err = health("--report-file", str(out))
    assert code == 0 and report.exit_code == 0
    assert f"could not write the report to {out}" in err
    assert [p.name for p in tmp_path.iterdir()] == [out.name], "no temporary file is left behind"


def test_default_node_name_comes_from_slurmd(tmp_path: Path) -> None:
    _, report, _ = health(env={"SLURMD_NODENAME": "gpu-a-7"})
    assert report.node == "gpu-a-7"


def test_modes_report_what_they_skip() -> None:
    _, report, _ = health("--mode", "prolog", "--gpus", "1", "--nvml-replay", str(DATA / "h100-idle.json"))
    skipped = {s.check: s.reason for s in report.skipped}
    assert "gpu-xid" in skipped and "gpu-xid" not in {r.check for r in report.results}


def test_job_gpus_as_slurm_gives_them() -> None:
    assert parse_job_gpus("0,1,2,3") == (0, 1, 2, 3)
    assert parse_job_gpus("5") == (5,)
    assert parse_job_gpus(None) is None and parse_job_gpus("") is None
    assert parse_job_gpus("gpu:0") is None  # not Slurm's form: unknown, never "no GPUs"


def test_a_step_past_the_deadline_is_judged_drained_and_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A /home probe stuck past its own timeout stands in for any step that is not NVML's; it runs in the
    # child, which the run kills and leaves.
    def stuck(ctx: object) -> CheckResult:
        time.sleep(60)
        raise AssertionError("the child was not stopped")

    monkeypatch.setitem(CHECKS, "disk-home", stuck)
    scontrol, log = fake_scontrol(tmp_path)
    began = time.monotonic()
    code = cli.run(
        mode="interval", spec_path=None, overrides={"disk": {"homePath": "/", "scratchPath": "/"}},
        only=(), skip=(), want_drain=True, want_publish=True, node="cpu-1", scontrol=str(scontrol),
        instance_id="i-0abc", report_file=None, nvml_replay=None, nvml_record=None, deadline_s=3,
    )  # fmt: skip
    assert time.monotonic() - began < 30
    assert code == EXIT_CODES["needs-person"]
    report = HealthReport.model_validate_json(capsys.readouterr().out)
    assert [(r.check, r.ok) for r in report.results] == [("disk-scratch", True), ("disk-home", False)]
    reason = "slonk-health: disk-home: did not finish within the run's 3 s deadline"
    assert report.drain is not None and report.drain.done and report.drain.reason == reason
    assert report.fingerprint.kind == "instance-id"
    show, update, comment = calls(log)
    assert (show, update) == (
        ["show", "node", "cpu-1"],
        ["update", "nodename=cpu-1", "state=drain", f"reason={reason}"],
    )
    verdict = json.loads(comment[2].removeprefix("comment="))
    assert verdict["action"] == "needs-person" and verdict["results"][0]["check"] == "disk-home"


def test_a_recording_that_cannot_be_read_is_a_usage_error_not_the_node_s(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, report, _ = health("--gpus", "1", "--nvml-replay", str(broken), "--drain", "--scontrol", "/bin/false")
    assert (code, report.results, report.drain) == (2, [], None)
    assert report.error is not None and report.error.startswith("bad configuration, no check ran:")
