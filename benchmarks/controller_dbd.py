"""Benchmark of what a controller roll waits on when slurmctld has slurmdbd: slurmctld's stop (SIGTERM to
exit), its start (exec to its port accepting), one ``sacctmgr`` call, and the TCP pattern behind the start.

Usage (root, after tools/install-slurm.sh; the repository containing this file is imported)::

    python benchmarks/controller_dbd.py                  # 6 restarts, 5 calls of each sacctmgr listing
    python benchmarks/controller_dbd.py --trace          # one more start under strace (installed apart)

What runs: the host's Slurm (Debian bookworm: slurmctld and slurmdbd 22.05, MariaDB 10.11) as
testing/slurmlab/dbd.py ``accounting_lab`` starts it, everything on the loopback. Nothing is asserted.

- **stop**: SIGTERM to slurmctld's exit, by PID, ``--restarts`` times.
- **start**: the new ``slurmctld -D`` spawned to its port accepting a TCP connection (polled every 10 ms);
  then ``scontrol ping`` is awaited before the next stop, with a 3 s pause.
- **sacctmgr**: ``sacctmgr -n -P show qos|assoc|cluster``, ``--calls`` times each, wall time.
- **request-reply over the loopback**: the pattern Slurm's persistent connections to slurmdbd use before
  24.05 (a 4-byte length and the message in two ``send`` calls, each side waiting for the other's reply),
  30 round trips on one connection, without and with ``TCP_NODELAY``: Nagle's algorithm holds the second
  write until the first is acknowledged, and the receiver delays that acknowledgement (about 40 ms on
  Linux). Slurm sets ``TCP_NODELAY`` on its connections from 24.05.0 (SchedMD commits 1807bce846 and
  29802a9b7b).
- ``--trace``: one more start under ``strace -f -tt -T``; reported are the waits over 20 ms for input on
  slurmctld's connection to slurmdbd before it listens, their count and sum, against the whole start. Each
  request-reply held by Nagle shows as two: for the reply's length (the request's body waited for its
  length's acknowledgement) and for the reply's body (held the same way on slurmdbd's side).
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing.slurmlab import AccountingLab as Cluster
from testing.slurmlab import accounting_lab as real_cluster

LISTINGS = ("qos", "assoc", "cluster")
# A wait on the slurmdbd connection longer than this is counted as held (a local answer takes under 1 ms).
HELD_S = 0.02

_CONNECT = re.compile(r"^(\d+)\s+\S+\s+connect\((\d+), \{sa_family=AF_INET6?, sin6?_port=htons\((\d+)\)")
_CLOSE = re.compile(r"^\d+\s+\S+\s+close\((\d+)\)")
_POLL = re.compile(r"^(\d+)\s+\S+\s+poll\(\[\{fd=(\d+), events=POLLIN\}\]")
_RESUMED = re.compile(r"^(\d+)\s+\S+\s+<\.\.\. poll resumed>")
_TOOK = re.compile(r"<([0-9.]+)>$")
_LISTEN = re.compile(r"^\d+\s+\S+\s+listen\(\d+, (\d+)\)")


def held_waits(lines: Iterable[str], dbd_port: int) -> tuple[int, float]:
    """From ``strace -f -tt -T`` output of a slurmctld start: the waits for input on its connection to
    slurmdbd (the socket it connected to ``dbd_port``, in whichever thread: the slurmdbd agent shares it)
    longer than :data:`HELD_S`, up to its RPC port's ``listen``; returns their count and their sum in
    seconds. A wait strace split in two (``<unfinished ...>``, then ``<... poll resumed>``) is read from
    both lines; a ``close`` of that descriptor ends the connection (its number may be reused)."""
    conn: str | None = None
    pending: dict[str, str] = {}  # thread -> fd of its unfinished poll
    count, total = 0, 0.0
    for raw in lines:
        line = raw.rstrip("\n")
        if (m := _CONNECT.match(line)) and int(m.group(3)) == dbd_port:
            conn = m.group(2)
            continue
        if (m := _CLOSE.match(line)) and m.group(1) == conn:
            conn = None
            continue
        if (m := _LISTEN.match(line)) and int(m.group(1)) > 5:  # the RPC port (backlog 4096), not a unix socket
            break
        took = None
        if m := _POLL.match(line):
            if line.endswith("<unfinished ...>"):
                pending[m.group(1)] = m.group(2)
            elif conn is not None and m.group(2) == conn and (t := _TOOK.search(line)):
                took = float(t.group(1))
        elif (
            (m := _RESUMED.match(line))
            and conn is not None
            and pending.pop(m.group(1), None) == conn
            and (t := _TOOK.search(line))
        ):
            took = float(t.group(1))
        if took is not None and took > HELD_S:
            count, total = count + 1, total + took
    return count, total


def _wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing listens on port {port} after {timeout} s") from None
            time.sleep(0.01)


def _timed_start(c: Cluster, wrapper: list[str] | None = None) -> float:
    """Spawns slurmctld (under ``wrapper``, if any): seconds until its port accepts; then awaits its ping."""
    t0 = time.monotonic()
    c.lab.spawn_controller(wrapper=wrapper or ())
    _wait_port(c.lab.ctld_port)
    took = time.monotonic() - t0
    c.lab.wait_controller()
    return took


def restarts(c: Cluster, n: int) -> tuple[list[float], list[float]]:
    """``n`` stops and starts of the lab's slurmctld: (stop seconds, start-to-listening seconds)."""
    stops, starts = [], []
    for _ in range(n):
        t0 = time.monotonic()
        c.lab.stop_controller()
        stops.append(time.monotonic() - t0)
        starts.append(_timed_start(c))
        time.sleep(3)
    return stops, starts


def traced_start(c: Cluster, workdir: Path) -> tuple[float, int, float]:
    """One more stop and a start under ``strace -f -tt -T``: (start seconds, held waits, their sum)."""
    trace = workdir / "slurmctld.strace"
    c.lab.stop_controller()
    took = _timed_start(c, ["strace", "-f", "-tt", "-T", "-o", str(trace)])
    c.lab.stop_controller()  # strace has written the whole file once slurmctld has exited
    with trace.open(errors="replace") as lines:
        count, total = held_waits(lines, c.dbd.port)
    return took, count, total


def sacctmgr(c: Cluster, calls: int) -> dict[str, list[float]]:
    """Wall seconds of each ``sacctmgr -n -P show LISTING``, ``calls`` times."""
    out: dict[str, list[float]] = {}
    for what in LISTINGS:
        for _ in range(calls):
            t0 = time.perf_counter()
            c.lab.run(["sacctmgr", "-n", "-P", "show", what], check=True)
            out.setdefault(what, []).append(time.perf_counter() - t0)
    return out


def request_reply(nodelay: bool, rounds: int = 30) -> list[float]:
    """Seconds per round trip of a 4-byte length and a 14-byte message, sent in two writes each way."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        conn.settimeout(10)
        with conn:
            if nodelay:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while head := conn.recv(4, socket.MSG_WAITALL):
                conn.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)
                conn.send((14).to_bytes(4, "big"))
                conn.send(b"r" * 14)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    times = []
    with server, socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        if nodelay:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(rounds):
            t0 = time.perf_counter()
            client.send((14).to_bytes(4, "big"))
            client.send(b"q" * 14)
            client.recv(4, socket.MSG_WAITALL)
            client.recv(14, socket.MSG_WAITALL)
            times.append(time.perf_counter() - t0)
    thread.join(5)
    return times


def _row(name: str, values: list[float], scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"| {name} | {statistics.median(v):.2f} | {min(v):.2f}-{max(v):.2f} | {len(v)} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--restarts", type=int, default=6)
    ap.add_argument("--calls", type=int, default=5, help="calls of each sacctmgr listing")
    ap.add_argument("--trace", action="store_true", help="one more start under strace -f -tt -T (needs strace)")
    args = ap.parse_args()
    if args.restarts < 1 or args.calls < 1:
        ap.error("--restarts and --calls must be at least 1")
    if args.trace and shutil.which("strace") is None:
        ap.error("--trace needs strace (apt-get install strace)")
    version = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{version}; {platform.node()}, {platform.machine()}, Linux {platform.release()}", flush=True)
    rows = [
        "| figure | median | min-max | n |",
        "|---|---|---|---|",
    ]
    plain, nodelay = request_reply(False), request_reply(True)
    with tempfile.TemporaryDirectory(prefix="slonk-ctld-dbd-") as tmp, real_cluster() as c:
        stops, starts = restarts(c, args.restarts)
        rows.append(_row("slurmctld stop (SIGTERM to exit), s", stops))
        rows.append(_row("slurmctld start (exec to port accepting), s", starts))
        for what, times in sacctmgr(c, args.calls).items():
            rows.append(_row(f"`sacctmgr show {what}`, s", times))
        traced = traced_start(c, Path(tmp)) if args.trace else None
    rows.append(_row("request-reply, two writes each way, ms", plain, 1000))
    rows.append(_row("the same with `TCP_NODELAY`, ms", nodelay, 1000))
    print("\n".join(rows))
    if traced is not None:
        took, count, total = traced
        print(
            f"\nunder strace: started in {took:.2f} s; {count} waits over {HELD_S * 1000:.0f} ms for input from "
            f"slurmdbd before listening (two per request-reply Nagle holds), {total:.2f} s in all"
        )


if __name__ == "__main__":
    main()
