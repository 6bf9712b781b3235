"""Claims name their StorageClass on GKE and EKS: a dynamically provisioned claim without one waits for
the cluster's default class, and EKS from Kubernetes 1.30 marks none as default, so slurmctld's state
(and an in-cluster NFS server's export) would stay Pending and slurmctld would never start."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from slonk_infra.policy.common import MANAGED_CLUSTER_TYPES
from slonk_infra.policy.props import describe, get, is_list, kind_of


def _claims(resource_type: str, props: Any) -> list[tuple[str, Any]]:
    """(what, claim spec) of a PersistentVolumeClaim or of a StatefulSet's claim templates."""
    kind = kind_of(resource_type)
    if kind == "PersistentVolumeClaim":
        return [("", get(props, "spec"))]
    if kind == "StatefulSet":
        templates = get(props, "spec", "volumeClaimTemplates", default=[])
        if is_list(templates):
            return [(f" claim template {get(t, 'metadata', 'name')}", get(t, "spec")) for t in templates]
    return []


def _validate_claim_classes(args: StackValidationArgs, report: ReportViolation) -> None:
    # Judged on managed clusters only (GKE, EKS); a local stack's claims use the cluster's default class.
    if not any(r.resource_type in MANAGED_CLUSTER_TYPES for r in args.resources):
        return
    for resource in args.resources:
        for what, spec in _claims(resource.resource_type, resource.props):
            # A claim bound to a named PersistentVolume (the shared filesystems) names the empty class on purpose.
            if get(spec, "volumeName"):
                continue
            if not get(spec, "storageClassName"):
                where = describe(resource.resource_type, resource.props, resource.name)
                report(
                    f"{where}{what}: names no storageClassName on a GKE/EKS cluster; it waits for a default "
                    "StorageClass, which EKS 1.30+ does not have",
                    resource.urn,
                )


claims_name_a_storage_class = StackValidationPolicy(
    name="claims-name-a-storage-class",
    description=(
        "On GKE and EKS every dynamically provisioned claim (slurmctld's state, an NFS server's export) names "
        "its StorageClass; EKS from Kubernetes 1.30 has no default class, so such a claim would stay Pending."
    ),
    validate=_validate_claim_classes,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Let slonk-infra name the class (the catalog's: standard-rwo on GKE, slonk-gp3 on EKS, which the "
        "adapter creates with the EBS CSI add-on), or set controller.storageClass to a class the cluster has."
    ),
)
