"""The reconciler process without daemons: sacctmgr and squeue replaced by recorded answers (data/), so what
a run logs, runs and returns is checked on every machine."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from slonk_infra.accounting.__main__ import main
from slonk_infra.accounting.runner import (
    EXIT_BAD_DESIRED,
    EXIT_COMMAND_FAILED,
    EXIT_NO_SLURMDBD,
    EXIT_OK,
    Result,
    one_pass,
    run_command,
    wait_for_slurmdbd,
)
from slonk_infra.accounting.sacctmgr import RUNNING_JOBS, show_commands
from slonk_infra.accounting.wire import dump_state
from tests.accounting.test_reconcile import CLUSTER, DATA, desired

LISTINGS = {argv: (DATA / f"{name}.txt").read_text() for name, argv in show_commands(CLUSTER).items()}


class Fake:
    """Answers the listings from data/, squeue from ``squeue``, and records every other command."""

    def __init__(self, *, squeue: Result | None = None, fail: str = "", down: bool = False) -> None:
        self.ran: list[tuple[str, ...]] = []
        self.squeue = squeue or Result(RUNNING_JOBS, 0, (DATA / "squeue.txt").read_text())
        self.fail = fail
        self.down = down

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        argv = tuple(argv)
        assert timeout > 0
        if argv in LISTINGS:
            if self.down:
                return Result(argv, 1, "sacctmgr: error: Sending PersistInit msg: Connection refused")
            return Result(argv, 0, LISTINGS[argv])
        if argv == RUNNING_JOBS:
            return self.squeue
        self.ran.append(argv)
        if self.fail and self.fail in " ".join(argv):
            return Result(argv, 1, " Parent account 'nosuch' doesn't exist")
        return Result(argv, 0, " Adding ...")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "desired.json"
    p.write_text(dump_state(desired()))
    return p


def test_a_pass_runs_the_plan_in_order_and_reports_drift(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "slonk_infra.accounting")
    fake = Fake()
    outcome = one_pass(path, fake, prune=False)
    assert outcome.status == "applied" and outcome.exit_code == EXIT_OK
    assert outcome.plan is not None
    assert fake.ran == [c.argv for c in outcome.plan.commands] and fake.ran
    assert "plan for cluster slonk-gcp:" in caplog.text
    assert "drift: account old-lab is in slurmdbd, not in the declaration (kept; --prune deletes it)" in caplog.text
    assert not any(a[2] == "delete" for a in fake.ran)


def test_a_failing_command_does_not_stop_the_run(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = Fake(fail="add account vision")
    outcome = one_pass(path, fake, prune=False)
    assert outcome.status == "failed" and outcome.exit_code == EXIT_COMMAND_FAILED
    assert outcome.plan is not None and len(fake.ran) == len(outcome.plan.commands)
    assert "FAILED (exit 1): sacctmgr -i add account vision" in caplog.text
    assert "planned again next run" in caplog.text


def test_prune_deletes_nothing_when_squeue_fails(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with_jobs = Fake()
    one_pass(path, with_jobs, prune=True)
    assert any(a[2] == "delete" for a in with_jobs.ran)
    blind = Fake(squeue=Result(RUNNING_JOBS, 1, "slurm_load_jobs error: Unable to contact slurm controller"))
    outcome = one_pass(path, blind, prune=True)
    assert outcome.status == "applied"
    assert not any(a[2] == "delete" for a in blind.ran)
    assert "squeue failed, so this pass deletes nothing" in caplog.text


def test_an_unreadable_file_applies_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = Fake()
    assert one_pass(tmp_path / "missing.json", fake, prune=False).exit_code == EXIT_BAD_DESIRED
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 9}')
    assert one_pass(bad, fake, prune=False).exit_code == EXIT_BAD_DESIRED
    assert fake.ran == []
    assert "bad.json: version: 9 is not allowed" in caplog.text


def test_slurmdbd_down_is_waited_for(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = Fake(down=True)
    assert one_pass(path, fake, prune=False).exit_code == EXIT_NO_SLURMDBD
    assert fake.ran == []
    slept: list[float] = []
    assert not wait_for_slurmdbd(path, fake, wait=0.01, timeout=5, sleep=slept.append)
    assert "waiting for slurmdbd: sacctmgr -P -n show cluster format=Cluster exited 1" in caplog.text
    assert "slurmdbd did not answer within" in caplog.text
    assert wait_for_slurmdbd(path, Fake(), wait=0.01, timeout=5, sleep=slept.append)


def test_run_command_times_out_and_reports_missing_programs() -> None:
    assert run_command(["sleep", "5"], 0.2).returncode == 124
    missing = run_command(["/nonexistent/sacctmgr"], 1)
    assert missing.returncode == 127 and "cannot run" in missing.output
    echo = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], 5)
    assert (echo.returncode, echo.output) == (3, "out\nerr")


def test_command_line_refusals(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--desired", str(path), "--interval", "0"])
    assert e.value.code == 2
    assert "'0' is not allowed; expected seconds > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--desired", str(path), "--once", "--interval", "5"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_once_exits_with_the_status_of_its_run(tmp_path: Path) -> None:
    assert main(["--desired", str(tmp_path / "missing.json"), "--once"]) == EXIT_BAD_DESIRED
