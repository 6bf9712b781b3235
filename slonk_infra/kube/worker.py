"""Workers: one StatefulSet per worker group (pod N is Slurm node ``<group>-N``) and one headless Service
for all of them.

A worker pod requests what the node's budget leaves slurmd (:mod:`slonk_infra.plan.capacity`), and
carries its machine's fabric wiring (:mod:`slonk_infra.kube.fabric`: GPU NIC annotations, the TCPXO
sidecar, the NCCL plugin's libraries and environment, EFA interfaces) and, on a multi-host TPU slice,
the variables its hosts find each other by.
"""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.kube.fabric import TASK_ENV, FabricPodParts, fabric_pod_parts, tpu_forwarded, tpu_worker_env
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import (
    Obj,
    common_mounts,
    common_volumes,
    meta,
    privileged,
    shared_mounts,
    slurm_pod_spec,
    sudoers_mount,
    sudoers_volume,
    tolerations,
)
from slonk_infra.plan import ClusterPlan, WorkerGroup, naming

COMPONENT = vocab.WORKER_COMPONENT
# pulumi-kubernetes' per-object switch off its await logic (pulumi/pulumi-kubernetes#417): "true" skips
# the readiness wait on create and update (and the wait on delete). Worker StatefulSets and their headless
# Service are ready only when the machines are: a GPU pool may take 40 minutes, a reservation or Capacity
# Block may not be active yet. Awaited, they failed `pulumi up` after the provider's 10 minutes
# (docs/readiness.md says how to watch them instead: `slonk-infra status`).
SKIP_AWAIT = "pulumi.com/skipAwait"
# The cluster autoscaler never evicts a pod carrying this (its FAQ, "What types of pods can prevent CA from
# removing a node?"): an autoscaler a site adds must not take a worker whose Slurm node may run a job.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# A TPU VM's runtime talks to the other hosts of its slice on these ports (GKE multi-host TPU examples).
TPU_HOST_PORTS = (8471, 8431)
WORKER_GRACE_SECONDS = 300
# The preStop drain must end before the grace period does, leaving a minute to requeue and stop.
DRAIN_SECONDS = WORKER_GRACE_SECONDS - 60


def service(plan: ClusterPlan) -> Obj:
    """One headless Service for every worker StatefulSet: DNS for all nodes, one object."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**meta(naming.WORKERS_SERVICE, plan.namespace, COMPONENT), "annotations": {SKIP_AWAIT: "true"}},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": vocab.selector(COMPONENT),
            "ports": [{"name": "slurmd", "port": vocab.SLURMD_PORT, "targetPort": vocab.SLURMD_PORT}],
        },
    }


def worker_resources(group: WorkerGroup, fabric: FabricPodParts | None = None) -> Obj:
    """Requests equal to what Slurm schedules on the node; accelerator (and EFA) limits equal to the node's.

    CPU and memory are the node budget's share for slurmd: with the sidecars and the node's system
    pods they fit the node's allocatable, as the cloud's node model computes it.
    """
    shape = group.shape
    out: Obj = {"requests": {"cpu": str(shape.cpus), "memory": f"{shape.real_memory_mib}Mi"}}
    extended = dict(fabric.resources) if fabric else {}
    if group.kube_resource:
        extended[group.kube_resource] = str(group.gres_count)
    if extended:
        out["requests"].update(extended)
        out["limits"] = dict(extended)
    return out


def task_env(plan: ClusterPlan, group: WorkerGroup, fabric: FabricPodParts) -> list[Obj]:
    """The fabric's and the TPU slice's variables, and the list of those every job task must see."""
    env = [*fabric.env, *tpu_worker_env(group.name, group.replicas if group.kind == "tpu" else 0, plan.namespace)]
    exported = [e["name"] for e in env if e["name"] in fabric.task_env_names or e["name"].startswith("TPU_")]
    if group.kind == "tpu":
        # What the TPU device plugin set on the container (TPU_* is a prefix slurmd.sh expands there).
        exported += [name for name in tpu_forwarded() if name not in exported]
    if exported:
        env.append({"name": TASK_ENV, "value": ",".join(exported)})
    return env


def _slurmd(plan: ClusterPlan, group: WorkerGroup, shared: list[Obj], fabric: FabricPodParts) -> Obj:
    """The slurmd container: registers with the controller, drains itself before it stops."""
    slurmd_up = ["scontrol", "show", "slurmd"]
    container: Obj = {
        "name": "slurmd",
        "image": plan.declaration.image.reference,
        "command": [f"{vocab.SCRIPTS_DIR}/slurmd.sh"],
        "env": [
            # Every controller, primary first: slurmd and the pod's client commands try them in order.
            {
                "name": "SLONK_CONTROLLER",
                "value": ",".join(naming.controller_hosts(plan.namespace, plan.declaration.controller.replicas)),
            },
            {"name": "SLONK_DRAIN_SECONDS", "value": str(DRAIN_SECONDS)},
            # slurmd.sh sets the node's NodeAddr to this, so a replaced pod is reached at its new IP.
            {"name": "SLONK_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *task_env(plan, group, fabric),
        ],
        "ports": [{"name": "slurmd", "containerPort": vocab.SLURMD_PORT}],
        # Privileged because slurmd creates a cgroup per job under /sys/fs/cgroup and confines each job
        # to its GPUs with a device eBPF program; Kubernetes mounts cgroupfs read-only and forbids BPF
        # for any unprivileged container, and no capability set short of this grants both.
        "securityContext": privileged(),
        "resources": worker_resources(group, fabric),
        "lifecycle": {"preStop": {"exec": {"command": [f"{vocab.SCRIPTS_DIR}/drain.sh"]}}},
        "startupProbe": {"exec": {"command": slurmd_up}, "periodSeconds": 5, "failureThreshold": 60},
        "livenessProbe": {
            "exec": {"command": slurmd_up},
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
        # Ready while slurmd answers locally: no RPC to slurmctld from every worker every period (sinfo
        # here was a full node table per worker every 15 s, some 300 RPC/s at 4,608 nodes). Whether the
        # node takes jobs is Slurm's business (drain, health check), not the Service's.
        "readinessProbe": {"exec": {"command": slurmd_up}, "periodSeconds": 15, "timeoutSeconds": 10},
        "volumeMounts": [
            *common_mounts(),
            {"name": "spool", "mountPath": vocab.SLURMD_SPOOL},
            {"name": "dshm", "mountPath": "/dev/shm"},
            sudoers_mount(),
            *shared,
            *fabric.mounts,
        ],
    }
    if group.kind == "tpu" and group.replicas > 1:
        container["ports"] += [{"name": f"tpu-{p}", "containerPort": p, "hostPort": p} for p in TPU_HOST_PORTS]
    return container


def statefulset(plan: ClusterPlan, group: WorkerGroup, inputs: KubeInputs) -> Obj:
    """One StatefulSet per worker group: pod N is Slurm node ``<group>-N``; never restarted by config."""
    shared_volumes, shared = shared_mounts(plan)
    fabric = fabric_pod_parts(group.machine)
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=vocab.worker_priority(plan.namespace),
        grace_seconds=WORKER_GRACE_SECONDS,
        tolerate=tolerations(group),
        containers=[_slurmd(plan, group, shared, fabric), *fabric.containers],
        volumes=[
            *common_volumes(),
            {"name": "spool", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            sudoers_volume(),
            *shared_volumes,
            *fabric.volumes,
        ],
    )
    if inputs.pin_to_pools:
        pod_spec["nodeSelector"] = group.node_selector
        # One worker per node: a Slurm node is a whole Kubernetes node.
        pod_spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": vocab.selector(COMPONENT)},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    group_label = {vocab.GROUP_LABEL: group.name}
    template_meta: Obj = {"labels": vocab.labels(COMPONENT, **group_label)}
    annotations = {**fabric.annotations, SAFE_TO_EVICT: "false"}
    if fabric.note:
        annotations[vocab.FABRIC_NOTE] = fabric.note
    template_meta["annotations"] = annotations
    metadata = meta(naming.statefulset(group.name), plan.namespace, COMPONENT, **group_label)
    metadata["annotations"] = {SKIP_AWAIT: "true"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "serviceName": naming.WORKERS_SERVICE,
            "replicas": group.replicas,
            "podManagementPolicy": "Parallel",
            # OnDelete: no config or image change restarts a pod that may be running jobs.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": vocab.selector(COMPONENT, **group_label)},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }
