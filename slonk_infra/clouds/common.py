"""Pieces every cloud adapter shares: the component base, taints, storage selection, kubeconfigs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from slonk_infra import vocab
from slonk_infra.binding import AccountingDatabase, CloudResult
from slonk_infra.clouds import rules
from slonk_infra.declaration.model import StorageSpec, Taint
from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.vocab import SYSTEM_ROLE, SYSTEM_ROLE_LABEL

# Node pool / node group that runs slurmctld and the login pods. Worker groups are named after
# the declaration's pools; the "slonk-" prefix keeps this one out of their way.
SYSTEM_POOL = naming.SYSTEM_POOL
SYSTEM_LABELS: dict[str, str] = {SYSTEM_ROLE_LABEL: SYSTEM_ROLE}

# Storage kinds the Kubernetes layer provisions itself; adapters create nothing for them on any cloud.
KUBERNETES_STORAGE = rules.KUBERNETES_STORAGE

# GKE and EKS spell taint effects the same way, and differently from Kubernetes.
_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def cloud_effect(taint: Taint) -> str:
    """The GKE / EKS enum spelling of a Kubernetes taint effect (``NoSchedule`` -> ``NO_SCHEDULE``)."""
    return _EFFECTS[taint.effect]


def cloud_storage(plan: ClusterPlan) -> list[StorageSpec]:
    """Storage entries the cloud adapter creates: all but the kinds the Kubernetes layer provisions.

    ``build_plan`` already refused kinds the declared target does not offer.
    """
    return [vol for vol in plan.declaration.storage if vol.kind not in KUBERNETES_STORAGE]


def exec_kubeconfig(cluster: str, server: str, ca_data: str, exec_config: Mapping[str, Any]) -> str:
    """A one-context kubeconfig (JSON, which is YAML) whose user authenticates through an exec plugin.

    No credential is stored: the plugin (``gke-gcloud-auth-plugin``, ``aws eks get-token``) mints a
    short-lived token from the deployer's own cloud login each time the provider connects.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
        "preferences": {},
        "users": [{"name": cluster, "user": {"exec": dict(exec_config)}}],
    }
    return json.dumps(config, sort_keys=True)


def existing_cluster_provider(name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions) -> k8s.Provider:
    """A Kubernetes provider for a cluster this program does not create (the plan's ``kubernetes`` settings).

    Both settings are optional: without ``kubeconfig`` the provider reads ``$KUBECONFIG`` or
    ``~/.kube/config`` on the deployer's machine; without ``context`` it uses the current one. The
    path is passed on verbatim, so the stack does not record where one person keeps the file. Either may
    be a Pulumi Output of the program (another stack's kubeconfig), which the provider receives as is.
    """
    spec = plan.declaration.kubernetes
    return k8s.Provider(
        name,
        k8s.ProviderArgs(kubeconfig=plan.pulumi_input(spec.kubeconfig), context=plan.pulumi_input(spec.context)),
        opts=opts,
    )


def concat(*parts: pulumi.Input[str]) -> pulumi.Input[str]:
    """The parts joined: a plain string when every part is one, else an Output (a part was a program's Output).

    Plain declarations keep plain resource inputs, exactly as before Outputs were accepted.
    """
    if all(isinstance(part, str) for part in parts):
        return "".join(str(part) for part in parts)
    return pulumi.Output.concat(*parts)


class CloudComponent(pulumi.ComponentResource):
    """Base of the cloud adapters: names children after the component and parents them to it.

    Every adapter sets ``result``: what the Slurm layer needs from the cloud.
    """

    result: CloudResult

    def __init__(self, token: str, name: str, opts: pulumi.ResourceOptions | None) -> None:
        super().__init__(token, name, None, opts)
        self._name = name

    def child_name(self, *parts: str) -> str:
        """Logical name of a child resource: the component's name, then ``parts``, dash-joined."""
        return "-".join((self._name, *parts))

    def child_opts(self, **extra: Any) -> pulumi.ResourceOptions:
        """Options of a child resource: parented to this component, plus ``extra`` options."""
        return pulumi.ResourceOptions(parent=self, **extra)

    def stateful_opts(self, **extra: Any) -> pulumi.ResourceOptions:
        """Options of a resource that holds user data: never deleted or replaced by Pulumi.

        ``protect`` makes ``pulumi destroy`` and replacements fail instead of deleting data;
        ``retain_on_delete`` leaves the cloud resource in place if someone unprotects and removes it.
        """
        return self.child_opts(protect=True, retain_on_delete=True, **extra)


def database_password(owner: CloudComponent, name: str) -> random.RandomPassword:
    """A cloud accounting database's password, made once and protected: a new one would lock slurmdbd out
    until its Secret follows. Letters and digits only: slurmdbd.conf's StoragePass reads '#' as a comment,
    and RDS refuses '/', '@', '"' and spaces in a master password."""
    return random.RandomPassword(
        owner.child_name(name),
        random.RandomPasswordArgs(length=vocab.DATABASE_PASSWORD_LENGTH, special=False),
        opts=owner.child_opts(protect=True),
    )


def database_connection(host: pulumi.Input[str], password: random.RandomPassword) -> AccountingDatabase:
    """What slurmdbd needs of a cloud database: its private address and the password, as a secret."""
    return AccountingDatabase(
        host=host,
        # The result is a secret already; marked again so no change upstream can make it plain text.
        password=password.result.apply(pulumi.Output.secret),
        port=vocab.MARIADB_PORT,
    )
