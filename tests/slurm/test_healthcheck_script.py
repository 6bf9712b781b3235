"""healthcheck.sh as slurmd runs it: no pod environment, settings from the files beside it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from slonk_infra.slurm.scripts import render_scripts
from tests.kube_support import plan_for


def _install(tmp_path: Path, stack: str) -> tuple[Path, Path]:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name, text in render_scripts(plan_for(stack)).items():
        (scripts / name).write_text(text, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    fake = bin_dir / "slonk-health"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {log}\nexit "${{FAKE_EXIT:-0}}"\n', encoding="utf-8")
    fake.chmod(0o755)
    return scripts, log


def _run(scripts: Path, *args: str, node: str, path: str, exit_code: int = 0) -> subprocess.CompletedProcess[str]:
    # slurmd's environment for the programs it runs: SLURMD_NODENAME and little else.
    env = {"PATH": path, "SLURMD_NODENAME": node, "FAKE_EXIT": str(exit_code)}
    return subprocess.run(
        ["sh", str(scripts / "healthcheck.sh"), *args], env=env, capture_output=True, text=True, check=False
    )


def test_interval_run_drains_and_publishes_with_the_groups_counts(tmp_path: Path) -> None:
    scripts, log = _install(tmp_path, "gcp")
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    assert _run(scripts, node="h100-a-3", path=path).returncode == 0
    argv = log.read_text().split("\n")
    assert argv[:2] == ["--mode", "interval"]
    assert argv[argv.index("--gpus") + 1] == "8" and argv[argv.index("--tpu-chips") + 1] == "0"
    assert argv[argv.index("--spec") + 1] == str(scripts / "health.json")
    assert "--drain" in argv and "--publish" in argv and argv[argv.index("--node-name") + 1] == "h100-a-3"


def test_tpu_hosts_expect_their_chips_and_boot_does_not_drain(tmp_path: Path) -> None:
    scripts, log = _install(tmp_path, "gcp")
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    assert _run(scripts, "boot", node="v5p-0-2", path=path).returncode == 0
    argv = log.read_text().split("\n")
    assert argv[argv.index("--tpu-chips") + 1] == "4" and argv[argv.index("--gpus") + 1] == "0"
    assert "--no-drain" in argv and "--drain" not in argv


def test_a_failing_check_fails_the_script_and_other_pods_skip_it(tmp_path: Path) -> None:
    scripts, log = _install(tmp_path, "gcp")
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    assert _run(scripts, "prolog", node="h100-b-0", path=path, exit_code=4).returncode == 4
    log.unlink()
    assert _run(scripts, node="slurmctld-0", path=path).returncode == 0
    assert not log.exists()


def test_a_worker_without_slonk_health_is_not_healthy(tmp_path: Path) -> None:
    scripts, _ = _install(tmp_path, "gcp")
    result = _run(scripts, node="cpu-0", path="/usr/bin:/bin")
    assert result.returncode == 1 and "slonk-health is not installed" in result.stderr
