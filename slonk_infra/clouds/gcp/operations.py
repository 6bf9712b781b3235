"""The GCP identity of the operations controller (slonk-ops): a Google service account it acts as through
GKE Workload Identity, with a project custom role holding only the calls it makes.

The controller finds a machine from its Node's ``spec.providerID`` (``gce://PROJECT/ZONE/INSTANCE``) and
the machine's managed instance group from the instance's ``created-by`` metadata (``instances.get``). It
grows a pool with ``instanceGroupManagers.resize``, shrinks it one named idle machine at a time with
``instanceGroupManagers.deleteInstances``, replaces a bad machine with ``instances.reportHostAsFaulty``
(A3/A4 families, catalog ``faulty_host_report``) or ``instanceGroupManagers.recreateInstances``, and
does not wait on the zonal operations these return (the next tick sees the result). The permissions:

- ``compute.instances.get``: read the instance (its MIG);
- ``compute.instances.update``: what "Report faulty host" lists for ``reportHostAsFaulty``
  (https://docs.cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host, "Required permissions");
- ``compute.instanceGroupManagers.get`` / ``.update``: read, resize, deleteInstances, recreateInstances
  (Compute Engine IAM permissions reference: the MIG methods that change a group need ``.update``);
- ``container.clusters.get``: ``nodePools.get``, which names a pool's instance groups (GKE API permissions).

No ``iam.serviceAccounts.actAs``: the MIG creates its VMs as the Google APIs service agent with the
template's node account, which GKE set when it made the pool, not as the caller (unverified on a
real project: see docs/clouds.md). The binding lets exactly the ``slonk-ops`` Kubernetes ServiceAccount
of the Slurm namespace act as the Google account (``roles/iam.workloadIdentityUser`` on member
``serviceAccount:PROJECT.svc.id.goog[NAMESPACE/slonk-ops]``), and the ServiceAccount carries the
``iam.gke.io/gcp-service-account`` annotation (GKE "Authenticate to Google Cloud APIs from GKE workloads").
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from slonk_infra.clouds.common import concat

# The controller's ServiceAccount: slonk_infra.kube.operations.NAME (tests hold the two equal; the cloud
# layer does not import the Kubernetes layer).
SERVICE_ACCOUNT = "slonk-ops"
ANNOTATION = "iam.gke.io/gcp-service-account"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
PERMISSIONS = (
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.update",
    "compute.instances.get",
    "compute.instances.update",
    "container.clusters.get",
)
ACCOUNT_ID_MAX = 30  # IAM service account ids: 6-30 characters


def ops_account_id(cluster: str) -> str:
    """``<cluster>-ops`` within IAM's 30 characters (letters, digits, dashes)."""
    return f"{cluster[: ACCOUNT_ID_MAX - 4].rstrip('-')}-ops"


def ops_role_id(cluster: str) -> str:
    """The custom role id, ``<cluster>OpsMachines`` in camel case (role ids allow letters, digits, _ and .)."""
    head, *rest = cluster.split("-")
    return head + "".join(p.capitalize() for p in rest) + "OpsMachines"


@dataclass(frozen=True)
class OperationsIdentity:
    """What was created for the controller, and the annotation its ServiceAccount needs."""

    account: gcp.serviceaccount.Account
    role: gcp.projects.IAMCustomRole
    grants: tuple[pulumi.Resource, ...]

    @property
    def annotations(self) -> dict[str, pulumi.Input[str]]:
        """``iam.gke.io/gcp-service-account: <email>`` for the ``slonk-ops`` ServiceAccount."""
        return {ANNOTATION: self.account.email}


def operations_identity(
    prefix: str, cluster: str, project: pulumi.Input[str], namespace: str, opts: pulumi.ResourceOptions
) -> OperationsIdentity:
    """The Google service account, its custom role and binding, and the Workload Identity binding."""
    account = gcp.serviceaccount.Account(
        f"{prefix}-ops",
        gcp.serviceaccount.AccountArgs(
            account_id=ops_account_id(cluster),
            project=project,
            display_name=f"slonk-infra {cluster} operations controller",
        ),
        opts=opts,
    )
    role = gcp.projects.IAMCustomRole(
        f"{prefix}-ops-role",
        gcp.projects.IAMCustomRoleArgs(
            role_id=ops_role_id(cluster),
            project=project,
            title=f"slonk-infra {cluster} machines",
            description="Resize, shrink by named machine, and replace the worker machines of the GKE node pools.",
            permissions=list(PERMISSIONS),
        ),
        opts=opts,
    )
    grant = gcp.projects.IAMMember(
        f"{prefix}-ops-machines",
        gcp.projects.IAMMemberArgs(project=project, role=role.name, member=account.member),
        opts=opts,
    )
    workload = gcp.serviceaccount.IAMMember(
        f"{prefix}-ops-workload-identity",
        gcp.serviceaccount.IAMMemberArgs(
            service_account_id=account.name,
            role=WORKLOAD_IDENTITY_USER,
            member=concat("serviceAccount:", project, f".svc.id.goog[{namespace}/{SERVICE_ACCOUNT}]"),
        ),
        opts=opts,
    )
    return OperationsIdentity(account=account, role=role, grants=(grant, workload))
