"""SlurmCluster: the Kubernetes half of the system as one component resource."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_random as random
import pulumi_tls as tls

from slonk_infra import tokens, vocab
from slonk_infra.binding import CloudResult
from slonk_infra.kube.inputs import ClusterKeys, from_cloud
from slonk_infra.kube.manifests import ClusterIPOf, build_manifests
from slonk_infra.kube.worker import SKIP_AWAIT
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm import SlurmFiles, render_slurm_files
from slonk_infra.slurm_layer.kube_objects import declare

# Objects whose loss loses data: shared filesystems' volumes and claims, the controller's state claim.
STATEFUL_KINDS = frozenset({"PersistentVolume", "PersistentVolumeClaim"})
# Objects of these components whose loss loses data though their kind is not stateful: the in-cluster
# accounting database's StatefulSet, whose claim template holds the job records (the claim itself is
# retained by Kubernetes, persistentVolumeClaimRetentionPolicy Retain; protecting the StatefulSet keeps
# Pulumi from replacing it, which would restart the database, or deleting it).
STATEFUL_COMPONENTS = frozenset({vocab.ACCOUNTING_DATABASE_COMPONENT})
# Kinds pulumi-kubernetes waits on until they are ready (their pods Ready, a Service's endpoints and load
# balancer address); a CronJob, a claim or a ConfigMap is done once the API server has it.
AWAITED_KINDS = frozenset({"StatefulSet", "Deployment", "DaemonSet", "Service"})
# How long an awaited object of the layer may take to become ready, against the provider's 10 minutes:
# its pods start only once their system node has pulled the image (the CUDA image is several GB) and the
# shared filesystem is mounted.
AWAIT_TIMEOUT = "30m"


def awaited(obj: dict[str, Any]) -> bool:
    """Whether ``pulumi up`` waits for ``obj`` to be ready: an awaited kind without ``pulumi.com/skipAwait``.

    Everything the layer awaits (controller, login, slurmrestd, an NFS server, the operations controller,
    the Services in front of them) runs on the system nodes; the worker StatefulSets and their Service,
    whose readiness waits for GPU and TPU capacity, skip the wait (:mod:`slonk_infra.kube.worker`).
    """
    annotations = obj["metadata"].get("annotations") or {}
    return obj["kind"] in AWAITED_KINDS and str(annotations.get(SKIP_AWAIT, "")).lower() != "true"


def system_dependencies(cloud: CloudResult) -> list[pulumi.Resource]:
    """What the awaited objects need before their wait can succeed: the system node pool / node group
    their pods select, and every shared filesystem they mount (a Filestore takes minutes to create).

    The system nodes come from ``cloud.system_nodes`` (see docs/readiness.md); on local there are none
    and the wait starts as soon as the namespace exists.
    """
    nodes: Sequence[pulumi.Resource] = cloud.system_nodes
    volumes = [d for v in cloud.volumes.values() for d in v.depends_on]
    return [*nodes, *volumes]


def mounted_config_maps(obj: dict[str, Any]) -> list[str]:
    """The ConfigMaps a workload's pods mount, where its template carries their config hash: what must be
    updated before it. A pod rolled for a new config is made while the ConfigMap may still hold the old one
    (Pulumi updates the two side by side otherwise), and a controller copies its files once per pod
    (slurmctld.sh), so it would keep the old ones until its next roll."""
    if obj["kind"] not in ("StatefulSet", "Deployment"):
        return []
    template = obj["spec"]["template"]
    if vocab.CONFIG_HASH not in (template["metadata"].get("annotations") or {}):
        return []
    names: list[str] = []
    for volume in template["spec"].get("volumes", []):
        sources = [volume] + [s for s in (volume.get("projected") or {}).get("sources", [])]
        names += [s["configMap"]["name"] for s in sources if "configMap" in s]
    return sorted(set(names))


def stateful(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` holds data: protected in Pulumi and kept in the cluster when removed from the stack."""
    labels = obj["metadata"].get("labels") or {}
    return obj["kind"] in STATEFUL_KINDS or labels.get(vocab.COMPONENT) in STATEFUL_COMPONENTS


def database_password(name: str, plan: ClusterPlan, parent: pulumi.Resource) -> pulumi.Output[str] | None:
    """The in-cluster accounting database's password (``kind: in-cluster``), made once and protected: a new
    one would lock slurmdbd out of the database whose user still has the old one. None for other kinds
    (a cloud database's password is the cloud layer's; an external slurmdbd's is not ours)."""
    accounting = plan.declaration.slurm.accounting
    if accounting is None or accounting.database.kind != "in-cluster":
        return None
    password = random.RandomPassword(
        f"{name}-accounting-database-password",
        length=vocab.DATABASE_PASSWORD_LENGTH,
        special=True,
        override_special=vocab.DATABASE_PASSWORD_SPECIALS,
        opts=pulumi.ResourceOptions(parent=parent, protect=True),
    )
    return password.result


def _resolve(value: Any, services: dict[str, pulumi.CustomResource]) -> Any:
    """Replace ClusterIPOf markers with the Service's ClusterIP output."""
    if isinstance(value, ClusterIPOf):
        return services[value.service].spec.apply(lambda s: s.cluster_ip)  # type: ignore[attr-defined]
    if isinstance(value, dict):
        return {k: _resolve(v, services) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, services) for v in value]
    return value


def _b64(text: str | None) -> str | None:
    """Secret ``data`` form of a text output (None while it is unknown, as under the offline runner)."""
    return base64.b64encode(text.encode()).decode() if text is not None else None


class SlurmCluster(pulumi.ComponentResource):
    """Namespace, RBAC, ConfigMaps, the munge key Secret, Services, NetworkPolicies, PriorityClasses,
    shared-storage volumes and the controller / login / worker StatefulSets of one Slurm cluster.

    Cloud-agnostic: everything cloud-specific arrives in ``cloud`` (a :class:`CloudResult`).
    """

    files: SlurmFiles
    munge_key: pulumi.Output[str]
    objects: dict[str, pulumi.CustomResource]

    def __init__(
        self, name: str, plan: ClusterPlan, cloud: CloudResult, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(tokens.SLURM_CLUSTER, name, None, opts)
        self.files = render_slurm_files(plan)
        accounting = plan.declaration.slurm.accounting
        if accounting is not None and accounting.database.kind == "cloud" and cloud.accounting_database is None:
            # Rendered without a cloud layer (tests): the Secret gets a placeholder host, which the slurmdbd
            # pod refuses at start by name (slonk_infra/kube/accounting.py).
            pulumi.log.warn(
                "slurm.accounting.database.kind: cloud: the cloud layer handed over no database "
                "(CloudResult.accounting_database); slurmdbd's pod will refuse to start",
                resource=self,
            )
        # The key lives in state as a secret and in the cluster as a Secret; protected because a new key
        # would lock every running daemon out of the others.
        munge = random.RandomBytes(
            f"{name}-munge-key", length=1024, opts=pulumi.ResourceOptions(parent=self, protect=True)
        )
        jwt = None
        if plan.declaration.slurm.rest_api:
            jwt = random.RandomBytes(
                f"{name}-jwt-key", length=32, opts=pulumi.ResourceOptions(parent=self, protect=True)
            )
        # The login pods' SSH host key: made once and protected, so users' known_hosts entries stay valid
        # across login restarts and updates.
        host_key = tls.PrivateKey(
            f"{name}-login-host-key", algorithm="ED25519", opts=pulumi.ResourceOptions(parent=self, protect=True)
        )
        keys = ClusterKeys(
            munge_key_b64=munge.base64,
            login_host_key_b64=host_key.private_key_openssh.apply(_b64),
            jwt_key_b64=jwt.base64 if jwt else None,
            database_password=database_password(name, plan, self),
        )
        inputs = from_cloud(cloud, keys)
        manifests = build_manifests(plan, self.files, inputs)
        base = pulumi.ResourceOptions(parent=self, provider=cloud.provider)
        self.objects = {}
        services: dict[str, pulumi.CustomResource] = {}
        namespace: pulumi.CustomResource | None = None
        after_system = system_dependencies(cloud)
        for obj in manifests:
            kind, meta = obj["kind"], obj["metadata"]
            depends: list[pulumi.Resource] = [namespace] if namespace and "namespace" in meta else []
            timeouts: pulumi.CustomTimeouts | None = None
            if kind == "PersistentVolume":
                depends += [d for v in cloud.volumes.values() for d in v.depends_on]
            elif awaited(obj):
                # Its wait starts once what its pods need exists, so the wait measures the pods alone.
                depends += after_system
                timeouts = pulumi.CustomTimeouts(create=AWAIT_TIMEOUT, update=AWAIT_TIMEOUT)
            slurmdbd = self.objects.get(f"Deployment/{vocab.SLURMDBD}")
            if kind == "StatefulSet" and meta["name"] == naming.CONTROLLER and slurmdbd is not None:
                # slurmctld after slurmdbd is Ready: Slurm's upgrade order (slurmdbd first, then slurmctld:
                # https://slurm.schedmd.com/upgrades.html), and on a first deploy slurmctld 22.05 exits when
                # slurmdbd does not answer at its start.
                depends.append(slurmdbd)
            depends += [
                self.objects[f"ConfigMap/{n}"] for n in mounted_config_maps(obj) if f"ConfigMap/{n}" in self.objects
            ]
            primary = self.objects.get(f"StatefulSet/{naming.CONTROLLER}")
            if kind == "StatefulSet" and meta["name"] == naming.CONTROLLER_STANDBY and primary is not None:
                # The backup after the primary is Ready: a config change is served once the new primary
                # answers, and one the primary cannot start with stops here, the backup still on the
                # old config (slonk_infra.kube.controller.statefulsets).
                depends.append(primary)
            is_stateful = stateful(obj)
            opts_i = pulumi.ResourceOptions.merge(
                base,
                pulumi.ResourceOptions(
                    depends_on=depends, protect=is_stateful, retain_on_delete=is_stateful, custom_timeouts=timeouts
                ),
            )
            res = declare(f"{name}-{kind.lower()}-{meta['name']}", _resolve(obj, services), opts_i)
            self.objects[f"{kind}/{meta['name']}"] = res
            if kind == "Namespace":
                namespace = res
            elif kind == "Service":
                services[meta["name"]] = res
        self.munge_key = pulumi.Output.secret(munge.base64)
        self.register_outputs({"namespace": plan.namespace, "objects": len(self.objects)})
