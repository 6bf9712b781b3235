"""Every Kubernetes object of the Slurm layer, as plain dicts built from the plan.

Pure and cloud-agnostic: the cloud layer's contribution arrives as :class:`KubeInputs` (PersistentVolume
sources of the shared filesystems, whether workers are pinned one per node, the munge key). Values in
those inputs may be Pulumi Outputs; nothing here inspects them. The object count depends on worker
groups and storage volumes, never on node count.

One builder module per role (:mod:`~slonk_infra.kube.controller`, :mod:`~slonk_infra.kube.login`,
:mod:`~slonk_infra.kube.worker`, :mod:`~slonk_infra.kube.restapi`, :mod:`~slonk_infra.kube.storage`,
:mod:`~slonk_infra.kube.cluster_wide`), sharing :mod:`~slonk_infra.kube.pod` and
:mod:`~slonk_infra.vocab`; this module puts their objects in apply order.
"""

from __future__ import annotations

from slonk_infra.kube import accounting, cluster_wide, controller, login, restapi, state_backup, storage, worker
from slonk_infra.kube.inputs import ClusterIPOf, KubeInputs
from slonk_infra.kube.operations import operations_for
from slonk_infra.kube.pod import Obj
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import SlurmFiles
from slonk_infra.vocab import COMPONENT, CONFIG_HASH, GROUP_LABEL

__all__ = ["COMPONENT", "CONFIG_HASH", "GROUP_LABEL", "ClusterIPOf", "KubeInputs", "Obj", "build_manifests"]


def build_manifests(plan: ClusterPlan, files: SlurmFiles, inputs: KubeInputs | None = None) -> list[Obj]:
    """Every object of the Slurm layer, in apply order (namespace first)."""
    inp = inputs or KubeInputs()
    return [
        cluster_wide.namespace(plan),
        *cluster_wide.rbac(plan),
        *cluster_wide.priority_classes(plan),
        *cluster_wide.config_maps(plan, files, inp),
        *cluster_wide.secrets(plan, inp),
        controller.service(plan),
        *controller.pod_services(plan),
        worker.service(plan),
        login.service(plan),
        *cluster_wide.network_policies(plan),
        *storage.storage_objects(plan, inp),
        # Before slurmctld: Slurm upgrades slurmdbd first, and the component makes slurmctld wait for it.
        *accounting.accounting_objects(plan, inp),
        controller.state_claim(plan),
        *controller.statefulsets(plan, files, inp),
        *state_backup.cronjob(plan, inp),
        login.statefulset(plan, files, inp),
        *restapi.rest_api(plan, files, inp),
        *[worker.statefulset(plan, g, inp) for g in plan.groups],
        *cluster_wide.disruption_budgets(plan),
        *operations_for(plan, inp),
    ]
