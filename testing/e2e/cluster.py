"""A rendered stack running as podman pods, with the little of a StatefulSet controller the scenarios need.

``up`` creates every replica (controller first, then login and workers in parallel, as a cluster
would bring them up together); ``apply`` takes a new render and does what ``kubectl apply`` plus the
StatefulSet controller would: ConfigMap and Secret volumes of running pods get the new contents,
replicas are added or removed (highest ordinal first, with its preStop hook), and a pod whose template
changed is replaced only under the RollingUpdate strategy (workers are OnDelete). Deployments the
harness runs (slurmrestd) get pods named as a ReplicaSet names them, replaced new-first on a template change.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import itertools
import json
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import testing.nvml as nvml
from slonk_infra import vocab
from slonk_infra.plan import naming
from testing.e2e.clusterip import ClusterIPs
from testing.e2e.dns import ClusterDNS, fqdns
from testing.e2e.kube import Obj, claim_key, dns_names, fill_volume
from testing.e2e.nodes import GpuNode
from testing.e2e.podman import Podman, PodmanError, wait_for
from testing.e2e.pods import (
    POD_INDEX_LABEL,
    POD_NAME_LABEL,
    DeleteResult,
    PodInstance,
    PodOptions,
    PodRunner,
    per_pod_service,
)
from testing.e2e.stack import LOGIN_HOST_ALIAS, ClusterSecrets, Rendered


@dataclass
class ApplyResult:
    """What an apply changed."""

    replaced: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    refreshed_volumes: int = 0
    stop_seconds: dict[str, float] = field(default_factory=dict)
    """Pod -> seconds from its deletion until it was gone (preStop, then SIGTERM until it exited)."""
    slow_stops: dict[str, str] = field(default_factory=dict)
    """Container -> its last log lines, where one took long to exit (DeleteResult.slow_stops)."""
    timeline: list[tuple[float, str]] = field(default_factory=list)
    """(seconds since the apply began, what happened): each replaced pod's deletion, its replacement's
    creation and its readiness, in order; where a roll's time went."""


class Cluster:
    """The pods of one rendered stack on a private podman network."""

    def __init__(self, podman: Podman, rendered: Rendered, image: str, secrets: ClusterSecrets) -> None:
        self.podman = podman
        self.secrets = secrets
        self.rendered = rendered
        self.image = image
        self.rundir = Path(tempfile.mkdtemp(prefix=f"{rendered.name}-", dir=podman.workdir))
        self.network, subnet = podman.create_network()
        self.subnet: ipaddress.IPv4Network = subnet
        hosts = subnet.hosts()
        next(hosts)  # the bridge's own address
        self.dns = ClusterDNS(podman, self.network, str(next(hosts)), image, self.rundir / "dns")
        self.dns.start()
        self.gateway = self.dns.address  # every pod's and the laptop's nameserver
        # Addresses are never reused within a run, so a replaced pod always comes back on a new IP.
        self._ips = (str(ip) for ip in itertools.islice(hosts, 8, None))
        self._ips_lock = threading.Lock()  # pods are created from several threads; a generator is not shared safely
        self.runner = PodRunner(
            podman,
            rendered.objects,
            self.network,
            self.gateway,
            self._next_ip,
            lambda _: image,
            self.rundir,
            plan=rendered.plan,
            nvml_library=self._nvml_library,
        )
        self.runner.dns = self.dns
        self.cluster_ips = ClusterIPs(podman, self._next_ip)
        self.runner.network_ready = self.cluster_ips.attach
        for svc in rendered.objects.of_kind("Service"):  # their names resolve before any pod asks
            if per_pod_service(svc):
                self._service_ip(svc)
        self._nvml: Path | None = None
        self._nvml_lock = threading.Lock()
        self.pods: dict[str, PodInstance] = {}
        self._laptop: str | None = None
        self.options: dict[str, PodOptions] = {}
        self._held_names: dict[str, str] = {}  # Service name -> container holding it (a pod-less Service)

    def _next_ip(self) -> str:
        try:
            with self._ips_lock:
                return next(self._ips)
        except StopIteration:  # a bare StopIteration would say nothing of what ran out
            raise RuntimeError(
                f"the test network {self.subnet} has no address left: this run made more pods and Service "
                "addresses than it holds (none is reused within a run)"
            ) from None

    def _nvml_library(self) -> Path:
        """The NVML stand-in (testing.nvml), built once per cluster, for the GPU containers' mounts."""
        with self._nvml_lock:
            if self._nvml is None:
                self._nvml = nvml.build(self.rundir / "nvml")
            return self._nvml

    def gpu_node(self, pod: str) -> GpuNode:
        """The GPU stand-in of a worker pod's slurmd container, to plant a fault in (then ``.write()``)."""
        return self.pods[pod].gpu_nodes["slurmd"]

    # --------------------------------------------------------------------------------- objects
    def statefulset(self, name: str) -> Obj:
        """A rendered StatefulSet by name."""
        return self.rendered.objects.get("StatefulSet", name)

    def controller(self) -> PodInstance:
        """The slurmctld pod."""
        return self.pods[f"{naming.CONTROLLER}-0"]

    def login(self) -> PodInstance:
        """The first login pod."""
        return self.pods["login-0"]

    def rest_api(self) -> PodInstance | None:
        """The slurmrestd pod, when the declaration runs slurmrestd."""
        pods = self.deployment_pods(vocab.RESTAPI)
        return pods[0] if pods else None

    def workers(self) -> list[str]:
        """Names of the running worker pods (= Slurm node names)."""
        return sorted(n for n, p in self.pods.items() if p.labels.get(vocab.COMPONENT) == vocab.WORKER_COMPONENT)

    # --------------------------------------------------------------------------------- lifecycle
    def up(self) -> float:
        """Create every replica; returns seconds until all pods' containers were started."""
        t0 = time.monotonic()
        stss = self.rendered.statefulsets()
        controllers = (naming.CONTROLLER, naming.CONTROLLER_STANDBY)
        first = [s for s in stss if s["metadata"]["name"] in controllers]
        rest = [s for s in stss if s["metadata"]["name"] not in controllers]
        for sts in first:  # every controller (a primary and its backup), before anything that asks them
            for ordinal in range(sts["spec"].get("replicas", 1)):
                self._create(sts, ordinal)
        jobs: list[Callable[[], PodInstance]] = [
            functools.partial(self._create, s, i) for s in rest for i in range(s["spec"].get("replicas", 1))
        ]
        jobs += [
            functools.partial(self._create_from_deployment, d)
            for d in self.rendered.deployments()
            for _ in range(d["spec"].get("replicas", 1))
        ]
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda job: job(), jobs))
        return time.monotonic() - t0

    def _create(self, sts: Obj, ordinal: int) -> PodInstance:
        name = f"{sts['metadata']['name']}-{ordinal}"
        labels = {**sts["spec"]["template"]["metadata"].get("labels", {}), POD_NAME_LABEL: name,
                  POD_INDEX_LABEL: str(ordinal)}  # fmt: skip
        pod = self.runner.create(sts, ordinal, self.options.get(name))
        self.pods[name] = pod
        self._release_service_names(labels)  # after: the Service's name never leaves DNS
        for svc in self._per_pod_services(labels):
            self._point(svc, pod.ip)
        return pod

    def _create_from_deployment(self, dep: Obj) -> PodInstance:
        # NAME-<template hash>-<5 random>, as a ReplicaSet names its pods: a new name on every recreation.
        digest = hashlib.sha256(_template(dep).encode()).hexdigest()[:10]
        name = f"{dep['metadata']['name']}-{digest}-{secrets.token_hex(3)[:5]}"
        pod = self.runner.create(dep, 0, self.options.get(name), name=name)
        self.pods[name] = pod
        self._release_service_names(pod.labels)  # a Service held while its only pod was gone (Recreate)
        return pod

    def deployment_pods(self, name: str) -> list[PodInstance]:
        """The running pods of Deployment ``name``."""
        return [p for p in self.pods.values() if p.owner == ("Deployment", name)]

    def delete_pod(self, name: str, recreate: bool = True) -> tuple[DeleteResult, PodInstance | None]:
        """``kubectl delete pod NAME``: the pod goes (preStop first); its StatefulSet (or Deployment) makes it
        again (a Deployment's under a new name)."""
        pod = self.pods.pop(name)
        self._hold_service_names(pod)
        self.cluster_ips.detach(pod.podman_name)
        result = self.runner.delete(pod)
        if not recreate:
            return result, None
        kind, owner = pod.owner
        if kind == "Deployment":
            return result, self._create_from_deployment(self.rendered.objects.get(kind, owner))
        return result, self._create(self.statefulset(owner), int(name.rsplit("-", 1)[1]))

    def lose(self, name: str) -> PodInstance:
        """The pod vanishes without its preStop hook (its node lost, an OOM kill) and nothing makes it again
        until :meth:`recreate`; returns the pod that was lost."""
        pod = self.pods.pop(name)
        self._hold_service_names(pod)  # first: the Service's name never leaves DNS
        self.cluster_ips.detach(pod.podman_name)
        self.podman.remove_pod(pod.podman_name, timeout=0)
        self.dns.forget(pod.name)
        return pod

    # ------------------------------------------------------------------ Services with no pod behind them
    def _hold_service_names(self, pod: PodInstance) -> None:
        """kube-proxy's part for the ClusterIP Services that selected a pod now gone, and no other pod: the
        Service's name still resolves (its virtual IP is the Service's, not a pod's) and a connection to it
        is refused at once. Stood in for by a container holding the Service's DNS names with nothing
        listening; it goes when a pod the Service selects is created again. (Headless Services' names
        are the pods' own records and go with the pod, as here.)"""
        namespace = self.rendered.plan.namespace
        for svc in self.rendered.objects.services_selecting(pod.labels):
            sname = svc["metadata"]["name"]
            if per_pod_service(svc):  # its virtual IP stays; kube-proxy now refuses connections to it
                self.cluster_ips.point(sname, None)
                continue
            selector = svc["spec"].get("selector") or {}
            others = [p for p in self.pods.values() if all(p.labels.get(k) == v for k, v in selector.items())]
            if svc["spec"].get("clusterIP") == "None" or others or sname in self._held_names:
                continue
            cname = f"{self.podman.prefix}-{self.rendered.name}-svc-{sname}-{len(self.podman.containers)}"
            aliases = dns_names(sname, namespace, None, [svc])
            ghost_ip = self._next_ip()
            self.podman.run(
                "run", "-d", "--name", cname, "--network", self.network, "--ip", ghost_ip,
                "--entrypoint", "sleep", self.image, "infinity",
            )  # fmt: skip
            self.podman.containers.append(cname)
            self._held_names[sname] = cname
            self.dns.set(f"Service/{sname}", fqdns(aliases), ghost_ip, aliases[-1])

    def _per_pod_services(self, labels: dict[str, str]) -> list[Obj]:
        """ClusterIP Services selecting one pod by name (the controllers' own Services)."""
        return [svc for svc in self.rendered.objects.services_selecting(labels) if per_pod_service(svc)]

    def _point(self, svc: Obj, address: str) -> None:
        """A per-pod Service's virtual IP now leads to ``address`` (its pod's). Its names resolve to the virtual
        IP from the cluster's start (a Service added by an apply: from its first pod), and do not change while
        the pod comes and goes (testing.e2e.clusterip)."""
        self._service_ip(svc)
        self.cluster_ips.point(svc["metadata"]["name"], address)

    def _service_ip(self, svc: Obj) -> None:
        """Allocate a per-pod Service's virtual IP and give it its DNS records, the first time it is asked for."""
        sname = svc["metadata"]["name"]
        vip, new = self.cluster_ips.vip(sname)
        if new:
            names = dns_names(sname, self.rendered.plan.namespace, None, [svc])
            self.dns.set(f"Service/{sname}", fqdns(names), vip, names[-1])

    def _release_service_names(self, labels: dict[str, str]) -> None:
        for svc in self.rendered.objects.services_selecting(labels):
            cname = self._held_names.pop(svc["metadata"]["name"], None)
            if cname is not None:
                self.dns.forget(f"Service/{svc['metadata']['name']}")
                self.podman.run("rm", "--force", "--time", "0", cname, check=False)
                self.podman.containers.remove(cname)

    # ------------------------------------------------------------------------------------- jobs
    def run_cronjob(self, name: str, timeout: float = 300) -> tuple[int, str, float]:
        """One run of CronJob ``name`` now (what ``kubectl create job --from=cronjob/NAME`` starts): its pod
        to completion; returns the exit status, the log and the seconds it took."""
        cronjob = self.rendered.objects.get("CronJob", name)
        template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
        job = {"kind": "Job", "metadata": {**cronjob["metadata"]}, "spec": {"template": template}}
        pod_name = f"{name}-manual-{secrets.token_hex(3)[:5]}"
        t0 = time.monotonic()
        pod = self.runner.create(job, 0, name=pod_name)
        try:
            ctr = pod.container()
            rc = int(self.podman.run("wait", ctr, timeout=timeout).stdout.strip().splitlines()[-1])
            logs = self.podman.run("logs", ctr, check=False)
            return rc, logs.stdout + logs.stderr, time.monotonic() - t0
        finally:
            self.runner.delete(pod)

    def state_dir(self) -> Path:
        """The directory on this machine holding the controller state (a volume of the harness)."""
        ctl = self.rendered.plan.declaration.controller
        if ctl.state_storage is None:
            key, _ = claim_key(self.rendered.objects, vocab.CONTROLLER_STATE_CLAIM)
            return self.rundir / "volumes" / key
        key, _ = claim_key(self.rendered.objects, vocab.claim_name(ctl.state_storage))
        return self.rundir / "volumes" / key / naming.state_subpath(self.rendered.plan.name)

    def controllers(self) -> list[str]:
        """Names of the running controller pods."""
        return sorted(n for n, p in self.pods.items() if p.labels.get(vocab.COMPONENT) == vocab.CONTROLLER_COMPONENT)

    def recreate(self, name: str) -> PodInstance:
        """The StatefulSet makes replica ``name`` again, after :meth:`lose` or ``delete_pod(name, recreate=False)``:
        same name, a new address, the options set for it in :attr:`options` now."""
        if name in self.pods:
            raise ValueError(f"{name} is running; delete or lose it first")
        owner, _, ordinal = name.rpartition("-")
        return self._create(self.statefulset(owner), int(ordinal))

    def apply(self, rendered: Rendered) -> ApplyResult:
        """Apply a new render of the same stack (see the module docstring)."""
        old, self.rendered = self.rendered, rendered
        self.runner.objects = rendered.objects
        self.runner.plan = rendered.plan
        result = ApplyResult()
        t0 = time.monotonic()

        def mark(what: str) -> None:
            result.timeline.append((round(time.monotonic() - t0, 2), what))

        result.refreshed_volumes = self._refresh_volumes(rendered)
        kept = {s["metadata"]["name"] for s in rendered.statefulsets()}
        for sts in old.statefulsets():  # a StatefulSet no longer rendered is deleted, its pods with it
            if sts["metadata"]["name"] not in kept:
                for pod_name in [p for p in self.pods if p.rsplit("-", 1)[0] == sts["metadata"]["name"]]:
                    gone, _ = self.delete_pod(pod_name, recreate=False)
                    result.deleted.append(pod_name)
                    result.stop_seconds[pod_name] = gone.total_s
        # In the order rendered, each StatefulSet's roll done before the next: as `pulumi up` updates
        # the standby controller's only once the primary's is Ready (its dependsOn).
        for sts in rendered.statefulsets():
            name = sts["metadata"]["name"]
            before = next((s for s in old.statefulsets() if s["metadata"]["name"] == name), None)
            want = sts["spec"].get("replicas", 1)
            have = sorted((p for p in self.pods if p.rsplit("-", 1)[0] == name), key=lambda p: int(p.rsplit("-", 1)[1]))
            for pod_name in reversed(have[want:]):  # scale down: highest ordinal first
                gone, _ = self.delete_pod(pod_name, recreate=False)
                result.deleted.append(pod_name)
                result.stop_seconds[pod_name] = gone.total_s
            changed = before is not None and _template(before) != _template(sts)
            strategy = (sts["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate")
            if changed and strategy == "RollingUpdate":
                for pod_name in reversed(have[:want]):  # one at a time, each Ready before the next
                    mark(f"{pod_name} deleted")
                    gone, replacement = self.delete_pod(pod_name)
                    result.stop_seconds[pod_name] = gone.total_s
                    result.slow_stops |= gone.slow_stops
                    mark(f"{pod_name} made again")
                    if replacement is not None:
                        self.runner.wait_ready(replacement)
                        mark(f"{pod_name} Ready")
                    result.replaced.append(pod_name)
            for ordinal in range(len(have), want):
                self._create(sts, ordinal)
                result.created.append(f"{name}-{ordinal}")
        for dep in rendered.deployments():  # RollingUpdate with surge: the new pod Ready, then the old one goes
            name = dep["metadata"]["name"]
            before = next((d for d in old.deployments() if d["metadata"]["name"] == name), None)
            if before is not None and _template(before) != _template(dep):
                recreate = (dep["spec"].get("strategy") or {}).get("type") == "Recreate"
                for pod in self.deployment_pods(name):
                    mark(f"{name} rolled")
                    if recreate:  # Recreate (slurmdbd): the old pod is gone before the new one starts
                        gone, _ = self.delete_pod(pod.name, recreate=False)
                        self.runner.wait_ready(self._create_from_deployment(dep))
                    else:
                        self.runner.wait_ready(self._create_from_deployment(dep))
                        gone, _ = self.delete_pod(pod.name, recreate=False)
                    mark(f"{name} Ready")
                    result.replaced.append(pod.name)
                    result.stop_seconds[pod.name] = gone.total_s
        return result

    def refresh_volumes(self, rendered: Rendered) -> int:
        """What kubelet does for running pods within a minute of a change, roll or no roll: their ConfigMap /
        Secret volumes get ``rendered``'s contents. Returns how many volumes were refreshed."""
        return self._refresh_volumes(rendered)

    def _refresh_volumes(self, rendered: Rendered) -> int:
        """What kubelet does for running pods: their ConfigMap / Secret volumes get the new contents.
        Returns how many volumes were refreshed."""
        count = 0
        for pod in self.pods.values():
            for vol in pod.spec.get("volumes", []):
                if any(k in vol for k in ("configMap", "secret", "projected")):
                    target = self.rundir / "pods" / pod.podman_name / "cfg" / vol["name"]
                    fresh = target.with_name(target.name + ".new")
                    fill_volume(fresh, vol, rendered.objects, self._opts(pod.name).secret_overrides)
                    for f in fresh.rglob("*"):  # in place: a bind mount keeps the old directory's inode
                        if f.is_file():
                            dest = target / f.relative_to(fresh)
                            dest.parent.mkdir(parents=True, exist_ok=True)
                            shutil.copy2(f, dest)
                    shutil.rmtree(fresh)
                    count += 1
        return count

    def _opts(self, name: str) -> PodOptions:
        return self.options.get(name) or PodOptions()

    def laptop(self) -> str:
        """A researcher's machine: a container on the cluster network (not a pod) holding the SSH key."""
        if self._laptop is None:
            name = f"{self.podman.prefix}-{self.rendered.name}-laptop"
            ns = self.rendered.plan.namespace
            self.podman.run(
                "run", "-d", "--name", name, "--network", self.network, "--ip", self._next_ip(),
                "--dns", self.gateway, f"--dns-search={ns}.svc.cluster.local",
                "--volume", f"{self.secrets.keys_dir}:/keys:ro", "--entrypoint", '["sleep", "infinity"]', self.image,
            )  # fmt: skip
            self.podman.containers.append(name)
            self._laptop = name
        return self._laptop

    def ssh(self, user: str, command: str, timeout: float = 180) -> str:
        """``ssh user@login.NS.svc.cluster.local command`` from the laptop, trusting only the declared host key."""
        host = f"{naming.LOGIN}.{self.rendered.plan.namespace}.svc.cluster.local"
        deadline = time.monotonic() + 30
        while True:
            proc = self.podman.run(
                "exec", self.laptop(), "ssh", "-F", "/dev/null", "-i", "/keys/id_ed25519", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/keys/known_hosts",
                "-o", f"HostKeyAlias={LOGIN_HOST_ALIAS}", "-o", "ConnectTimeout=10", f"{user}@{host}", command,
                check=False, timeout=timeout,
            )  # fmt: skip
            # 255 is ssh's own failure; right after a login pod is replaced, its sshd can take a moment to
            # listen, as a client of a real cluster would retry.
            transient = proc.returncode == 255 and any(
                s in proc.stderr for s in ("resolve hostname", "Connection refused", "timed out")
            )
            if not transient or time.monotonic() > deadline:
                break
            time.sleep(1)
        if proc.returncode != 0:
            raise AssertionError(
                f"ssh {user}@login {command!r}: rc {proc.returncode}\n{proc.stdout}{proc.stderr}".rstrip()
            )
        return proc.stdout

    def down(self) -> None:
        """Remove every pod of this cluster (no preStop: the run is over), its laptop and its network."""
        if self._laptop:
            self.podman.run("rm", "--force", "--time", "0", self._laptop, check=False)
            self.podman.containers.remove(self._laptop)
            self._laptop = None
        for name in list(self.pods):
            self.podman.remove_pod(self.pods.pop(name).podman_name, timeout=2)
        self.dns.stop()
        self.podman.run("network", "rm", "--force", self.network, check=False)
        if self.network in self.podman.networks:
            self.podman.networks.remove(self.network)
        shutil.rmtree(self.rundir, ignore_errors=True)

    # --------------------------------------------------------------------------------- using it
    def exec(
        self, pod: str, script: str, user: str | None = None, container: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``sh -c script`` in a pod's main container (as ``user`` when given)."""
        args = ["exec"] + (["--user", user] if user else []) + [self.pods[pod].container(container)]
        return self.podman.run(*args, "sh", "-c", script, check=False, timeout=timeout)

    def sh(self, pod: str, script: str, user: str | None = None, timeout: float = 120) -> str:
        """Like :meth:`exec` but raises on failure and returns stdout."""
        proc = self.exec(pod, script, user=user, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"{pod}$ {script}\n  rc {proc.returncode}: {proc.stdout}{proc.stderr}".rstrip())
        return proc.stdout

    def node_states(self) -> dict[str, str]:
        """Slurm node -> state as sinfo names it (idle, allocated, draining, drained, future, down...),
        read with ``scontrol --future show nodes`` on a login pod (22.05's sinfo has no --future)."""
        login = self.a_login_pod()
        if login is None:  # the login pods are being replaced
            return {}
        try:
            out = self.exec(login, "scontrol --future show nodes -o", timeout=60).stdout
        except PodmanError:  # slurmctld not answering (restarting, or one of its pauses: docs/containers.md)
            return {}
        states = {}
        for line in out.splitlines():
            name, state = re.search(r"NodeName=(\S+)", line), re.search(r" State=(\S+)", line)
            if name and state:
                states[name.group(1)] = sinfo_state(state.group(1))
        return states

    def a_login_pod(self) -> str | None:
        """The first running login pod's name (None while they are being replaced)."""
        return next((n for n in sorted(self.pods) if n.startswith(f"{naming.LOGIN}-")), None)

    def controller_answers(self, timeout: float = 15) -> bool:
        """``scontrol ping`` on a login pod says UP within ``timeout`` seconds."""
        login = self.a_login_pod()
        if login is None:
            return False
        try:
            return "is UP" in self.exec(login, "scontrol ping", timeout=timeout).stdout
        except PodmanError:
            return False

    def wait_states(self, want: dict[str, str], timeout: float) -> dict[str, str]:
        """Wait until every node named in ``want`` is in that state (a prefix: idle matches idle~)."""

        last: dict[str, str] = {}

        def check() -> dict[str, str] | None:
            states = self.node_states()
            last.clear()
            last.update(states)
            ok = all(states.get(n, "").lower().startswith(s) for n, s in want.items())
            return states if ok else None

        def seen() -> str:
            return json.dumps({n: last.get(n, "?") for n in want})

        return wait_for(f"nodes {json.dumps(want)}", check, timeout, interval=1.0, seen=seen)  # type: ignore[no-any-return]

    def logs(self, pod: str, container: str | None = None, tail: int = 200) -> str:
        """Recent output of a pod's container."""
        name = self.pods[pod].container(container)
        proc = self.podman.run("logs", "--tail", str(tail), name, check=False)
        return proc.stdout + proc.stderr

    def restarts(self, pod: str) -> int:
        """How often podman restarted the pod's main container."""
        info = self.podman.json("inspect", self.pods[pod].container())
        return int(info[0].get("RestartCount", 0))

    def started_at(self, pod: str) -> str:
        """Start time of the pod's main container (unchanged while it keeps running)."""
        info = self.podman.json("inspect", self.pods[pod].container())
        return str(info[0]["State"]["StartedAt"])


def sinfo_state(state: str) -> str:
    """scontrol's ``IDLE+DRAIN`` as sinfo's ``drained`` (``ALLOCATED+DRAIN``: ``draining``; ``*``: not responding)."""
    base, *flags = state.lower().split("+")
    if "drain" in flags:
        base = "drained" if base == "idle" else "draining"
    return base + ("*" if "not_responding" in flags else "")


def _template(sts: Obj) -> str:
    return json.dumps(sts["spec"]["template"], sort_keys=True)
