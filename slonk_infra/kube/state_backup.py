"""Scheduled archives of slurmctld's state: a CronJob that tars StateSaveLocation onto a shared filesystem.

The job reads the state where the controller keeps it: on the shared filesystem (controller.stateStorage),
or on the controller's own ReadWriteOnce claim, which a second pod can mount only on the same node, so the
job is then placed beside the controller pod. It runs as the slurm user with no capabilities and opens no
connection; the controller's init container made the archive directory (slurm's, mode 0700).
"""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.kube.controller import COMPONENT, backups_dir, state_volume
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import Obj, meta, restricted, scripts_mount, scripts_volume, shared_mounts
from slonk_infra.plan import ClusterPlan, naming

NAME = f"{naming.CONTROLLER}-backup"
# Where the job sees the state: read-only, so a backup can never change what it copies.
SOURCE = "/state"


def cronjob(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """The backup CronJob, or nothing without ``controller.backup``."""
    ctl = plan.declaration.controller
    backups = backups_dir(plan)
    if ctl.backup is None or backups is None:
        return []
    shared_volumes, shared = shared_mounts(plan)
    if ctl.state_storage:
        source: Obj = {
            "name": f"shared-{ctl.state_storage}",
            "mountPath": SOURCE,
            "subPath": naming.state_subpath(plan.name),
            "readOnly": True,
        }
        volumes = [scripts_volume(), *shared_volumes]
    else:
        source = {"name": "state", "mountPath": SOURCE, "readOnly": True}
        volumes = [scripts_volume(), state_volume(), *shared_volumes]
    container: Obj = {
        "name": "backup",
        "image": plan.declaration.image.reference,
        "command": [f"{vocab.SCRIPTS_DIR}/state.sh", "backup", SOURCE, backups, str(ctl.backup.keep)],
        # Writes only to the archive directory: the image's own filesystem stays read-only.
        "securityContext": {**restricted(run_as=vocab.SLURM_UID), "readOnlyRootFilesystem": True},
        # A batch job, unlike the daemons: a CPU limit only makes it take longer.
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "volumeMounts": [scripts_mount(), source, *shared],
    }
    pod: Obj = {
        "serviceAccountName": vocab.SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "priorityClassName": vocab.control_priority(plan.namespace),
        "restartPolicy": "Never",
        "securityContext": {"fsGroup": vocab.SLURM_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if inputs.system_selector:
        pod["nodeSelector"] = dict(inputs.system_selector)
    if not ctl.state_storage:
        # A ReadWriteOnce volume is attached to one node at a time: the job must run where the controller runs.
        pod["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": vocab.selector(COMPONENT)},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": meta(NAME, plan.namespace, vocab.STATE_BACKUP_COMPONENT),
            "spec": {
                "schedule": ctl.backup.schedule,
                "timeZone": "Etc/UTC",
                # One archive at a time; a run that could not start within 10 minutes is skipped, not stacked.
                "concurrencyPolicy": "Forbid",
                "startingDeadlineSeconds": 600,
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 3,
                "jobTemplate": {
                    "metadata": {"labels": vocab.labels(vocab.STATE_BACKUP_COMPONENT)},
                    "spec": {
                        "backoffLimit": 2,
                        "activeDeadlineSeconds": 3600,
                        "template": {"metadata": {"labels": vocab.labels(vocab.STATE_BACKUP_COMPONENT)}, "spec": pod},
                    },
                },
            },
        }
    ]
