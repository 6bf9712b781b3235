"""The cluster's DNS for the container tier: what CoreDNS would hold, served by testing/e2e/dnsserver.py.

podman's own DNS server (aardvark-dns) answers a network's container names, but on this kind of
machine it stops answering for seconds at a time while containers come and go, never answers a
reverse lookup of an address it does not know, and knows no cluster domain (docs/containers.md). Slurm
resolves its peer on every RPC and munge's authentication asks for the client's name by address, so
those stalls became Slurm's. A cluster's CoreDNS answers all of these at once, from the API server's
view of pods and Services; :class:`ClusterDNS` keeps that view for the harness's pods and a container
on the pod network serves it (the network itself is made without podman's DNS).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import dnslib  # type: ignore[import-untyped]

from testing.e2e.kube import CLUSTER_DOMAIN
from testing.e2e.podman import Podman, PodmanError

SERVER = Path(__file__).with_name("dnsserver.py")


@dataclass(frozen=True)
class Entry:
    """One pod's or Service's records: its names and the name its address answers to (None: none)."""

    names: tuple[str, ...]
    address: str
    reverse: str | None


class ClusterDNS:
    """Records by owner (a pod or a Service stand-in), written for the server after every change."""

    def __init__(self, podman: Podman, network: str, address: str, image: str, workdir: Path) -> None:
        self.podman = podman
        self.network = network
        self.address = address
        self.image = image
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "records.json"
        self.container = f"{network}-dns"
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._write()

    def start(self, timeout: float = 60) -> None:
        """Run the server on ``address`` and wait until it serves."""
        package = Path(dnslib.__file__).parent
        self.podman.run(
            "run", "-d", "--name", self.container, "--network", self.network, "--ip", self.address,
            "--volume", f"{self.dir}:/records", "--volume", f"{SERVER}:/dns/dnsserver.py:ro",
            "--volume", f"{package}:/dns/dnslib:ro", "--env", "PYTHONPATH=/dns", "--env", "PYTHONDONTWRITEBYTECODE=1",
            "--entrypoint", "python3", self.image, "/dns/dnsserver.py", "/records/records.json",
        )  # fmt: skip
        self.podman.containers.append(self.container)
        deadline = time.monotonic() + timeout
        while not (self.dir / "serving").exists():
            if time.monotonic() > deadline:
                logs = self.podman.run("logs", self.container, check=False)
                raise PodmanError(f"cluster DNS not serving within {timeout:.0f}s: {logs.stdout}{logs.stderr}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Remove the server's container."""
        if self.container in self.podman.containers:
            self.podman.run("rm", "--force", "--time", "0", self.container, check=False)
            self.podman.containers.remove(self.container)

    def set(self, owner: str, names: list[str], address: str, reverse: str | None) -> None:
        """``owner``'s records are now ``names`` -> ``address`` (and ``address`` -> ``reverse``)."""
        with self._lock:
            self._entries[owner] = Entry(tuple(n.rstrip(".").lower() for n in names), address, reverse)
            self._write()

    def forget(self, owner: str) -> None:
        """``owner``'s records are gone (its pod deleted, its stand-in removed)."""
        with self._lock:
            if self._entries.pop(owner, None) is not None:
                self._write()

    def _write(self) -> None:
        names: dict[str, list[str]] = {}
        reverse: dict[str, str] = {}
        for entry in self._entries.values():
            for name in entry.names:
                names.setdefault(name, []).append(entry.address)
            if entry.reverse:
                reverse.setdefault(entry.address, entry.reverse.rstrip("."))
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"names": names, "reverse": reverse}, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)  # the server reads a whole file or the previous one, never half of one


def fqdns(names: list[str]) -> list[str]:
    """The cluster-domain names among a pod's or Service's names (the short forms come from the search list)."""
    return [n for n in names if n.rstrip(".").endswith(f".svc.{CLUSTER_DOMAIN}")]
