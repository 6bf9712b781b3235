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
    shared_mounts,
    slurm_pod_spec,
)
from slonk_infra.kube.storage import block_claim
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm import SlurmFiles

COMPONENT = vocab.CONTROLLER_COMPONENT


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


def state_claim(plan: ClusterPlan) -> Obj:
    """slurmctld's state volume: a claim of its own so deleting the StatefulSet never deletes it."""
    spec, notes = block_claim(plan, plan.declaration.controller.state_gib)
    metadata = meta(vocab.CONTROLLER_STATE_CLAIM, plan.namespace, COMPONENT)
    if notes:
        metadata["annotations"] = notes
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def statefulset(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs) -> Obj:
    """slurmctld: one replica, state on its claim, rolled (state kept) when the config changes."""
    image = plan.declaration.image.reference
    shared_volumes, shared = shared_mounts(plan)
    ping = ["sh", "-c", "scontrol ping | grep -q 'is UP'"]
    container: Obj = {
        "name": "slurmctld",
        "image": image,
        "command": [f"{vocab.SCRIPTS_DIR}/slurmctld.sh"],
        "ports": [{"name": "slurmctld", "containerPort": vocab.SLURMCTLD_PORT}],
        "securityContext": restricted(run_as=vocab.SLURM_UID),
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
        "startupProbe": {"exec": {"command": ping}, "periodSeconds": 5, "failureThreshold": 60},
        "livenessProbe": {
            "exec": {"command": ping},
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
        "readinessProbe": {"exec": {"command": ping}, "periodSeconds": 10, "timeoutSeconds": 10},
        "volumeMounts": [
            *common_mounts(),
            config_mount(),
            {"name": "state", "mountPath": vocab.STATE_DIR},
            *shared,
        ],
    }
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=vocab.control_priority(plan.namespace),
        fs_group=vocab.SLURM_UID,
        containers=[container],
        volumes=[
            *common_volumes(),
            config_volume(jwt_key=plan.declaration.slurm.rest_api),
            {"name": "state", "persistentVolumeClaim": {"claimName": vocab.CONTROLLER_STATE_CLAIM}},
            *shared_volumes,
        ],
    )
    if inputs.system_selector:
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(naming.CONTROLLER, plan.namespace, COMPONENT),
        "spec": {
            "serviceName": naming.CONTROLLER,
            "replicas": 1,
            "selector": {"matchLabels": vocab.selector(COMPONENT)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": vocab.labels(COMPONENT), "annotations": {vocab.CONFIG_HASH: config_hash(files)}},
                "spec": pod_spec,
            },
        },
    }
