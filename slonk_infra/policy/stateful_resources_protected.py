"""Stateful resources protected: shared file systems, shared PersistentVolumes and claims, and the
Slurm controller's state claim cannot be deleted or replaced by an update."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra import vocab
from slonk_infra.policy.common import (
    STATEFUL_CLOUD_TYPES,
    STRING_LIST,
    setting,
    strings,
)
from slonk_infra.policy.props import (
    describe,
    get,
    is_slurm,
    kind_of,
)

PROTECTED_CLAIMS = [vocab.CONTROLLER_STATE_CLAIM]
SHARED_ACCESS_MODES = {"ReadWriteMany", "ReadOnlyMany"}


def _validate_stateful(args: ResourceValidationArgs, report: ReportViolation) -> None:
    kind = kind_of(args.resource_type)
    where = describe(args.resource_type, args.props, args.name)
    claims = strings(setting(args, "claimNames", PROTECTED_CLAIMS))
    what: str | None = STATEFUL_CLOUD_TYPES.get(args.resource_type)
    if kind in ("PersistentVolume", "PersistentVolumeClaim"):
        modes = set(strings(get(args.props, "spec", "accessModes")))
        claim = get(args.props, "metadata", "name") if kind == "PersistentVolumeClaim" else None
        bound = get(args.props, "spec", "claimRef", "name") if kind == "PersistentVolume" else None
        if modes & SHARED_ACCESS_MODES:
            what = f"shared {kind} ({', '.join(sorted(modes & SHARED_ACCESS_MODES))})"
        elif claim in claims or bound in claims:
            what = f"{kind} of Slurm controller state"
        if what and kind == "PersistentVolume":
            reclaim = get(args.props, "spec", "persistentVolumeReclaimPolicy")
            if reclaim not in (None, "Retain"):
                report(
                    f"{where}: persistentVolumeReclaimPolicy is {reclaim}; a {what} must be Retain so "
                    "releasing its claim does not delete the data",
                    None,
                )
    if kind == "StatefulSet" and is_slurm(args.props) and get(args.props, "spec", "volumeClaimTemplates"):
        when_deleted = get(args.props, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
        if when_deleted == "Delete":
            report(
                f"{where}: persistentVolumeClaimRetentionPolicy.whenDeleted is Delete; its volume claims "
                "(Slurm data) would be deleted with the StatefulSet",
                None,
            )
    if what and not args.opts.protect:
        report(
            f"{where}: {what} is not protected (protect=False); deleting or replacing it destroys the data on it", None
        )


stateful_resources_protected = ResourceValidationPolicy(
    name="stateful-resources-protected",
    description=(
        "Shared file systems (Filestore, EFS, FSx), shared PersistentVolumes and claims, and the Slurm "
        "controller's state claim are protected from deletion."
    ),
    validate=_validate_stateful,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(
        properties={
            "claimNames": {
                **STRING_LIST,
                "default": PROTECTED_CLAIMS,
                "description": "Claims that must be protected whatever their access mode.",
            }
        }
    ),
    remediation_steps=(
        "Register the resource with ResourceOptions(protect=True, retain_on_delete=True) (slonk-infra's own "
        "components do); keep shared PersistentVolumes at persistentVolumeReclaimPolicy: Retain. To really "
        "delete one, unprotect it deliberately (`pulumi state unprotect <urn>`) after taking a backup."
    ),
)
