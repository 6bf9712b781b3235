"""podman, run with a private configuration, and a ledger of everything this run created.

The configuration is the one that works on these machines (runc, netavark without its DNS server: the
cluster DNS is testing/e2e/dns.py's; lowered ulimits, no systemd). Every pod, container and network
this run makes carries the run's unique prefix and is recorded, so cleanup removes exactly those, by
name, and nothing else on the machine.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import secrets
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=10000:10000", "nproc=4096:4096"]
log_driver = "k8s-file"
[network]
network_backend = "netavark"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


class PodmanError(RuntimeError):
    """A podman command failed; the message carries the command and its stderr."""


def interrupt_on_sigterm() -> None:
    """Turn SIGTERM (a timeout, CI stopping the run) into KeyboardInterrupt, so a run's ``finally`` still
    removes the pods and networks it made."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)


@dataclass
class Podman:
    """podman with this run's private containers.conf; records what it creates."""

    workdir: Path
    prefix: str = field(default_factory=lambda: f"slonk-e2e-{secrets.token_hex(3)}")
    pods: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "containers.conf"
        conf.write_text(CONTAINERS_CONF, encoding="utf-8")
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}

    def run(
        self, *args: str, check: bool = True, timeout: float = 300, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``podman ARGS``; raises :class:`PodmanError` on a non-zero exit when ``check``."""
        cmd = ["podman", *args]
        try:
            proc = subprocess.run(
                cmd, env=self.env, capture_output=True, text=True, timeout=timeout, input=input_text, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise PodmanError(f"timed out after {timeout:.0f}s: {' '.join(cmd)[:300]}") from exc
        if check and proc.returncode != 0:
            raise PodmanError(f"rc {proc.returncode}: {' '.join(cmd)[:300]}\n{proc.stderr.strip()[-2000:]}")
        return proc

    def json(self, *args: str) -> Any:
        """Parsed JSON output of ``podman ARGS``."""
        return json.loads(self.run(*args).stdout or "null")

    # -------------------------------------------------------------------------------- network
    def create_network(self) -> tuple[str, ipaddress.IPv4Network]:
        """An internal bridge network (nothing routed off this machine) on a /20 no one else uses, without
        podman's DNS server: the cluster's DNS is testing/e2e/dns.py's. A /20 because the harness never
        reuses an address within a run (testing/e2e/cluster.py): a /24 ran out after about 150 controller
        rolls in one benchmark run."""
        name = f"{self.prefix}-net"
        subnet = self._free_subnet()
        self.run("network", "create", "--internal", "--disable-dns", "--subnet", str(subnet), name)
        self.networks.append(name)
        return name, subnet

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used: list[ipaddress.IPv4Network] = []
        routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
        for line in routes.splitlines():
            word = line.split()[0] if line.split() else ""
            if "/" in word:
                used.append(ipaddress.IPv4Network(word, strict=False))
        for net in self.json("network", "ls", "--format", "json") or []:
            for sub in net.get("subnets") or []:
                used.append(ipaddress.IPv4Network(sub["subnet"], strict=False))
        rng = random.Random()
        for _ in range(500):
            cand = ipaddress.IPv4Network(f"10.{rng.randint(128, 250)}.{rng.randrange(0, 256, 16)}.0/20")
            if not any(cand.overlaps(u) for u in used):
                return cand
        raise PodmanError("no free /20 under 10.128.0.0/9 for the test network")

    # -------------------------------------------------------------------------------- cleanup
    def remove_pod(self, name: str, timeout: int = 10) -> None:
        """Remove one pod this run created (its containers go with it)."""
        self.run("pod", "rm", "--force", "--time", str(timeout), name, check=False, timeout=timeout + 60)
        if name in self.pods:
            self.pods.remove(name)

    def cleanup(self) -> list[str]:
        """Remove every pod and network this run created; returns what could not be removed."""
        left: list[str] = []
        # Twice: a container restarting under --restart always (one crash-looping) can refuse the first rm.
        for attempt in range(2):
            for name in list(self.containers):
                if self.run("rm", "--force", "--time", "0", name, check=False).returncode == 0:
                    self.containers.remove(name)
            if not self.containers:
                break
            if attempt == 0:
                time.sleep(1)
        for name in list(self.pods):
            self.remove_pod(name, timeout=2)
        for name in list(self.networks):
            if self.run("network", "rm", "--force", name, check=False).returncode == 0:
                self.networks.remove(name)
        for name in self.containers + self.pods + self.networks:
            left.append(name)
        return left


def wait_for(what: str, check: Any, timeout: float, interval: float = 0.5, seen: Any = None) -> Any:
    """Call ``check()`` until it returns something truthy; raise TimeoutError naming ``what`` (and, with
    ``seen``, what ``seen()`` says was last observed: where things are, not only where they are not)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            tail = f"; last seen {seen()}" if seen is not None else ""
            raise TimeoutError(f"{what}: not reached within {timeout:.0f}s{tail}")
        time.sleep(interval)


def shell_join(argv: Sequence[str]) -> str:
    """A command line for messages."""
    return " ".join(argv)
