"""Login pods: their StatefulSet (sshd with the Slurm client config and the shared home) and SSH Service."""

from __future__ import annotations

from slonk_infra import naming
from slonk_infra.kube import names
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
)
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import SlurmFiles, paths

COMPONENT = names.LOGIN_COMPONENT
SSH_PORT = 22
# sshd starts as root to switch to each user; only the capabilities it needs for that.
SSHD_CAPABILITIES = ("CHOWN", "SETUID", "SETGID", "SYS_CHROOT", "AUDIT_WRITE", "NET_BIND_SERVICE", "KILL")


def service(plan: ClusterPlan) -> Obj:
    """SSH to the login pods, of the Service type the declaration asks for (LoadBalancer, ClusterIP...)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(naming.LOGIN, plan.namespace, COMPONENT),
        "spec": {
            "type": plan.declaration.login.service_type,
            "selector": names.selector(COMPONENT),
            "ports": [{"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT}],
        },
    }


def statefulset(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> Obj:
    """Login pods: sshd with the Slurm client config and the shared home."""
    image = plan.declaration.image.reference
    shared_volumes, shared = shared_mounts(plan)
    ssh_probe = {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 10}
    container: Obj = {
        "name": "login",
        "image": image,
        "command": [f"{paths.SCRIPTS_DIR}/login.sh"],
        "ports": [{"name": "ssh", "containerPort": SSH_PORT}],
        "securityContext": restricted(caps=SSHD_CAPABILITIES),
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        "livenessProbe": ssh_probe,
        "readinessProbe": ssh_probe,
        "volumeMounts": [*common_mounts(), config_mount(), *shared],
    }
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=names.control_priority(plan.namespace),
        containers=[container],
        volumes=[*common_volumes(), config_volume(), *shared_volumes],
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
            "selector": {"matchLabels": names.selector(COMPONENT)},
            "template": {
                "metadata": {"labels": names.labels(COMPONENT), "annotations": {names.CONFIG_HASH: config_hash(files)}},
                "spec": pod_spec,
            },
        },
    }
