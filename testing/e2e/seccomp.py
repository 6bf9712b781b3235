"""The seccomp filter a cloud node's container runtime applies for ``seccompProfile: RuntimeDefault``.

GKE and EKS nodes run containerd, whose default profile lets a container call ``unshare``, ``mount`` and
a few more only when it holds CAP_SYS_ADMIN (containerd contrib/seccomp/seccomp_default.go, the
``case "CAP_SYS_ADMIN"`` list). podman's default profile (containers-common's seccomp.json) allows them
to everyone, so a container that drops every capability and unshares would start here and exit on a
cloud node: slurmrestd up to 26.05 unshares its System V semaphores and file table at start and exits
when it cannot ("Unable to unshare System V namespace"). The tier gives such containers podman's
profile with containerd's rule for those calls.

Privileged containers run without any filter on Kubernetes ("Privileged containers always run as
Unconfined", the seccomp tutorial), so they keep podman's own handling.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PODMAN_DEFAULT = Path("/usr/share/containers/seccomp.json")
"""podman's default profile (Debian's containers-common / golang-github-containers-common)."""

ADMIN_ONLY = ("mount", "name_to_handle_at", "umount", "umount2", "unshare")
"""Calls containerd's default profile allows only with CAP_SYS_ADMIN that podman's allows to everyone
(containerd's list also has bpf, clone with namespace flags, fanotify_init, lookup_dcookie, perf_event_open,
setdomainname, sethostname and setns, which podman gates the same way or which no pod here calls)."""


def containerd_like(profile: dict[str, Any]) -> dict[str, Any]:
    """``profile`` (podman's) with the :data:`ADMIN_ONLY` calls allowed only with CAP_SYS_ADMIN."""
    syscalls: list[dict[str, Any]] = []
    for rule in profile["syscalls"]:
        unconditional = rule.get("action") == "SCMP_ACT_ALLOW" and not rule.get("includes") and not rule.get("args")
        if unconditional:
            names = [n for n in rule["names"] if n not in ADMIN_ONLY]
            rule = {**rule, "names": names}
            if not names:
                continue
        syscalls.append(rule)
    syscalls.append({"names": list(ADMIN_ONLY), "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}})
    return {**profile, "syscalls": syscalls}


def write_containerd_like(dest: Path, source: Path = PODMAN_DEFAULT) -> Path:
    """Write :func:`containerd_like` of ``source`` to ``dest`` (once: every container reads the same file)."""
    if not dest.exists():
        if not source.exists():
            raise FileNotFoundError(
                f"{source}: podman's default seccomp profile is missing (install containers-common)"
            )
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(containerd_like(json.loads(source.read_text()))))
    return dest
