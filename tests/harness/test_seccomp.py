"""The tier's stand-in for containerd's RuntimeDefault filter (testing/e2e/seccomp.py): podman's profile with
unshare, mount and umount allowed only to a container holding CAP_SYS_ADMIN, everything else as podman has it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testing.e2e.seccomp import ADMIN_ONLY, containerd_like, write_containerd_like

PODMAN_LIKE: dict[str, Any] = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "syscalls": [
        {"names": ["read", "unshare", "write", "mount", "umount2"], "action": "SCMP_ACT_ALLOW", "args": []},
        {"names": ["setns"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]},
        {"names": ["unshare"], "action": "SCMP_ACT_ERRNO", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
    ],
}


def _allowed(profile: dict[str, Any], name: str, caps: set[str]) -> bool:
    """Whether a container with ``caps`` may call ``name`` (only unconditional and caps-included allows)."""
    for rule in profile["syscalls"]:
        if name not in rule["names"] or rule["action"] != "SCMP_ACT_ALLOW" or rule.get("args"):
            continue
        needed = set(rule.get("includes", {}).get("caps", []))
        if needed <= caps:
            return True
    return False


def test_unshare_and_mount_need_cap_sys_admin_as_on_containerd() -> None:
    profile = containerd_like(PODMAN_LIKE)
    for name in ("unshare", "mount", "umount2"):
        assert _allowed(PODMAN_LIKE, name, set()), name  # podman lets anyone
        assert not _allowed(profile, name, set()), name
        assert _allowed(profile, name, {"CAP_SYS_ADMIN"}), name
    # Everything else is left as podman has it.
    assert _allowed(profile, "read", set()) and _allowed(profile, "write", set())
    assert not _allowed(profile, "setns", set()) and _allowed(profile, "setns", {"CAP_SYS_ADMIN"})
    assert profile["syscalls"][1:4] == PODMAN_LIKE["syscalls"][1:4]
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert set(ADMIN_ONLY) >= {"unshare", "mount", "umount2"}


def test_written_once_as_json_podman_reads(tmp_path: Path) -> None:
    source = tmp_path / "podman.json"
    source.write_text(json.dumps(PODMAN_LIKE))
    dest = write_containerd_like(tmp_path / "out" / "profile.json", source)
    assert json.loads(dest.read_text()) == containerd_like(PODMAN_LIKE)
    source.unlink()  # the second container reads the file already written
    assert write_containerd_like(dest, source) == dest
