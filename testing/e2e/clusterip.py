"""Virtual IPs for the ClusterIP Services that select one pod by name, translated as kube-proxy does.

On a cluster a ClusterIP Service's address never changes while its pods come and go: kube-proxy (iptables
mode) rewrites each new connection to the virtual IP to a ready endpoint's address (DNAT in the node's nat
table, the translation kept for the connection's life by conntrack), and rejects it at once where the Service
has no endpoint (``REJECT --reject-with icmp-port-unreachable``: the client's connect fails with ECONNREFUSED).
Slurm depends on that. A client resolves ``SlurmctldHost`` once per call and retries that address for
``MessageTimeout``; slurmd's registration does the same. Across a controller roll the retries then reach the
new pod as soon as it listens. If the name led to the pod's own address instead, the retries would keep
going to the old pod for 30 s.

Here each pod's network namespace gets the same rules in its ``OUTPUT`` chains (its traffic to other pods
crosses a bridge, not this machine's own nat table), in a chain of its own (``SLONK-SVC``), rewritten
whenever a Service's endpoint changes. Headless Services and Services selecting several pods are not
modelled here (the cluster's DNS answers their names with the pods' own addresses).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable

from testing.e2e.podman import Podman

CHAIN = "SLONK-SVC"


class ClusterIPs:
    """The virtual IPs of one cluster's per-pod Services, their endpoints, and the pods that translate them."""

    def __init__(self, podman: Podman, allocate_ip: Callable[[], str]) -> None:
        self.podman = podman
        self._allocate = allocate_ip
        self._lock = threading.Lock()
        self.vips: dict[str, str] = {}
        """Service name -> its virtual IP (allocated once, never changed)."""
        self.endpoints: dict[str, str | None] = {}
        """Service name -> the address of the pod it selects, or None while it has none."""
        self._netns: dict[str, int] = {}  # podman pod name -> a process in its network namespace

    def vip(self, service: str) -> tuple[str, bool]:
        """The virtual IP of ``service``, and whether it was allocated just now (with no endpoint yet)."""
        with self._lock:
            if service in self.vips:
                return self.vips[service], False
            self.vips[service] = self._allocate()
            self.endpoints[service] = None
            self._load_all()
            return self.vips[service], True

    def point(self, service: str, address: str | None) -> None:
        """``service``'s endpoint is now ``address`` (None: no pod ready behind it; connections are refused)."""
        with self._lock:
            self.endpoints[service] = address
            self._load_all()

    def attach(self, podman_pod: str) -> None:
        """Start ``podman_pod``'s infra container and install the rules in its network namespace, before any
        of its containers runs (a process started in a pod must find the Services' addresses working)."""
        self.podman.run("pod", "start", podman_pod)
        infra = self.podman.run("pod", "inspect", "--format", "{{.InfraContainerID}}", podman_pod).stdout.strip()
        self.join(podman_pod, int(self.podman.run("inspect", "--format", "{{.State.Pid}}", infra).stdout.strip()))

    def join(self, owner: str, pid: int) -> None:
        """Install the rules in the network namespace of process ``pid`` and keep them up to date there."""
        with self._lock:
            self._load(pid, jumps=True)
            self._netns[owner] = pid

    def detach(self, podman_pod: str) -> None:
        """``podman_pod`` is going: its namespace is no longer kept up to date."""
        with self._lock:
            self._netns.pop(podman_pod, None)

    def rules(self) -> str:
        """The ``SLONK-SVC`` chains as ``iptables-restore`` input (the chains declared are flushed first)."""
        nat = [f":{CHAIN} - [0:0]"]
        refuse = [f":{CHAIN} - [0:0]"]
        for service, vip in sorted(self.vips.items()):
            address = self.endpoints.get(service)
            if address:
                nat.append(f"-A {CHAIN} -d {vip}/32 -p tcp -j DNAT --to-destination {address}")
            else:
                refuse.append(f"-A {CHAIN} -d {vip}/32 -p tcp -j REJECT --reject-with icmp-port-unreachable")
        return "\n".join(["*nat", *nat, "COMMIT", "*filter", *refuse, "COMMIT", ""])

    def _load_all(self) -> None:
        for podman_pod, pid in list(self._netns.items()):
            if not self._load(pid):
                self._netns.pop(podman_pod, None)  # its namespace is gone (the pod was removed)

    def _load(self, pid: int, jumps: bool = False) -> bool:
        text = self.rules()
        if jumps:  # once per namespace: OUTPUT passes every connection through the chain
            text = text.replace("COMMIT", f"-A OUTPUT -j {CHAIN}\nCOMMIT")
        proc = subprocess.run(
            ["nsenter", "-t", str(pid), "-n", "iptables-restore", "--noflush"],
            input=text,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if proc.returncode != 0 and jumps:
            raise RuntimeError(f"iptables-restore in pod namespace (pid {pid}) failed: {proc.stderr.strip()}")
        return proc.returncode == 0


__all__ = ["CHAIN", "ClusterIPs"]
