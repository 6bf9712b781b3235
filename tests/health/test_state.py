"""What one run leaves the next: a child still stuck in NVML, the GPUs' fingerprint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from slonk_infra.health.result import Fingerprint
from slonk_infra.health.state import STUCK_FILE, NodeState


def test_a_stuck_child_is_remembered_while_it_lives_and_forgotten_once_gone(tmp_path: Path) -> None:
    state = NodeState(tmp_path / "state")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state.record_stuck(child.pid, 1795000000.0, "GPU 1: NVML eccErrors did not answer within 15 s")
        stuck = state.stuck()
        assert stuck is not None and (stuck.pid, stuck.since) == (child.pid, 1795000000.0)
        assert stuck.what.startswith("GPU 1: NVML eccErrors")
    finally:
        child.kill()
        child.wait()
    assert state.stuck() is None
    assert not (tmp_path / "state" / STUCK_FILE).exists()


def test_a_reused_pid_is_not_the_stuck_child(tmp_path: Path) -> None:
    state = NodeState(tmp_path)
    (tmp_path / STUCK_FILE).write_text('{"pid": 1, "start": "no such start", "since": 0, "what": "x"}')
    assert state.stuck() is None  # pid 1 lives, but started at another time: another process


def test_only_a_gpu_fingerprint_is_kept(tmp_path: Path) -> None:
    state = NodeState(tmp_path)
    assert state.fingerprint() is None
    state.keep_fingerprint(Fingerprint(kind="machine-id", value="sha256:00"))
    assert state.fingerprint() is None
    gpus = Fingerprint(kind="gpu-uuids", value="sha256:ab")
    state.keep_fingerprint(gpus)
    assert state.fingerprint() == gpus


def test_no_directory_or_one_that_cannot_be_written_keeps_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    for state in (NodeState(None), NodeState(blocked / "state")):
        state.keep_fingerprint(Fingerprint(kind="gpu-uuids", value="sha256:ab"))
        state.record_stuck(1, 0.0, "x")
        assert state.fingerprint() is None and state.stuck() is None
