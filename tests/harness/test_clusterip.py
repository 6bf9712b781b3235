"""The container tier's Service addresses (testing/e2e/clusterip.py) behave as kube-proxy's: one address that
leads to the Service's current pod, refused at once while it has none. Checked with real iptables rules in
a private network namespace this test makes (root, iptables, unshare and ip; tools/test.sh installs them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from testing.e2e.clusterip import CHAIN, ClusterIPs

VIP, POD_A, POD_B = "10.213.0.5", "10.213.0.6", "10.213.0.7"
PORT = 6817

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("iptables-restore", "nsenter", "unshare", "ip")),
    reason="needs root, iptables, nsenter, unshare and ip (tools/test.sh installs them)",
)

# Runs inside the namespace: two "pods" and the Service address itself, each answering with its own address.
SERVERS = textwrap.dedent(f"""
    import socket, sys, threading
    def serve(addr):
        s = socket.socket(); s.bind((addr, {PORT})); s.listen()
        while True:
            c, _ = s.accept(); c.sendall(addr.encode()); c.close()
    for a in ("{POD_A}", "{POD_B}", "{VIP}"):
        threading.Thread(target=serve, args=(a,), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
""")


class _NoPodman:
    """ClusterIPs only calls podman in ``attach``; the tests use ``join``."""


@pytest.fixture
def namespace() -> Iterator[int]:
    """A process in a fresh network namespace serving on POD_A, POD_B and VIP; its pid."""
    # The addresses on loopback make the whole /24 local: a connection the rules do not translate reaches
    # the server on VIP itself, which answers with its own address (so "refused" is the rules' doing).
    setup = (
        f"ip link set lo up && ip addr add {POD_A}/24 dev lo && ip addr add {POD_B}/24 dev lo"
        f" && exec {sys.executable} -c '{SERVERS}'"
    )
    proc = subprocess.Popen(
        ["unshare", "-n", "sh", "-c", setup], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _connect(pid: int) -> tuple[str, float]:
    """Connect to VIP:PORT from inside the namespace: what answered (or the error) and the seconds it took."""
    code = (
        "import socket, time\n"
        "t = time.monotonic()\n"
        "try:\n"
        f"    s = socket.create_connection(('{VIP}', {PORT}), timeout=5); print(s.recv(64).decode(), end=' ')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, end=' ')\n"
        "print(time.monotonic() - t)\n"
    )
    out = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    what, seconds = out.stdout.split()
    return what, float(seconds)


def test_rules_translate_each_service_to_its_pod_or_refuse_it() -> None:
    ips = iter(["10.0.0.50", "10.0.0.51"])
    cluster_ips = ClusterIPs(_NoPodman(), lambda: next(ips))  # type: ignore[arg-type]
    assert cluster_ips.vip("slurmctld-0") == ("10.0.0.50", True)
    assert cluster_ips.vip("slurmctld-0") == ("10.0.0.50", False)
    cluster_ips.vip("slurmctld-1")
    cluster_ips.point("slurmctld-0", "10.0.0.9")
    nat, refuse = cluster_ips.rules().split("*filter")
    assert f"-A {CHAIN} -d 10.0.0.50/32 -p tcp -j DNAT --to-destination 10.0.0.9" in nat
    assert "10.0.0.51" not in nat
    assert f"-A {CHAIN} -d 10.0.0.51/32 -p tcp -j REJECT --reject-with icmp-port-unreachable" in refuse
    assert "10.0.0.50" not in refuse


@needs_root
def test_one_address_follows_the_pod_and_is_refused_at_once_between(namespace: int) -> None:
    assert _connect(namespace)[0] == VIP  # no rules yet: nothing is translated
    cluster_ips = ClusterIPs(_NoPodman(), lambda: VIP)  # type: ignore[arg-type]
    cluster_ips.vip("slurmctld-0")
    cluster_ips.point("slurmctld-0", POD_A)
    cluster_ips.join("pod", namespace)
    assert _connect(namespace)[0] == POD_A

    cluster_ips.point("slurmctld-0", None)  # the pod deleted: kube-proxy rejects
    what, seconds = _connect(namespace)
    assert what == "ConnectionRefusedError"
    assert seconds < 1.0

    cluster_ips.point("slurmctld-0", POD_B)  # made again on a new address: the same Service address leads there
    assert _connect(namespace)[0] == POD_B
    rules = subprocess.run(
        ["nsenter", "-t", str(namespace), "-n", "iptables-save"], capture_output=True, text=True, check=True
    ).stdout
    assert rules.count(f"-A OUTPUT -j {CHAIN}") == 2  # one jump per table, not one per update


def test_a_namespace_that_is_gone_is_dropped() -> None:
    cluster_ips = ClusterIPs(_NoPodman(), lambda: VIP)  # type: ignore[arg-type]
    cluster_ips.vip("slurmctld-0")
    cluster_ips._netns["gone"] = _dead_pid()
    cluster_ips.point("slurmctld-0", POD_A)
    assert "gone" not in cluster_ips._netns


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    time.sleep(0.05)
    return proc.pid
