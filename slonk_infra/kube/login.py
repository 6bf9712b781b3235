"""Login pods: their StatefulSet (sshd with the Slurm client config and the shared home) and SSH Service."""

from __future__ import annotations

from pathlib import PurePosixPath

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
    shared_mounts,
    slurm_pod_spec,
    sudoers_mount,
    sudoers_volume,
)
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm import SlurmFiles

COMPONENT = vocab.LOGIN_COMPONENT
SSH_PORT = 22
# sshd starts as root to switch to each user; only the capabilities it needs for that.
SSHD_CAPABILITIES = ("CHOWN", "SETUID", "SETGID", "SYS_CHROOT", "AUDIT_WRITE", "NET_BIND_SERVICE", "KILL")


def service(plan: ClusterPlan) -> Obj:
    """SSH to the login pods, of the Service type the declaration asks for (LoadBalancer, ClusterIP...)."""
    spec: Obj = {
        "type": plan.declaration.login.service_type,
        "selector": vocab.selector(COMPONENT),
        "ports": [{"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT}],
    }
    # Resolved by the plan: the declared ranges, else the target's default.
    if plan.login_source_ranges is not None:
        spec["loadBalancerSourceRanges"] = list(plan.login_source_ranges)
    metadata = meta(naming.LOGIN, plan.namespace, COMPONENT)
    # From the target, through the plan: private ranges only make an internal load balancer (an
    # internet-facing one sees public client addresses, which private ranges never admit).
    if plan.login_service_annotations:
        metadata["annotations"] = dict(plan.login_service_annotations)
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def statefulset(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> Obj:
    """Login pods: sshd with the Slurm client config and the shared home."""
    image = plan.declaration.image.reference
    shared_volumes, shared = shared_mounts(plan)
    ssh_probe = {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 10}
    container: Obj = {
        "name": "login",
        "image": image,
        "command": [f"{vocab.SCRIPTS_DIR}/login.sh"],
        "ports": [{"name": "ssh", "containerPort": SSH_PORT}],
        "securityContext": restricted(caps=SSHD_CAPABILITIES),
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        "livenessProbe": ssh_probe,
        "readinessProbe": ssh_probe,
        "volumeMounts": [
            *common_mounts(),
            config_mount(),
            *shared,
            {"name": "host-keys", "mountPath": str(PurePosixPath(vocab.LOGIN_HOST_KEY).parent), "readOnly": True},
            sudoers_mount(),
        ],
    }
    if any(u.sudo for u in plan.declaration.users):
        # sudo is a setuid program, which no_new_privs (allowPrivilegeEscalation: false) disarms.
        container["securityContext"]["allowPrivilegeEscalation"] = True
    # The host key of every login pod, created once (the component protects it): clients keep
    # trusting the login Service across restarts; sshd wants it readable by root only.
    host_keys = {"name": "host-keys", "secret": {"secretName": vocab.LOGIN_HOST_KEYS_SECRET, "defaultMode": 0o600}}
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=vocab.control_priority(plan.namespace),
        containers=[container],
        volumes=[*common_volumes(), config_volume(), *shared_volumes, host_keys, sudoers_volume()],
    )
    if inputs.system_selector:
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(naming.LOGIN, plan.namespace, COMPONENT),
        "spec": {
            "serviceName": naming.LOGIN,
            "replicas": plan.declaration.login.replicas,
            "selector": {"matchLabels": vocab.selector(COMPONENT)},
            "template": {
                "metadata": {"labels": vocab.labels(COMPONENT), "annotations": {vocab.CONFIG_HASH: config_hash(files)}},
                "spec": pod_spec,
            },
        },
    }
