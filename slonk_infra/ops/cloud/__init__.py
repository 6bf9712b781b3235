"""The operations controller's calls to the cloud that runs the machines (GKE or EKS).

The controller decides from Kubernetes and Slurm records (pure code elsewhere in :mod:`slonk_infra.ops`);
this package only carries the decisions out, one cloud call per machine or pool. Everything needed
to address a machine is read from its Kubernetes Node (``spec.providerID``: ``gce://PROJECT/ZONE/NAME``
on GKE, ``aws:///AZ/i-...`` on EKS); a pool is addressed by the names in the controller's config
(:class:`CloudPools`), which the library renders from the plan.

Implementations: :mod:`.gcp` (the Compute Engine and GKE REST APIs through google-auth's authorized
session) and :mod:`.aws` (boto3); :func:`connect` picks one and checks that its library is installed; it
is imported on the first cloud call, so a controller on
``local`` (no cloud) never loads either. Every call fails with :class:`CloudCallError` (one type, with
the call, the machine or pool, and the cloud's message); nothing is retried inside: the controller
tries again on its next tick. Every request carries a timeout of :data:`TIMEOUT_SECONDS`.

What each call needs of the controller's cloud identity (the adapters' GSA role / IAM policy must match):

================  ==========================================  =====================================  ==========================================
call              GCP request (in order)                      GCP permission                         AWS action (in order)
================  ==========================================  =====================================  ==========================================
pool_size         container ``nodePools.get`` [1]             ``container.clusters.get`` [2]         ``eks:DescribeNodegroup`` [7]
                  compute ``instanceGroupManagers.get`` [3]   ``compute.instanceGroupManagers.get``  ``autoscaling:DescribeAutoScalingGroups`` [8]
grow              the two of pool_size, then                  (same), and                            the two of pool_size, then
                  ``instanceGroupManagers.resize`` [3]        ``compute.instanceGroupManagers.update`` ``eks:UpdateNodegroupConfig`` [7]
pool_ready        none (always True)                          none                                   ``ec2:DescribeCapacityReservations`` [9]
                                                                                                     (only for a Capacity Block pool)
pool_change       ``nodePools.get`` [1], then per group       ``container.clusters.get``,            ``eks:DescribeNodegroup`` [7]
                  ``instanceGroupManagers.get`` [3]           ``compute.instanceGroupManagers.get``
remove            ``instances.get`` [4]                       ``compute.instances.get``              ``autoscaling:TerminateInstanceInAutoScalingGroup`` [8]
                  ``instanceGroupManagers.deleteInstances``   ``compute.instanceGroupManagers.update``
replace           ``instances.reportHostAsFaulty`` [5]        ``compute.instances.update`` [6]       ``autoscaling:SetInstanceHealth`` [8]
(faulty host)
replace (else)    ``instances.get``,                          ``compute.instances.get``,             ``autoscaling:SetInstanceHealth``
                  ``instanceGroupManagers.recreateInstances`` ``compute.instanceGroupManagers.update``
================  ==========================================  =====================================  ==========================================

No ``iam.serviceAccounts.actAs`` is listed for resize/deleteInstances/recreateInstances by their method
references [3] (the group creates VMs as its own service agent); not checked against a live project.
There is no permission named ``compute.instances.reportHostAsFaulty``: the report-faulty-host guide [6]
lists ``compute.instances.update`` on the instance. EKS changes the node group's Auto Scaling group with
its own service-linked role, so ``eks:UpdateNodegroupConfig`` needs no autoscaling action of the caller
(unverified beyond the API reference). Not used by this package: ``autoscaling:DescribeAutoScalingInstances``,
``ec2:DescribeInstances``. The mutating Auto Scaling actions can be limited with the condition key
``autoscaling:ResourceTag/<key>`` [8]; which tag EKS puts on a managed node group's ASG (``eks:cluster-name``
or ``eks:nodegroup-name``) is unverified here: the EKS documentation found does not list it.

[1] https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools/get
[2] https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions
[3] https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers (get, resize,
    deleteInstances, recreateInstances: "Authorization requires ... compute.instanceGroupManagers.get/update")
[4] https://cloud.google.com/compute/docs/reference/rest/v1/instances/get
[5] https://cloud.google.com/compute/docs/reference/rest/v1/instances/reportHostAsFaulty
[6] https://docs.cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host ("Required permissions")
[7] https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html
[8] https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2autoscaling.html
[9] https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html
"""

from __future__ import annotations

import importlib.util

from slonk_infra.ops.cloud.machines import (
    TIMEOUT_SECONDS,
    CloudCallError,
    CloudKind,
    CloudMachines,
    CloudPools,
    MachineRef,
    ReplaceCall,
    machine_of,
)

__all__ = [
    "TIMEOUT_SECONDS",
    "CloudCallError",
    "CloudKind",
    "CloudMachines",
    "CloudPools",
    "MachineRef",
    "ReplaceCall",
    "connect",
    "machine_of",
]


# The SDK each implementation needs, as ``pip install`` names it (the ``ops`` extra of pyproject.toml).
_SDKS: dict[str, tuple[str, str]] = {
    "gcp": ("google.auth", "google-auth"),
    "aws": ("boto3", "boto3"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def connect(pools: CloudPools) -> CloudMachines:
    """The :class:`CloudMachines` of ``pools.cloud``, with the pod's own credentials (GKE Workload
    Identity through ``google.auth.default()``; EKS Pod Identity through boto3's default chain). The SDK
    is imported here, not at module import; its absence is a clear error at start."""
    if pools.cloud not in _SDKS:
        raise ValueError(f"cloud: {pools.cloud!r} has no cloud calls; allowed: {sorted(_SDKS)}")
    module, dist = _SDKS[pools.cloud]
    if not _installed(module):
        raise ModuleNotFoundError(
            f"cloud: {pools.cloud} needs {dist} (pip install 'slonk-infra[ops]'); the image's pod venv lacks it"
        )
    if pools.cloud == "gcp":
        from slonk_infra.ops.cloud.gcp import GcpMachines

        return GcpMachines(pools)
    from slonk_infra.ops.cloud.aws import AwsMachines

    return AwsMachines(pools)
