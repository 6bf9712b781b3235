"""Scratch space and the shared home filesystem, probed in a child process with a deadline.

A hung NFS server makes ``statvfs`` block in the kernel, uninterruptibly; a thread stuck there would
also keep this program from exiting. A child process can be abandoned: after ``timeoutSeconds`` the
check kills it, reports the filesystem as hung and moves on.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from typing import Any

from slonk_infra.health.context import CheckContext
from slonk_infra.health.result import CheckResult, failed, passed

GIB = 1024**3

# statvfs goes to the server on NFS (unlike a cached stat of the mount point), so an answer proves
# the filesystem is served.
_PROBE = """
import json, os, sys
path = sys.argv[1]
try:
    st = os.statvfs(path)
    out = {"total": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize, "mount": os.path.ismount(path)}
except OSError as exc:
    out = {"error": f"{exc.strerror} (errno {exc.errno})"}
print(json.dumps(out))
"""
PROBE_COMMAND: list[str] = [sys.executable, "-I", "-c", _PROBE]


class Hung(Exception):
    """The filesystem did not answer in time."""


def probe(path: str, timeout: float) -> dict[str, Any]:
    """``{"total", "free", "mount"}`` in bytes, or ``{"error"}``; raises :class:`Hung` after ``timeout``."""
    child = subprocess.Popen([*PROBE_COMMAND, path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        # A child stuck in the kernel ignores the kill until the filesystem answers: abandon it.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=1)
        raise Hung(f"{path} did not answer in {timeout:g} s") from None
    try:
        result: dict[str, Any] = json.loads(out)
    except json.JSONDecodeError:
        return {"error": f"probe exited {child.returncode} without an answer"}
    return result


def disk_scratch(ctx: CheckContext) -> CheckResult:
    """Scratch has at least ``minFreeGiB`` and ``minFreePercent`` free."""
    spec = ctx.spec.disk
    assert spec.scratch_path is not None
    figures: dict[str, Any] = {"path": spec.scratch_path}
    try:
        answer = probe(spec.scratch_path, spec.timeout_seconds)
    except Hung as exc:
        return failed("disk-scratch", "needs-person", str(exc), figures)
    if "error" in answer:
        return failed("disk-scratch", "restart-pod", f"{spec.scratch_path}: {answer['error']}", figures)
    free_gib = answer["free"] / GIB
    percent = 100.0 * answer["free"] / answer["total"] if answer["total"] else 0.0
    figures.update(freeGiB=round(free_gib, 2), totalGiB=round(answer["total"] / GIB, 2), freePercent=round(percent, 2))
    if free_gib < spec.min_free_gib or percent < spec.min_free_percent:
        reason = (
            f"{spec.scratch_path}: {free_gib:.1f} GiB ({percent:.1f}%) free, "
            f"below {spec.min_free_gib:g} GiB or {spec.min_free_percent:g}%"
        )
        return failed("disk-scratch", spec.low_space_action, reason, figures)
    return passed("disk-scratch", f"{spec.scratch_path}: {free_gib:.1f} GiB ({percent:.1f}%) free", figures)


def disk_home(ctx: CheckContext) -> CheckResult:
    """The shared home filesystem is mounted and answers within ``timeoutSeconds``."""
    spec = ctx.spec.disk
    assert spec.home_path is not None
    figures: dict[str, Any] = {"path": spec.home_path, "timeoutSeconds": spec.timeout_seconds}
    try:
        answer = probe(spec.home_path, spec.timeout_seconds)
    except Hung as exc:
        # The server, not this node, is at fault: recycling nodes would not help.
        return failed("disk-home", "needs-person", str(exc), figures)
    if "error" in answer:
        # A stale handle or a missing mount: a fresh pod mounts the volume again.
        return failed("disk-home", "restart-pod", f"{spec.home_path}: {answer['error']}", figures)
    figures["mount"] = answer["mount"]
    if spec.home_must_be_mount and not answer["mount"]:
        return failed("disk-home", "restart-pod", f"{spec.home_path} is not a mounted filesystem", figures)
    return passed("disk-home", f"{spec.home_path} answers", figures)
