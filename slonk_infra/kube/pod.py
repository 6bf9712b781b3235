"""The pod template pieces every Slurm pod shares: security contexts, the munged sidecar, volumes and mounts.

Controller, login, worker and slurmrestd pods differ in their main container; everything around it
(service account, priority, DNS search domain, munge, the scripts, the shared filesystems) is built
here once so the roles cannot drift apart.
"""

from __future__ import annotations

import hashlib
from typing import Any

from slonk_infra import vocab
from slonk_infra.plan import ClusterPlan, WorkerGroup, naming
from slonk_infra.slurm import SlurmFiles

Obj = dict[str, Any]

SCRIPTS_MOUNT = vocab.SCRIPTS_DIR


def meta(name: str, namespace: str | None, component: str, **extra: str) -> Obj:
    """ObjectMeta with the standard labels; namespace None for cluster-scoped objects."""
    return dict(vocab.meta(name, namespace, component, **extra))


def config_hash(files: SlurmFiles) -> str:
    """Hash of the Slurm config the controller, login and slurmrestd pods mount (rolls them when it changes)."""
    digest = hashlib.sha256()
    for name, text in sorted(files.all().items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()[:16]


def restricted(run_as: int | None = None, caps: tuple[str, ...] = ()) -> Obj:
    """A container security context with every capability dropped (but ``caps``), no escalation, seccomp."""
    ctx: Obj = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], **({"add": list(caps)} if caps else {})},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if run_as is not None:
        ctx.update({"runAsUser": run_as, "runAsGroup": run_as, "runAsNonRoot": True})
    return ctx


def privileged() -> Obj:
    """The security context of a container that must be privileged (each use says why)."""
    return {"privileged": True, "seccompProfile": {"type": "RuntimeDefault"}}


def scripts_mount() -> Obj:
    """The scripts ConfigMap, read-only at the path slurm.conf and the manifests name."""
    return {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True}


def scripts_volume() -> Obj:
    """The scripts ConfigMap as a volume, executable."""
    return {"name": "scripts", "configMap": {"name": vocab.SCRIPTS_MAP, "defaultMode": 0o755}}


def munged_sidecar(image: str) -> Obj:
    """munged as a native sidecar (an init container that keeps running), shared socket in /run/munge."""
    return {
        "name": "munged",
        "image": image,
        "restartPolicy": "Always",
        "command": [f"{SCRIPTS_MOUNT}/munged.sh"],
        # Starts as root only to hand the key to the munge user, then runs as munge (setpriv).
        "securityContext": restricted(caps=("CHOWN", "FOWNER", "DAC_OVERRIDE", "SETUID", "SETGID")),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "startupProbe": {
            "exec": {"command": ["sh", "-c", "munge -n | unmunge >/dev/null"]},
            "periodSeconds": 2,
            "failureThreshold": 30,
        },
        "volumeMounts": [
            {"name": "munge-socket", "mountPath": vocab.MUNGE_SOCKET_DIR},
            {"name": "munge-key", "mountPath": vocab.MUNGE_SECRET_DIR, "readOnly": True},
            {"name": "munge-private", "mountPath": vocab.MUNGE_PRIVATE_DIR},
            scripts_mount(),
        ],
    }


def common_volumes() -> list[Obj]:
    """Volumes of every pod that runs munged: its socket, key and private copy, the scripts, /run/slurm."""
    return [
        {"name": "munge-socket", "emptyDir": {"medium": "Memory"}},
        {"name": "munge-private", "emptyDir": {"medium": "Memory"}},
        {"name": "munge-key", "secret": {"secretName": vocab.MUNGE_SECRET, "defaultMode": 0o400}},
        scripts_volume(),
        {"name": "run-slurm", "emptyDir": {}},
        users_volume(),
    ]


def common_mounts() -> list[Obj]:
    """Mounts of the main container of every pod that runs munged."""
    return [
        {"name": "munge-socket", "mountPath": vocab.MUNGE_SOCKET_DIR},
        scripts_mount(),
        {"name": "run-slurm", "mountPath": vocab.RUN_SLURM_DIR},
        {"name": "users", "mountPath": vocab.USERS_DIR, "readOnly": True},
    ]


def users_volume() -> Obj:
    """The declared users (slonk_infra.declaration.users): passwd, group and every authorized_keys.<name>, readable
    by all as NSS and sshd's AuthorizedKeysCommand (run as nobody) need."""
    return {"name": "users", "secret": {"secretName": vocab.USERS_SECRET, "defaultMode": 0o644}}


def sudoers_volume() -> Obj:
    """The declared sudoers file alone, root-owned 0440 as sudo insists."""
    item = {"key": "sudoers", "path": "sudoers", "mode": 0o440}
    return {"name": "sudoers", "secret": {"secretName": vocab.USERS_SECRET, "items": [item]}}


def sudoers_mount() -> Obj:
    """The sudoers drop-in (login and workers, where people run commands)."""
    return {"name": "sudoers", "mountPath": vocab.SUDOERS_FILE, "subPath": "sudoers", "readOnly": True}


def config_volume(jwt_key: bool = False) -> Obj:
    """The Slurm config as one projected volume for /etc/slurm."""
    # Projected so the topology ConfigMap lands beside slurm.conf, where Slurm looks for it, and the
    # controller's JWT key at the path slurm.conf names, readable by the slurm group only.
    sources: list[Obj] = [{"configMap": {"name": vocab.CONFIG_MAP}}, {"configMap": {"name": vocab.TOPOLOGY_MAP}}]
    if jwt_key:
        item = {"key": vocab.JWT_FILE, "path": f"jwt/{vocab.JWT_FILE}", "mode": 0o440}
        sources.append({"secret": {"name": vocab.JWT_SECRET, "items": [item]}})
    return {"name": "slurm-config", "projected": {"sources": sources}}


def config_mount() -> Obj:
    """The projected Slurm config, read-only at /etc/slurm."""
    return {"name": "slurm-config", "mountPath": vocab.CONF_DIR, "readOnly": True}


def shared_mounts(plan: ClusterPlan) -> tuple[list[Obj], list[Obj]]:
    """Volumes and mounts of every shared filesystem of the declaration."""
    storage = plan.declaration.storage
    volumes = [
        {"name": f"shared-{s.name}", "persistentVolumeClaim": {"claimName": vocab.claim_name(s.name)}} for s in storage
    ]
    mounts = [{"name": f"shared-{s.name}", "mountPath": s.mount_path} for s in storage]
    return volumes, mounts


def tolerations(group: WorkerGroup) -> list[Obj]:
    """Tolerations matching exactly the taints the group's nodes carry."""
    return [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in group.taints]


def slurm_pod_spec(
    plan: ClusterPlan,
    *,
    priority_class: str,
    containers: list[Obj],
    volumes: list[Obj],
    munged: bool = True,
    fs_group: int | None = None,
    grace_seconds: int | None = None,
    tolerate: list[Obj] | None = None,
) -> Obj:
    """A Slurm pod: no API token, the given priority, workers' DNS search domain, munged beside ``containers``."""
    security: Obj = {"fsGroup": fs_group} if fs_group is not None else {}
    security["seccompProfile"] = {"type": "RuntimeDefault"}
    spec: Obj = {
        "serviceAccountName": vocab.SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "priorityClassName": priority_class,
    }
    if grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = grace_seconds
    spec["securityContext"] = security
    # Slurm node names are bare pod hostnames; this search domain makes them resolve in every pod.
    # Every Slurm RPC resolves its peer's name first, one lookup at a time, and slurmctld's threads wait
    # on them: a dropped UDP query (a busy cluster DNS, the conntrack race of parallel A/AAAA queries)
    # costs glibc's default 5 s twice. Retry after 1 s instead, three times, on a fresh socket.
    spec["dnsConfig"] = {
        "searches": [naming.workers_domain(plan.namespace)],
        "options": [
            {"name": "timeout", "value": "1"},
            {"name": "attempts", "value": "3"},
            {"name": "single-request-reopen"},
        ],
    }
    if tolerate is not None:
        spec["tolerations"] = tolerate
    if munged:
        spec["initContainers"] = [munged_sidecar(plan.declaration.image.reference)]
    spec["containers"] = containers
    spec["volumes"] = volumes
    return spec
