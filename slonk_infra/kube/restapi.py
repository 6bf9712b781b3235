"""slurmrestd, when the declaration asks for it: a Deployment and its Service.

Clients authenticate with JWTs slurmctld issues; slurmrestd runs as its own unprivileged user.
"""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.catalog.slurm_versions import restd_slurmctld_plugins
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import Obj, config_hash, config_mount, config_volume, meta, restricted, slurm_pod_spec
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import SlurmFiles

COMPONENT = vocab.RESTAPI_COMPONENT


def service(plan: ClusterPlan) -> Obj:
    """The REST API inside the cluster (HTTP; every request carries a JWT)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(vocab.RESTAPI, plan.namespace, COMPONENT),
        "spec": {
            "selector": vocab.selector(COMPONENT),
            "ports": [{"name": "http", "port": vocab.SLURMRESTD_PORT, "targetPort": vocab.SLURMRESTD_PORT}],
        },
    }


def _env(plan: ClusterPlan) -> list[Obj]:
    env: list[Obj] = [
        # daemon mode: each request carries the user's JWT, checked by slurmctld.
        {"name": "SLURM_JWT", "value": "daemon"},
        # slurmrestd unshares its System V semaphores and file table at start and exits when it cannot
        # ("Unable to unshare System V namespace"). containerd's RuntimeDefault seccomp filter (GKE, EKS)
        # allows unshare only with CAP_SYS_ADMIN, which this container does not get; its own IPC namespace
        # and a process of its own already keep what those calls would.
        {"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_sysv,disable_unshare_files"},
    ]
    plugins = None if plan.declaration.slurm.accounting else restd_slurmctld_plugins(plan.slurm_version)
    if plugins:
        # Without slurmdbd, an older slurmrestd exits at start on its slurmdbd plugins (catalog/slurm_versions.py).
        env.append({"name": "SLURMRESTD_OPENAPI_PLUGINS", "value": ",".join(plugins)})
    return env


def deployment(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs | None = None) -> Obj:
    """One slurmrestd replica: stateless, it reads slurm.conf and asks slurmctld. slurmrestd reads
    slurm.conf once, at start, so the config hash rolls it with the controller and login pods."""
    probe = {"tcpSocket": {"port": vocab.SLURMRESTD_PORT}, "periodSeconds": 10}
    container: Obj = {
        "name": "slurmrestd",
        "image": plan.declaration.image.reference,
        # Under catatonit: slurmrestd catches SIGINT but not SIGTERM, and as a container's PID 1 an uncaught
        # signal does nothing, so every roll waited out the 30-s grace period and a SIGKILL.
        "command": ["catatonit", "--", "slurmrestd", f"0.0.0.0:{vocab.SLURMRESTD_PORT}"],
        "env": _env(plan),
        "ports": [{"name": "http", "containerPort": vocab.SLURMRESTD_PORT}],
        "securityContext": restricted(run_as=vocab.SLURMRESTD_UID),
        "resources": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        },
        "readinessProbe": probe,
        "livenessProbe": probe,
        # SIGTERM now ends slurmrestd at once, while kube-proxy / the dataplane drops the endpoint a moment
        # later: a few seconds of serving first, so a roll refuses no client's request.
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
        "volumeMounts": [config_mount()],
    }
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=vocab.control_priority(plan.namespace),
        containers=[container],
        volumes=[config_volume()],
        munged=False,
    )
    if inputs is not None and inputs.system_selector:
        # On the system nodes, like the controller and login: on a worker node it would take what the
        # worker's request leaves, and its class (above the workers') could preempt a Slurm worker.
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(vocab.RESTAPI, plan.namespace, COMPONENT),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": vocab.selector(COMPONENT)},
            "template": {
                "metadata": {"labels": vocab.labels(COMPONENT), "annotations": {vocab.CONFIG_HASH: config_hash(files)}},
                "spec": pod_spec,
            },
        },
    }


def rest_api(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs | None = None) -> list[Obj]:
    """The Service and Deployment of slurmrestd, or nothing when the declaration does not ask for it."""
    if not plan.declaration.slurm.rest_api:
        return []
    return [service(plan), deployment(plan, files, inputs)]
