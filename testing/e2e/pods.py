"""One StatefulSet replica (or Deployment pod) as a podman pod, created and deleted the way kubelet would.

Create: a pod sandbox (shared network, UTS and IPC namespaces; hostname ``NAME-i``; the pod's records
in the cluster DNS, testing/e2e/dns.py; the cluster's resolv.conf search list), its volumes, then the init
containers in order (a native sidecar, ``restartPolicy: Always``, keeps running and the next one
starts once its startupProbe passes), then the main containers. Delete: each main container's preStop
hook (within terminationGracePeriodSeconds), SIGTERM to the main containers, then to the sidecars.

Scheduling (nodeSelector, affinity, tolerations, priority), liveness/readiness restarts and
NetworkPolicies are not emulated; docs/containers.md lists them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from slonk_infra import vocab
from slonk_infra.plan import ClusterPlan, WorkerGroup
from testing.e2e.dns import ClusterDNS, fqdns
from testing.e2e.kube import (
    Obj,
    Objects,
    SecretOverrides,
    apply_fs_group,
    claim_key,
    dns_names,
    dns_searches,
    fill_volume,
    pod_reverse_name,
)
from testing.e2e.nodes import PROFILES, GpuNode, NodeProfile, efa_mounts, gpu_mounts, nvml_profile_name, tpu_mounts
from testing.e2e.podman import Podman, PodmanError
from testing.e2e.seccomp import write_containerd_like

EFA_RESOURCE = "vpc.amazonaws.com/efa"
RESTART_POLICIES = {"Always": "always", "OnFailure": "on-failure", "Never": "no"}
# Labels the StatefulSet controller puts on every pod it makes (Kubernetes 1.28+ for the index label).
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def per_pod_service(svc: Obj) -> bool:
    """A ClusterIP Service selecting one pod by name (the controllers' own Services): the harness gives it a
    virtual IP of its own (testing.e2e.clusterip), where other Services' names lead to their pods' addresses."""
    spec = svc["spec"]
    return spec.get("clusterIP") != "None" and POD_NAME_LABEL in (spec.get("selector") or {})


@dataclass
class PodInstance:
    """A running pod: its Kubernetes name, podman names and address."""

    name: str
    podman_name: str
    ip: str
    spec: Obj
    labels: dict[str, str]
    owner: tuple[str, str] = ("StatefulSet", "")
    """Kind and name of the workload that made the pod (what makes it again when it is deleted)."""
    sidecars: list[str] = field(default_factory=list)
    main: list[str] = field(default_factory=list)
    main_specs: dict[str, Obj] = field(default_factory=dict)
    started: float = 0.0
    gpu_nodes: dict[str, GpuNode] = field(default_factory=dict)
    """Container name -> its GPUs' stand-in profile (plant a fault: change it, then :meth:`GpuNode.write`)."""

    def container(self, name: str | None = None) -> str:
        """podman name of a main container (the first when ``name`` is None)."""
        key = name or next(iter(self.main_specs))
        return f"{self.podman_name}-{key}"


@dataclass
class PodOptions:
    """Per-pod inputs that differ from the rendered objects (bad-input scenarios only)."""

    secret_overrides: SecretOverrides = field(default_factory=dict)
    gpu_faults: dict[int, list[str]] = field(default_factory=dict)
    """GPU index -> faults the NVML stand-in reports from the start (see testing.nvml)."""
    gpus_missing: int = 0
    """GPUs the NVML stand-in leaves out of its count (a GPU fallen off the bus)."""


# A main container slower than this to exit after SIGTERM has its last log lines kept (DeleteResult.slow_stops).
SLOW_STOP_S = 5.0
# Set (to a number of seconds), a main container still running that long after its SIGTERM also has what
# each thread of its processes waits in (_thread_states) and their stacks (gdb on the host) kept: how a rare
# slow exit is traced (docs/containers.md, "The remaining slow exit"), with SLONK_E2E_SLOW_STOP_LINES log
# lines (default 25).
STACKS_ENV = "SLONK_E2E_STACKS_AFTER"
LINES_ENV = "SLONK_E2E_SLOW_STOP_LINES"


@dataclass(frozen=True)
class DeleteResult:
    """What deleting a pod did: the preStop hook's exit code and output, and how long each part took."""

    prestop_rc: int | None
    prestop_output: str
    prestop_s: float
    total_s: float
    slow_stops: dict[str, str] = field(default_factory=dict)
    """Main container -> its last log lines, for each that took more than SLOW_STOP_S to stop after SIGTERM."""


class PodRunner:
    """Creates and deletes pods from StatefulSet and Deployment templates on one podman network."""

    def __init__(
        self,
        podman: Podman,
        objects: Objects,
        network: str,
        gateway: str,
        allocate_ip: Callable[[], str],
        image_for: Callable[[str], str],
        rundir: Path,
        plan: ClusterPlan | None = None,
        nvml_library: Callable[[], Path] | None = None,
    ) -> None:
        self.podman = podman
        self.objects = objects
        self.network = network
        self.gateway = gateway
        self.allocate_ip = allocate_ip
        self.image_for = image_for
        self.rundir = rundir
        self.generation = 0
        self.plan = plan
        self.profile: NodeProfile = PROFILES[plan.declaration.cloud if plan else "local"]
        self.nvml_library = nvml_library
        self.network_ready: Callable[[str], None] | None = None
        """Called with a new pod's podman name once the pod exists, before any of its containers is made (the
        cluster installs its Services' translation there)."""
        self.dns: ClusterDNS | None = None
        """The cluster's DNS (``gateway`` is its address): pods' records are set at creation, gone at deletion."""

    # ---------------------------------------------------------------------------------- create
    def create(self, sts: Obj, ordinal: int, options: PodOptions | None = None, name: str | None = None) -> PodInstance:
        """Start replica ``ordinal`` of StatefulSet ``sts``, or a pod called ``name`` of a Deployment ``sts``
        (no ordinal identity, no per-pod claims: ``ordinal`` is then unused)."""
        opts = options or PodOptions()
        meta, spec = sts["metadata"], sts["spec"]
        name = name or f"{meta['name']}-{ordinal}"
        namespace = meta.get("namespace", "default")
        template = spec["template"]
        pod_spec: Obj = template["spec"]
        labels = dict(template["metadata"].get("labels", {}))
        if sts.get("kind", "StatefulSet") == "StatefulSet":
            labels |= {POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)}
        self.generation += 1
        podman_name = f"{self.podman.prefix}-{name}-g{self.generation}"
        ip = self.allocate_ip()
        service = spec.get("serviceName")
        searches, dns_options = dns_searches(namespace, pod_spec)
        args = [
            "pod", "create", "--name", podman_name, "--hostname", name, "--share", "net,uts,ipc",
            "--network", self.network, "--ip", ip, "--dns", self.gateway,
        ]  # fmt: skip
        self._dns_records(name, namespace, service, labels, ip)
        args += [f"--dns-search={s}" for s in searches] + [f"--dns-option={o}" for o in dns_options]
        if service:  # kubelet's hosts file names the pod by its FQDN too
            args += [f"--add-host={name}.{service}.{namespace}.svc.cluster.local:{ip}"]
        self.podman.run(*args)
        self.podman.pods.append(podman_name)
        if self.network_ready is not None:
            self.network_ready(podman_name)
        owner = (sts.get("kind", "StatefulSet"), meta["name"])
        pod = PodInstance(name, podman_name, ip, pod_spec, labels, owner=owner, started=time.monotonic())
        poddir = self.rundir / "pods" / podman_name
        volumes = self._volumes(sts, ordinal, pod_spec, poddir, opts)
        env_fields = {"metadata.name": name, "metadata.namespace": namespace, "status.podIP": ip,
                      "spec.nodeName": "e2e-host", "spec.serviceAccountName": pod_spec.get("serviceAccountName", "")}  # fmt: skip
        env_fields |= {f"metadata.labels['{k}']": v for k, v in labels.items()}
        for init in pod_spec.get("initContainers", []):
            cname = f"{podman_name}-{init['name']}"
            sidecar = init.get("restartPolicy") == "Always"
            run = self._container_args(pod, init, volumes, env_fields, poddir, opts, detach=sidecar)
            if sidecar:
                self.podman.run(*run)
                pod.sidecars.append(cname)
                if "startupProbe" in init:
                    self._wait_probe(cname, init["startupProbe"], f"{name}/{init['name']} startupProbe")
            else:
                proc = self.podman.run(*run, check=False, timeout=600)
                if proc.returncode != 0:
                    raise PodmanError(f"init container {name}/{init['name']} exited {proc.returncode}: {proc.stderr}")
        for ctr in pod_spec["containers"]:
            self.podman.run(*self._container_args(pod, ctr, volumes, env_fields, poddir, opts, detach=True))
            pod.main.append(f"{podman_name}-{ctr['name']}")
            pod.main_specs[ctr["name"]] = ctr
        return pod

    def _dns_records(self, name: str, namespace: str, service: str | None, labels: dict[str, str], ip: str) -> None:
        """What the cluster's DNS holds for a pod, set before anything in it asks."""
        if self.dns is None:
            return
        # A per-pod Service's name has a record of its own: its virtual IP, not this pod's address.
        selecting = [v for v in self.objects.services_selecting(labels) if not per_pod_service(v)]
        # Per-pod names exist only under a headless governing Service (the login Service has a
        # virtual IP: login-0.login.NS... resolves on no cluster, though kubelet's hosts file names it).
        governing = next((v for v in selecting if v["metadata"]["name"] == service), None)
        headless = governing is not None and governing["spec"].get("clusterIP") == "None"
        names = dns_names(name, namespace, service if headless else None, selecting)
        reverse = pod_reverse_name(name, namespace, service if headless else None, ip, selecting)
        self.dns.set(name, fqdns(names), ip, reverse)

    def _volumes(
        self, sts: Obj, ordinal: int, pod_spec: Obj, poddir: Path, opts: PodOptions
    ) -> dict[str, tuple[Path, bool]]:
        """Volume name -> (directory on this machine, read-only) for one pod."""
        fs_group = (pod_spec.get("securityContext") or {}).get("fsGroup")
        out: dict[str, tuple[Path, bool]] = {}
        for vol in pod_spec.get("volumes", []):
            vname = vol["name"]
            if "emptyDir" in vol:
                path = poddir / "empty" / vname
                path.mkdir(parents=True)
                os.chmod(path, 0o777)  # kubelet makes emptyDirs world-writable
                ro = False
            elif "persistentVolumeClaim" in vol:
                key, shared = claim_key(self.objects, vol["persistentVolumeClaim"]["claimName"])
                path, ro = self._claim_dir(key, fs_group if not shared else None), False
            elif "hostPath" in vol:
                # Never this machine's own paths: a stand-in node root, empty, one per cluster (the GPU
                # driver directory of a GKE node, fabric device directories... exist on real nodes only).
                path, ro = self.rundir / "node" / vol["hostPath"]["path"].lstrip("/"), False
                path.mkdir(parents=True, exist_ok=True)
            elif any(k in vol for k in ("configMap", "secret", "projected")):
                path, ro = poddir / "cfg" / vname, True
                fill_volume(path, vol, self.objects, opts.secret_overrides)
                if fs_group is not None:
                    apply_fs_group(path, fs_group, read_only=True)
            else:
                raise ValueError(f"volume {vname!r}: {sorted(vol)} is not supported by the harness")
            if fs_group is not None and "emptyDir" in vol:
                apply_fs_group(path, fs_group, read_only=False)
            out[vname] = (path, ro)
        for tmpl in sts["spec"].get("volumeClaimTemplates", []):
            claim = f"{tmpl['metadata']['name']}-{sts['metadata']['name']}-{ordinal}"
            out[tmpl["metadata"]["name"]] = (self._claim_dir(f"pvc-{claim}", fs_group), False)
        return out

    def _claim_dir(self, key: str, fs_group: int | None) -> Path:
        path = self.rundir / "volumes" / key
        if not path.exists():
            path.mkdir(parents=True)
            os.chmod(path, 0o755)
            if fs_group is not None:
                apply_fs_group(path, fs_group, read_only=False)
        return path

    def _container_args(
        self, pod: PodInstance, ctr: Obj, volumes: Mapping[str, tuple[Path, bool]],
        env_fields: Mapping[str, str], poddir: Path, opts: PodOptions, detach: bool,
    ) -> list[str]:  # fmt: skip
        name = f"{pod.podman_name}-{ctr['name']}"
        args = ["run", "--pod", pod.podman_name, "--name", name, "--log-opt", "max-size=20mb"]
        # A sidecar's own restartPolicy, else the pod's (a Job's pods run once: Never / OnFailure).
        policy = ctr.get("restartPolicy") or pod.spec.get("restartPolicy", "Always")
        args += ["-d", "--restart", RESTART_POLICIES[policy]] if detach else []
        psc = pod.spec.get("securityContext") or {}
        sc = {
            **{k: v for k, v in psc.items() if k in ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile")},
            **(ctr.get("securityContext") or {}),
        }
        user, group = sc.get("runAsUser"), sc.get("runAsGroup")
        if user is not None:
            args += ["--user", f"{user}:{group if group is not None else user}"]
        if sc.get("runAsNonRoot") and not user:
            raise ValueError(f"{name}: runAsNonRoot without a non-zero runAsUser would not start")
        for gid in [*psc.get("supplementalGroups", []), *([psc["fsGroup"]] if "fsGroup" in psc else [])]:
            args += ["--group-add", str(gid)]
        if sc.get("readOnlyRootFilesystem"):
            args.append("--read-only")
        if sc.get("privileged"):
            args.append("--privileged")
        else:
            caps = sc.get("capabilities") or {}
            args += [f"--cap-drop={c}" for c in caps.get("drop", [])] + [f"--cap-add={c}" for c in caps.get("add", [])]
            if sc.get("allowPrivilegeEscalation") is False:
                args += ["--security-opt", "no-new-privileges"]
            if (sc.get("seccompProfile") or {}).get("type") == "RuntimeDefault":
                # containerd's default filter, as on a GKE/EKS node, not podman's more lenient one.
                profile = write_containerd_like(self.rundir / "seccomp-runtime-default.json")
                args += ["--security-opt", f"seccomp={profile}"]
        limits = (ctr.get("resources") or {}).get("limits") or {}
        if "memory" in limits:
            args += ["--memory", _bytes(limits["memory"])]
        if "cpu" in limits:
            args += ["--cpus", str(_cpus(limits["cpu"]))]
        for env in ctr.get("env", []):
            if "value" in env:
                args += ["--env", f"{env['name']}={env['value']}"]
            elif "fieldRef" in env.get("valueFrom", {}):
                args += ["--env", f"{env['name']}={env_fields[env['valueFrom']['fieldRef']['fieldPath']]}"]
            else:
                raise ValueError(f"{name}: env {env['name']} source {env.get('valueFrom')} is not supported")
        for mount in ctr.get("volumeMounts", []):
            host, ro = volumes[mount["name"]]
            src = host / mount["subPath"] if mount.get("subPath") else host
            args += ["--volume", f"{src}:{mount['mountPath']}:{'ro' if ro or mount.get('readOnly') else 'rw'}"]
        args += self._node_devices(pod, ctr, limits, poddir / "node-devices" / ctr["name"], opts)
        command, cargs = ctr.get("command"), ctr.get("args", [])
        if command:
            args += ["--entrypoint", json.dumps(command)]
        return [*args, self.image_for(ctr["image"]), *cargs]

    def _group(self, pod: PodInstance) -> WorkerGroup | None:
        name = pod.labels.get(vocab.GROUP_LABEL)
        return next((g for g in self.plan.groups if g.name == name), None) if self.plan and name else None

    def _node_devices(
        self, pod: PodInstance, ctr: Obj, limits: Mapping[str, str], workdir: Path, opts: PodOptions
    ) -> list[str]:
        """What the node's device plugins add to a container asking for GPUs, TPU chips or EFA interfaces
        (testing.e2e.nodes): devices, driver files and variables, as the declared cloud's node gives them."""
        args: list[str] = []
        gpus = int(limits.get(vocab.GPU_RESOURCE, 0))
        if gpus:
            if self.profile.gpu is None or self.nvml_library is None:
                raise ValueError(f"{pod.name}: asks for {gpus} GPUs on a {self.profile.name} node, which has none")
            node = GpuNode(workdir / "nvml" / nvml_profile_name(), gpus, dict(opts.gpu_faults), opts.gpus_missing)
            declared = frozenset(e["name"] for e in ctr.get("env", []))
            args += gpu_mounts(self.profile.gpu, self.nvml_library(), node, workdir, declared)
            pod.gpu_nodes[ctr["name"]] = node
        chips = int(limits.get(vocab.TPU_RESOURCE, 0))
        group = self._group(pod)
        if chips:
            if self.profile.tpu is None or group is None or not group.tpu_generation or not group.tpu_topology:
                raise ValueError(
                    f"{pod.name}: asks for {chips} TPU chips on a {self.profile.name} node, which has none"
                )
            env = self.profile.tpu.env(group.tpu_generation, group.tpu_topology, chips)
            args += tpu_mounts(self.profile.tpu, group.tpu_generation, env, chips, workdir)
        interfaces = int(limits.get(EFA_RESOURCE, 0))
        if interfaces:
            if not self.profile.efa:
                raise ValueError(f"{pod.name}: asks for EFA on a {self.profile.name} node, which has none")
            args += efa_mounts(interfaces, workdir)
        return args

    # ---------------------------------------------------------------------------------- probes
    def probe(self, container: str, probe: Obj) -> bool:
        """Run an exec or tcpSocket probe once inside ``container``."""
        timeout = float(probe.get("timeoutSeconds", 1)) + 5
        if "exec" in probe:
            cmd = probe["exec"]["command"]
        elif "tcpSocket" in probe:
            port = probe["tcpSocket"]["port"]
            cmd = ["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"]
        else:
            raise ValueError(f"probe {sorted(probe)} is not supported by the harness")
        try:
            return self.podman.run("exec", container, *cmd, check=False, timeout=timeout).returncode == 0
        except PodmanError:
            return False

    def wait_ready(self, pod: PodInstance, timeout: float = 120) -> float:
        """Wait until every main container's readinessProbe passes (what a rolling update waits for), probed
        as kubelet probes it: at once, then every periodSeconds, so a roll takes as long here as there."""
        t0 = time.monotonic()
        for cname, ctr in pod.main_specs.items():
            probe = ctr.get("readinessProbe")
            if probe:
                container = f"{pod.podman_name}-{cname}"
                period = float(probe.get("periodSeconds", 10))
                tick = time.monotonic()
                while not self.probe(container, probe):
                    if time.monotonic() - t0 > timeout:
                        raise PodmanError(f"{pod.name}/{cname} not ready within {timeout:.0f}s")
                    tick += period
                    time.sleep(max(0.0, tick - time.monotonic()))
        return time.monotonic() - t0

    def _wait_probe(self, container: str, probe: Obj, what: str) -> None:
        period = float(probe.get("periodSeconds", 10))
        tries = int(probe.get("failureThreshold", 3))
        # Polled faster than periodSeconds (the pod is only ready sooner), but never more often than 4/s.
        interval = min(period, 0.25)
        deadline = time.monotonic() + period * tries
        while time.monotonic() < deadline:
            if self.probe(container, probe):
                return
            time.sleep(interval)
        logs = self.podman.run("logs", "--tail", "20", container, check=False).stdout
        raise PodmanError(f"{what} did not pass within {period * tries:.0f}s; last log lines:\n{logs}")

    # ---------------------------------------------------------------------------------- delete
    def delete(self, pod: PodInstance) -> DeleteResult:
        """Delete a pod as kubelet would: preStop hooks, SIGTERM to main containers, then to sidecars."""
        t0 = time.monotonic()
        grace = float(pod.spec.get("terminationGracePeriodSeconds", 30))
        prestop_rc: int | None = None
        output = ""
        for cname, ctr in pod.main_specs.items():
            hook = ((ctr.get("lifecycle") or {}).get("preStop") or {}).get("exec")
            if hook:
                proc = self.podman.run(
                    "exec", f"{pod.podman_name}-{cname}", *hook["command"], check=False, timeout=grace + 30
                )
                prestop_rc, output = proc.returncode, proc.stdout + proc.stderr
        prestop_s = time.monotonic() - t0
        remaining = max(2, int(grace - prestop_s))
        slow: dict[str, str] = {}
        stacks_after = float(os.environ.get(STACKS_ENV) or 0)
        lines = os.environ.get(LINES_ENV) or "25"
        for cname in pod.main:
            began = time.monotonic()
            stop = ["stop", "--time", str(remaining), cname]
            if stacks_after:
                stacks = self._stop_keeping_stacks(cname, stop, stacks_after, remaining + 60)
            else:
                self.podman.run(*stop, check=False, timeout=remaining + 60)
                stacks = ""
            if (took := time.monotonic() - began) > SLOW_STOP_S:  # what it was doing: its own last words
                tail = self.podman.run("logs", "--timestamps", "--tail", lines, cname, check=False, timeout=60)
                slow[cname] = f"stopped after {took:.1f} s:\n{tail.stdout}{tail.stderr}{stacks}"
        for cname in reversed(pod.sidecars):
            self.podman.run("stop", "--time", "5", cname, check=False, timeout=65)
        self.podman.remove_pod(pod.podman_name)
        if self.dns is not None:
            self.dns.forget(pod.name)
        shutil.rmtree(self.rundir / "pods" / pod.podman_name, ignore_errors=True)
        return DeleteResult(prestop_rc, output, prestop_s, time.monotonic() - t0, slow)

    def _stop_keeping_stacks(self, cname: str, stop: list[str], after: float, timeout: float) -> str:
        """``podman stop`` in the background; if the container still runs ``after`` seconds later, the
        stacks of its processes (returned once the stop has ended)."""
        stopping = subprocess.Popen(
            ["podman", *stop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            stopping.wait(timeout=after)
            return ""
        except subprocess.TimeoutExpired:
            pass
        top = self.podman.run("top", cname, "hpid", "args", check=False, timeout=60)
        out = [f"still running {after:g} s after SIGTERM:", top.stdout]
        for line in top.stdout.splitlines()[1:]:
            pid = line.split()[0] if line.split() else ""
            if pid.isdigit():
                out.append(f"--- threads of host pid {pid}:\n{_thread_states(pid)}")
                out.append(f"--- stacks of host pid {pid}:\n{_gdb_stacks(pid)}")
        try:
            stopping.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stopping.kill()  # the podman client only: podman itself ends the container at the grace period
        return "\n".join(out)


def _thread_states(pid: str) -> str:
    """What each thread of one host process waits in, readable without symbols: its name (Slurm names its
    threads: rpcmgr, srvcn, agent, ...), its system call with arguments (/proc/PID/task/TID/syscall; on
    x86-64 0 is read, 7 poll, 42 connect, 45 recvfrom, 202 futex, 232 epoll_wait, 281 epoll_pwait), its
    kernel wait channel; then its open file descriptors and the TCP connections of its network namespace,
    to name the peer a blocked call waits on. Whatever could be read is kept if the process ends meanwhile."""
    task = f"/proc/{pid}/task"
    lines = []
    try:
        tids = sorted(os.listdir(task), key=int)
    except OSError as exc:
        return f"threads: {exc}"
    for tid in tids:
        parts = []
        for name in ("comm", "syscall", "wchan"):
            try:
                with open(f"{task}/{tid}/{name}") as f:
                    parts.append(f.read().strip())
            except OSError as exc:
                parts.append(f"({exc.strerror})")
        lines.append(f"{tid} {' | '.join(parts)}")
    try:
        fds = []
        for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
            try:
                fds.append(f"{fd}->{os.readlink(f'/proc/{pid}/fd/{fd}')}")
            except OSError:
                continue
        lines.append("fds: " + " ".join(fds))
    except OSError as exc:
        lines.append(f"fds: {exc}")
    try:
        ss = subprocess.run(
            ["nsenter", "-t", pid, "-n", "ss", "-tanpe"], capture_output=True, text=True, timeout=30, check=False
        )
        lines.append(ss.stdout + ss.stderr)
    except (OSError, subprocess.TimeoutExpired) as exc:
        lines.append(f"ss: {exc}")
    return "\n".join(lines)


def _gdb_stacks(pid: str) -> str:
    """Every thread's stack of one host process (gdb attaches, prints, detaches), or why there is none."""
    try:
        gdb = subprocess.run(
            ["gdb", "-p", pid, "-batch", "-nx", "-ex", "thread apply all bt"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"gdb: {exc}"
    return gdb.stdout + gdb.stderr


def _bytes(quantity: str) -> str:
    """A Kubernetes memory quantity as podman's --memory value."""
    units = {"Ki": "k", "Mi": "m", "Gi": "g", "Ti": "t"}
    for suffix, unit in units.items():
        if quantity.endswith(suffix):
            return quantity[: -len(suffix)] + unit
    return quantity


def _cpus(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


__all__ = [
    "POD_INDEX_LABEL",
    "POD_NAME_LABEL",
    "DeleteResult",
    "PodInstance",
    "PodOptions",
    "PodRunner",
    "per_pod_service",
]
