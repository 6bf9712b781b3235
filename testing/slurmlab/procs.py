"""Process helpers: free ports, PID-based shutdown and leftover detection.

Everything here acts on explicit PIDs.  Nothing matches processes by name,
because other Slurm instances may run on the same machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "alive",
    "children",
    "descendants",
    "free_ports",
    "leftover_pids",
    "stop_pids",
    "tail",
]


def free_ports(count: int) -> list[int]:
    """Returns ``count`` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state field follows the parenthesised command, which may hold spaces.
    return stat.rpartition(")")[2].split()[0] not in {"Z", "X"}


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out.extend(int(c) for c in (task / "children").read_text().split())
    except OSError:
        return []
    if out:
        return out
    # /proc/<pid>/task/<tid>/children needs CONFIG_PROC_CHILDREN; fall back to a scan.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid:
                    out.append(int(entry.name))
    return out


def descendants(pid: int) -> list[int]:
    """All descendants of ``pid``, parents before children."""
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in children(todo.pop()):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def stop_pids(pids: Iterable[int], timeout: float = 15.0, sig: int = signal.SIGTERM) -> list[int]:
    """Sends ``sig`` to each PID, waits up to ``timeout``, then SIGKILLs the survivors.

    Returns the PIDs that needed SIGKILL.
    """
    pids = [p for p in pids if alive(p)]
    for p in pids:
        _signal(p, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    killed = [p for p in pids if alive(p)]
    for p in killed:
        _signal(p, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(alive(p) for p in killed):
        time.sleep(0.05)
    return killed


def _inside(link: Path, roots: tuple[str, ...]) -> bool:
    try:
        target = os.readlink(link)
    except OSError:
        return False
    return any(target == r or target.startswith(r + "/") for r in roots)


def leftover_pids(dirs: Iterable[Path], env_tag: str) -> list[int]:
    """PIDs whose cwd or an open fd is inside ``dirs``, or whose environment holds ``env_tag``.

    This finds double-forked slurmstepd (re-parented to PID 1, environ wiped)
    and job processes.  The caller and its ancestors are never returned.
    """
    roots = tuple(str(Path(d).resolve()) for d in dirs)
    tag = env_tag.encode()
    me = os.getpid()
    exclude = {me}
    p = me
    while p > 1:
        try:
            p = int(Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
        exclude.add(p)
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        pid = int(entry.name)
        try:
            if tag in (entry / "environ").read_bytes().split(b"\0"):
                out.append(pid)
                continue
        except OSError:
            continue
        if _inside(entry / "cwd", roots):
            out.append(pid)
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        if any(_inside(fd, roots) for fd in fds):
            out.append(pid)
    return [p for p in out if alive(p)]


def tail(path: Path, lines: int = 60) -> str:
    """Last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-256 * 1024 :].decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])
