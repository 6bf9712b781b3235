"""slurmctld: its StatefulSet, headless Service and state claim."""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import (
    Obj,
    common_mounts,
    common_volumes,
    config_hash,
    config_mount,
    config_volume,
    meta,
    restricted,
    scripts_mount,
    shared_mounts,
    slurm_pod_spec,
)
from slonk_infra.kube.storage import block_claim
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm import SlurmFiles
from slonk_infra.slurm.conf import push_config_after_start

COMPONENT = vocab.CONTROLLER_COMPONENT
ZONE_LABEL = "topology.kubernetes.io/zone"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"  # set by the StatefulSet controller on each pod


def service(plan: ClusterPlan) -> Obj:
    """Headless Service giving the controller pod its stable DNS name (slurm.conf's SlurmctldHost)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(naming.CONTROLLER, plan.namespace, COMPONENT),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": vocab.selector(COMPONENT),
            "ports": [{"name": "slurmctld", "port": vocab.SLURMCTLD_PORT, "targetPort": vocab.SLURMCTLD_PORT}],
        },
    }


def pod_services(plan: ClusterPlan) -> list[Obj]:
    """A ClusterIP Service per controller pod: the address slurm.conf gives it, which stays while the pod is
    replaced (:func:`slonk_infra.plan.naming.controller_hosts` says why)."""
    replicas = plan.declaration.controller.replicas
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(naming.controller_service(i), plan.namespace, COMPONENT),
            "spec": {
                "type": "ClusterIP",
                "publishNotReadyAddresses": True,
                "selector": {**vocab.selector(COMPONENT), POD_NAME_LABEL: naming.controller_pod(i)},
                "ports": [{"name": "slurmctld", "port": vocab.SLURMCTLD_PORT, "targetPort": vocab.SLURMCTLD_PORT}],
            },
        }
        for i in range(replicas)
    ]


def state_claim(plan: ClusterPlan) -> Obj:
    """slurmctld's state volume: a claim of its own so deleting the StatefulSet never deletes it."""
    spec, notes = block_claim(plan, plan.declaration.controller.state_gib)
    metadata = meta(vocab.CONTROLLER_STATE_CLAIM, plan.namespace, COMPONENT)
    if notes:
        metadata["annotations"] = notes
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def storage_path(plan: ClusterPlan, name: str, subpath: str) -> str:
    """Where ``subpath`` of declared storage ``name`` is in a pod that mounts every shared filesystem."""
    vol = next(v for v in plan.declaration.storage if v.name == name)
    return f"{vol.mount_path.rstrip('/')}/{subpath}"


def backups_dir(plan: ClusterPlan) -> str | None:
    """The state archives' directory as the controller pods see it (None without controller.backup)."""
    backup = plan.declaration.controller.backup
    return storage_path(plan, backup.storage, naming.backups_subpath(plan.name)) if backup else None


def _state_dirs(plan: ClusterPlan) -> list[str]:
    """Directories on shared filesystems the controller's state and archives need (made by the init container)."""
    ctl = plan.declaration.controller
    dirs = [storage_path(plan, ctl.state_storage, naming.state_subpath(plan.name))] if ctl.state_storage else []
    backups = backups_dir(plan)
    return [*dirs, *([backups] if backups else [])]


def _prepare(plan: ClusterPlan, image: str, shared: list[Obj]) -> Obj:
    """Init container making the state and archive directories on the shared filesystems, owned by slurm.

    Root only here, with the three capabilities making a directory and handing it over needs: the
    filesystem's root directory is root's. A filesystem that squashes root must have them made once by
    hand (docs/node-lifecycle.md says how); the script then only checks them.
    """
    return {
        "name": "state-dirs",
        "image": image,
        "command": [f"{vocab.SCRIPTS_DIR}/state.sh", "prepare", *_state_dirs(plan)],
        "securityContext": restricted(caps=("CHOWN", "FOWNER", "DAC_OVERRIDE")),
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [scripts_mount(), *shared],
    }


def _ha_placement(plan: ClusterPlan) -> Obj:
    """Two controllers never on one node (required) and, where the nodes span zones, not in one zone (preferred)."""
    selector = {"matchLabels": vocab.selector(COMPONENT)}
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": selector, "topologyKey": ZONE_LABEL}}
            ],
        }
    }


def state_volume() -> Obj:
    """The controller's own state claim as a pod volume."""
    return {"name": "state", "persistentVolumeClaim": {"claimName": vocab.CONTROLLER_STATE_CLAIM}}


def statefulsets(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> list[Obj]:
    """slurmctld: the primary's StatefulSet and, with controller.replicas: 2, the backup's (``slurmctld-standby``),
    state on its claim or on a shared filesystem, rolled (state kept) when the config changes.

    One StatefulSet each, so that a config change rolls the primary first: ``pulumi up`` updates the
    standby's only once the primary's is Ready again (slonk_infra.slurm_layer), and a StatefulSet of two
    would roll its highest ordinal, the backup, first. A primary back within ``takeoverSeconds`` is no
    failure (the backup takes control only after that long without an answer), so the change is served as
    soon as the new primary answers, in about its own stop and start; with the backup rolled first it
    waited for the backup's stop, its start and the 5 s a new backup sleeps before it answers
    (src/slurmctld/backup.c), about 10 s more. A config the primary cannot start with stops the update at
    the primary, whose pod restarts; the backup, on the old config, takes control after
    ``takeoverSeconds`` and serves until the config is mended.

    The primary keeps the StatefulSet and selector it always had (``slurmctld``, one replica now), so
    going from one controller to two, or from the earlier single StatefulSet of two, changes no immutable
    field: its ``slurmctld-1`` is removed as the StatefulSet goes to one replica, and the standby starts
    afterwards. The primary's selector matches the standby's pod too; the StatefulSet controller takes
    only pods it owns or unowned ones named as its own replicas (``slurmctld-N``), so it leaves that pod
    alone, and the standby's selector (with :data:`~slonk_infra.vocab.CONTROLLER_ROLE_LABEL`) never
    matches the primary's.
    """
    ha = plan.declaration.controller.replicas > 1
    primary = _statefulset(plan, files, inputs, naming.CONTROLLER, "primary" if ha else None)
    return [primary, _statefulset(plan, files, inputs, naming.CONTROLLER_STANDBY, "standby")] if ha else [primary]


def _statefulset(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs, name: str, role: str | None) -> Obj:
    """One controller's StatefulSet of one replica; ``role`` labels its pod when there are two."""
    ctl = plan.declaration.controller
    ha = ctl.replicas > 1
    image = plan.declaration.image.reference
    shared_volumes, shared = shared_mounts(plan)
    # Each pod is probed on its own daemon (with a backup, either one UP would pass "is UP"), over the
    # loopback: slurmctld.sh's copy of slurm.conf names this pod at 127.0.0.1 (vocab.SELF_CONF says why).
    ping = ["sh", "-c", f'SLURM_CONF={vocab.SELF_CONF} scontrol ping | grep -q "at $(hostname) is UP"']
    if ctl.state_storage:
        state_mount: Obj = {
            "name": f"shared-{ctl.state_storage}",
            "mountPath": vocab.STATE_DIR,
            "subPath": naming.state_subpath(plan.name),
        }
    else:
        state_mount = {"name": "state", "mountPath": vocab.STATE_DIR}
    backups = backups_dir(plan)
    container: Obj = {
        "name": "slurmctld",
        "image": image,
        "command": [f"{vocab.SCRIPTS_DIR}/slurmctld.sh"],
        "ports": [{"name": "slurmctld", "containerPort": vocab.SLURMCTLD_PORT}],
        "securityContext": restricted(run_as=vocab.SLURM_UID),
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
        # A config change rolls the controllers one at a time, each Ready before the next (StatefulSet
        # RollingUpdate), and kubelet probes only every periodSeconds: with 5 s / 10 s each step of a roll
        # waited up to that long after slurmctld was already answering. Short periods make a planned roll
        # as long as slurmctld's own start; a ping is one small RPC. Five minutes to start, as before.
        "startupProbe": {"exec": {"command": ping}, "periodSeconds": 1, "failureThreshold": 300},
        # With a backup, liveness is this daemon's port only: a controller is restarted for nothing but
        # its own port (the pings ask only this pod's slurmctld too: slurmctld.sh's copy of slurm.conf
        # names no other controller).
        "livenessProbe": {
            **({"tcpSocket": {"port": vocab.SLURMCTLD_PORT}} if ha else {"exec": {"command": ping}}),
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
        "readinessProbe": {"exec": {"command": ping}, "periodSeconds": 2, "timeoutSeconds": 10},
        "volumeMounts": [*common_mounts(), config_mount(), state_mount, *shared],
    }
    env: list[Obj] = []
    if backups:  # slurmctld.sh restores a requested archive before it starts the daemon
        env.append({"name": "SLONK_BACKUPS", "value": backups})
    if push_config_after_start(plan):  # before 23.11 slurmctld.sh pushes the files (push-config.sh)
        env.append({"name": "SLONK_PUSH_CONFIG", "value": "1"})
    accounting = plan.declaration.slurm.accounting
    if accounting is not None and accounting.database.kind != "external":  # slurmctld.sh waits for slurmdbd
        env.append({"name": "SLONK_AWAIT_SLURMDBD", "value": "1"})
    if env:
        container["env"] = env
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=vocab.control_priority(plan.namespace),
        fs_group=vocab.SLURM_UID,
        containers=[container],
        volumes=[
            *common_volumes(),
            config_volume(jwt_key=plan.declaration.slurm.rest_api),
            *([] if ctl.state_storage else [state_volume()]),
            *shared_volumes,
        ],
    )
    if _state_dirs(plan):
        pod_spec["initContainers"] = [_prepare(plan, image, shared), *pod_spec.get("initContainers", [])]
    if inputs.system_selector:
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    # One replica each, so the pod management policy changes nothing; Parallel is what the primary's
    # StatefulSet was created with (when it held both controllers), and the field cannot change on a live
    # StatefulSet.
    spec: Obj = {"serviceName": naming.CONTROLLER, "replicas": 1, "podManagementPolicy": "Parallel"}
    if ha:
        pod_spec["affinity"] = _ha_placement(plan)
    role_label = {vocab.CONTROLLER_ROLE_LABEL: role} if role else {}
    # The primary's selector is the one it was created with (immutable); the standby's carries its role.
    selector = vocab.selector(COMPONENT, **(role_label if name != naming.CONTROLLER else {}))
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(name, plan.namespace, COMPONENT),
        "spec": {
            **spec,
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {
                    "labels": vocab.labels(COMPONENT, **role_label),
                    "annotations": {vocab.CONFIG_HASH: config_hash(files)},
                },
                "spec": pod_spec,
            },
        },
    }
