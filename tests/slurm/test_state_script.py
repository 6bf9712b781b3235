"""state.sh run for real (sh, tar, coreutils): archives, pruning, a requested restore, and a backup
controller that waits for it. The tier runs it in the pods (testing/e2e scenario 18)."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from slonk_infra import vocab
from slonk_infra.slurm.scripts import SETTINGS, fill, source


@pytest.fixture
def state_sh(tmp_path: Path) -> Path:
    script = tmp_path / "state.sh"
    script.write_text(fill("state.sh", source("state.sh"), SETTINGS))
    script.chmod(0o755)
    return script


def run(script: Path, *args: str, host: str = "slurmctld-0", timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run state.sh as a pod named ``host`` would (``hostname`` answers the pod name)."""
    shim = script.parent / f"bin-{host}"
    shim.mkdir(exist_ok=True)
    (shim / "hostname").write_text(f"#!/bin/sh\necho {host}\n")
    (shim / "hostname").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    return subprocess.run(
        ["sh", str(script), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def make_state(path: Path, job: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "job_state").write_text(job)
    (path / "job_state.new").write_text("half-written")
    (path / "hash.3").mkdir(exist_ok=True)
    (path / "hash.3" / "script").write_text("#!/bin/sh\n")


def test_backup_archives_whole_files_and_keeps_the_newest(state_sh: Path, tmp_path: Path) -> None:
    state, dest = tmp_path / "state", tmp_path / "backups"
    make_state(state, "jobs-v1")
    dest.mkdir()
    for old in ("state-20250101T000000Z.tar.gz", "state-20250102T000000Z.tar.gz", "state-20250103T000000Z.tar.gz"):
        (dest / old).write_text("old")
    proc = run(state_sh, "backup", str(state), str(dest), "2")
    assert proc.returncode == 0, proc.stderr
    archives = sorted(p.name for p in dest.iterdir())
    assert len(archives) == 2 and archives[0] == "state-20250103T000000Z.tar.gz", archives
    with tarfile.open(dest / archives[1]) as tar:
        names = set(tar.getnames())
    assert {"./job_state", "./hash.3/script"} <= names and "./job_state.new" not in names
    assert "bytes in" in proc.stdout


def test_backup_refuses_a_missing_destination(state_sh: Path, tmp_path: Path) -> None:
    make_state(tmp_path / "state", "x")
    proc = run(state_sh, "backup", str(tmp_path / "state"), str(tmp_path / "nowhere"), "3")
    assert proc.returncode != 0 and "missing or not writable" in proc.stderr


def test_a_requested_restore_replaces_the_state_and_keeps_what_it_replaced(state_sh: Path, tmp_path: Path) -> None:
    state, dest = tmp_path / "state", tmp_path / "backups"
    dest.mkdir()
    make_state(state, "known-before-backup")
    assert run(state_sh, "backup", str(state), str(dest), "5").returncode == 0
    (state / "job_state").write_text("after-backup")
    # Nothing requested: nothing happens.
    assert run(state_sh, "restore-requested", str(dest), str(state)).returncode == 0
    assert (state / "job_state").read_text() == "after-backup"
    assert run(state_sh, "request-restore", str(dest), "no-such.tar.gz").returncode != 0
    req = run(state_sh, "request-restore", str(dest), "latest")
    assert req.returncode == 0, req.stderr
    assert (dest / "restore").read_text().startswith("state-")
    if os.geteuid() == 0:
        assert (dest / "restore").stat().st_uid == vocab.SLURM_UID
    proc = run(state_sh, "restore-requested", str(dest), str(state))
    assert proc.returncode == 0, proc.stderr
    assert (state / "job_state").read_text() == "known-before-backup"
    assert not (dest / "restore").exists()
    [replaced] = [p for p in dest.iterdir() if p.name.startswith("replaced-")]
    assert (replaced / "job_state").read_text() == "after-backup"
    assert [p.name for p in dest.iterdir() if p.name.startswith("restored-")]


def test_a_backup_controller_waits_for_the_primary_to_restore(state_sh: Path, tmp_path: Path) -> None:
    state, dest = tmp_path / "state", tmp_path / "backups"
    dest.mkdir()
    make_state(state, "v1")
    (dest / "restore").write_text("state-x.tar.gz\n")
    shim = tmp_path / "bin-slurmctld-standby-0"
    shim.mkdir()
    (shim / "hostname").write_text("#!/bin/sh\necho slurmctld-standby-0\n")
    (shim / "hostname").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    waiting = subprocess.Popen(["sh", str(state_sh), "restore-requested", str(dest), str(state)], env=env)
    try:
        time.sleep(1.5)
        assert waiting.poll() is None  # still waiting, state untouched
        assert (state / "job_state").read_text() == "v1"
        (dest / "restore").unlink()
        assert waiting.wait(timeout=10) == 0
    finally:
        waiting.kill()


@pytest.mark.skipif(os.geteuid() != 0, reason="prepare hands directories to the slurm uid: needs root")
def test_prepare_makes_directories_slurms_own(state_sh: Path, tmp_path: Path) -> None:
    dirs = [tmp_path / "fs" / ".slurm" / "c" / "state", tmp_path / "fs" / ".slurm" / "c" / "backups"]
    proc = run(state_sh, "prepare", *map(str, dirs))
    assert proc.returncode == 0, proc.stderr
    for d in dirs:
        st = d.stat()
        assert (st.st_uid, st.st_mode & 0o777) == (vocab.SLURM_UID, 0o700)


def test_a_restore_recovers_a_file_caught_between_slurmctlds_renames(state_sh: Path, tmp_path: Path) -> None:
    state, dest = tmp_path / "state", tmp_path / "backups"
    dest.mkdir()
    state.mkdir()
    (state / "job_state.old").write_text("jobs")  # archived after X -> X.old, before X.new -> X
    (state / "node_state").write_text("nodes")
    assert run(state_sh, "backup", str(state), str(dest), "5").returncode == 0
    for f in list(state.iterdir()):
        f.unlink()
    assert run(state_sh, "request-restore", str(dest), "latest").returncode == 0
    assert run(state_sh, "restore-requested", str(dest), str(state)).returncode == 0
    assert (state / "job_state").read_text() == "jobs"


def test_an_empty_state_with_archives_waits_for_a_restore_or_start_empty(state_sh: Path, tmp_path: Path) -> None:
    state, dest = tmp_path / "state", tmp_path / "backups"
    dest.mkdir()
    state.mkdir()
    # A new cluster: no state, no archive: starts at once.
    assert run(state_sh, "await-state", str(dest), str(state), timeout=10).returncode == 0
    (state / "job_state").write_text("known")
    assert run(state_sh, "backup", str(state), str(dest), "5").returncode == 0
    assert run(state_sh, "await-state", str(dest), str(state), timeout=10).returncode == 0  # state present
    (state / "job_state").unlink()
    shim = tmp_path / "bin-slurmctld-0"
    shim.mkdir(exist_ok=True)
    (shim / "hostname").write_text("#!/bin/sh\necho slurmctld-0\n")
    (shim / "hostname").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    # A lost volume: it waits (running, saying why) until a restore is requested, then restores.
    waiting = subprocess.Popen(
        ["sh", str(state_sh), "await-state", str(dest), str(state)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        time.sleep(2.5)
        assert waiting.poll() is None
        assert run(state_sh, "request-restore", str(dest), "latest").returncode == 0
        assert waiting.wait(timeout=15) == 0
        assert waiting.stderr is not None and "request-restore" in waiting.stderr.read()
    finally:
        waiting.kill()
    assert (state / "job_state").read_text() == "known"
    # Starting afresh on purpose.
    for f in list(state.iterdir()):
        f.unlink()
    (dest / "start-empty").touch()
    assert run(state_sh, "await-state", str(dest), str(state), timeout=10).returncode == 0
