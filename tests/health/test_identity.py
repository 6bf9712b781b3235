"""Hardware fingerprint: GPU UUIDs first, then the instance id, then the machine id."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from slonk_infra.health.identity import fingerprint, gpu_fingerprint
from slonk_infra.health.nvml import Nvml, ReplayBackend

DATA = Path(__file__).resolve().parents[1] / "data" / "nvml"


def test_gpu_fingerprint_is_independent_of_enumeration_order() -> None:
    a = gpu_fingerprint(["GPU-b", "GPU-a", "GPU-c"])
    assert a == gpu_fingerprint(["GPU-c", "GPU-b", "GPU-a"])
    assert a == "sha256:" + hashlib.sha256(b"GPU-a\nGPU-b\nGPU-c").hexdigest()
    assert a != gpu_fingerprint(["GPU-a", "GPU-b"])


@pytest.mark.parametrize("name", ["h100-idle", "h100b-idle"])
def test_the_recorded_h100s_have_the_fingerprints_their_live_runs_reported(name: str) -> None:
    nvml = Nvml(ReplayBackend(json.loads((DATA / f"{name}.json").read_text())))
    live = json.loads((DATA / f"{name}.report.json").read_text())
    fp = fingerprint(nvml, machine_id_file=Path("/nonexistent"))
    assert fp.kind == "gpu-uuids"
    assert fp.model_dump() == live["fingerprint"]
    assert fp.value == gpu_fingerprint([nvml.uuid(0)])


def test_two_boards_two_fingerprints() -> None:
    values = {
        json.loads((DATA / f"{n}.report.json").read_text())["fingerprint"]["value"] for n in ("h100-idle", "h100b-idle")
    }
    assert len(values) == 2


def test_fallbacks(tmp_path: Path) -> None:
    instance = tmp_path / "instance-id"
    instance.write_text("i-0123456789abcdef0\n")
    machine = tmp_path / "machine-id"
    machine.write_text("0123456789abcdef0123456789abcdef\n")
    assert fingerprint(None, instance_id="1234567", machine_id_file=machine).kind == "instance-id"
    by_file = fingerprint(None, instance_id_file=instance, machine_id_file=machine)
    assert by_file.kind == "instance-id"
    assert by_file.value == "sha256:" + hashlib.sha256(b"i-0123456789abcdef0").hexdigest()
    assert fingerprint(None, instance_id_file=tmp_path / "absent", machine_id_file=machine).kind == "machine-id"
    assert fingerprint(None, machine_id_file=tmp_path / "absent").kind == "unknown"
