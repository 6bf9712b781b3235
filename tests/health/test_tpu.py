"""TPU chip count from the device nodes a TPU VM exposes (accel* or VFIO groups)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slonk_infra.health.config import HealthSpec
from slonk_infra.health.context import CheckContext
from slonk_infra.health.runner import plan, run_check


def context(dev: Path, chips: int) -> CheckContext:
    spec = HealthSpec.model_validate({"tpu": {"chipsPerHost": chips, "deviceDir": str(dev)}})
    return CheckContext(spec=spec, mode="boot")


def make(dev: Path, *names: str) -> Path:
    for name in names:
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        (dev / name).touch()
    return dev


def test_accel_devices_match(tmp_path: Path) -> None:
    make(tmp_path, "accel0", "accel1", "accel2", "accel3", "accelerometer", "null")
    result = run_check("tpu-count", context(tmp_path, 4))
    assert result.ok and result.figures["devices"] == ["accel0", "accel1", "accel2", "accel3"]


def test_vfio_groups_count_but_not_the_control_node(tmp_path: Path) -> None:
    make(tmp_path, "vfio/vfio", "vfio/0", "vfio/1", "vfio/2", "vfio/3")
    result = run_check("tpu-count", context(tmp_path, 4))
    assert result.ok and result.figures["found"] == 4


@pytest.mark.parametrize(("present", "action"), [(3, "replace-machine"), (0, "replace-machine"), (8, "needs-person")])
def test_wrong_chip_count(tmp_path: Path, present: int, action: str) -> None:
    make(tmp_path, *[f"accel{i}" for i in range(present)])
    result = run_check("tpu-count", context(tmp_path, 4))
    assert (result.ok, result.action) == (False, action)
    assert f"{present}" in result.reason


def test_no_tpu_check_without_declared_chips(tmp_path: Path) -> None:
    names, skipped = plan(context(tmp_path, 0))
    assert "tpu-count" not in names and any(s.check == "tpu-count" for s in skipped)
