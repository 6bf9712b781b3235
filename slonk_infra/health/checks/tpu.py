"""TPU chips: the slice host sees as many TPU device nodes as the slice shape gives it.

TPU VMs expose one ``/dev/accel<N>`` per chip (v4, v5e); newer generations (v5p, v6e) expose chips
through VFIO as ``/dev/vfio/<N>`` beside the ``/dev/vfio/vfio`` control node, which is not a chip.
"""

from __future__ import annotations

import re
from pathlib import Path

from slonk_infra.health.context import CheckContext
from slonk_infra.health.result import CheckResult, failed, passed

_ACCEL = re.compile(r"^accel\d+$")
_VFIO_GROUP = re.compile(r"^\d+$")


def tpu_devices(dev: Path) -> list[str]:
    """The TPU chip device nodes under ``dev`` (accel* if any, else numbered VFIO groups)."""
    accel = sorted(p.name for p in dev.glob("accel*") if _ACCEL.match(p.name))
    if accel:
        return accel
    vfio = dev / "vfio"
    if vfio.is_dir():
        return sorted(f"vfio/{p.name}" for p in vfio.iterdir() if _VFIO_GROUP.match(p.name))
    return []


def tpu_count(ctx: CheckContext) -> CheckResult:
    """Chips visible match ``chipsPerHost``."""
    spec = ctx.spec.tpu
    found = tpu_devices(Path(spec.device_dir))
    figures = {"expected": spec.chips_per_host, "found": len(found), "devices": found, "deviceDir": spec.device_dir}
    if len(found) < spec.chips_per_host:
        return failed(
            "tpu-count", "replace-machine", f"{len(found)} of {spec.chips_per_host} TPU chips visible", figures
        )
    if len(found) > spec.chips_per_host:
        reason = f"{len(found)} TPU chips visible, {spec.chips_per_host} expected by the slice shape"
        return failed("tpu-count", "needs-person", reason, figures)
    return passed("tpu-count", f"{len(found)} TPU chips visible as expected", figures)
