"""Privileged only where needed: the workers' slurmd (cgroups, devices), the in-cluster NFS server
(kernel nfsd) and the catalog's GPUDirect host installers (kube-system DaemonSets that load kernel
modules and write host paths, by name and pinned image); nobody else runs privileged or with SYS_ADMIN."""

from __future__ import annotations

from functools import cache

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra import vocab
from slonk_infra.catalog import load_catalog
from slonk_infra.policy.common import (
    STRING_LIST,
    setting,
    strings,
)
from slonk_infra.policy.props import (
    containers,
    describe,
    get,
    is_slurm,
    labels,
    pod_spec,
)
from slonk_infra.vocab import COMPONENT as COMPONENT_LABEL

ALLOWED_PRIVILEGED = [f"{vocab.WORKER_COMPONENT}/slurmd", f"{vocab.NFS_COMPONENT}/nfs"]


DANGEROUS_CAPABILITIES = {"SYS_ADMIN", "ALL"}
HOST_INSTALLER_NAMESPACE = "kube-system"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"


@cache
def host_installer_images() -> dict[str, frozenset[str]]:
    """DaemonSet name -> the images it may run privileged: the GPUDirect installers the catalog pins."""
    out: dict[str, frozenset[str]] = {}
    for fabric in load_catalog().fabrics.values():
        if fabric.installer is not None:
            out.update(fabric.installer.privileged_images())
    return out


def _installer_images(args: ResourceValidationArgs) -> frozenset[str]:
    # Only the catalog's own installers, in kube-system, at the pinned images: a DaemonSet that merely
    # borrows one of their names, or runs another image, is judged like any other pod.
    if args.resource_type != DAEMONSET or get(args.props, "metadata", "namespace") != HOST_INSTALLER_NAMESPACE:
        return frozenset()
    name = get(args.props, "metadata", "name")
    return host_installer_images().get(name, frozenset()) if isinstance(name, str) else frozenset()


def _validate_privileged(args: ResourceValidationArgs, report: ReportViolation) -> None:
    spec = pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    allowed = set(strings(setting(args, "allowedContainers", ALLOWED_PRIVILEGED)))
    component = labels(args.props).get(COMPONENT_LABEL, "")
    slurm = is_slurm(args.props)
    where = describe(args.resource_type, args.props, args.name)
    installer_images = _installer_images(args)
    for container in containers(spec):
        context = get(container.spec, "securityContext")
        reasons = []
        if get(context, "privileged") is True:
            reasons.append("privileged: true")
        caps = {c.upper().removeprefix("CAP_") for c in strings(get(context, "capabilities", "add"))}
        if caps & DANGEROUS_CAPABILITIES:
            reasons.append(f"capabilities.add {sorted(caps & DANGEROUS_CAPABILITIES)}")
        if not reasons or (slurm and f"{component}/{container.name}" in allowed):
            continue
        if get(container.spec, "image") in installer_images:
            continue
        report(
            f"{where} {container.role} {container.name}: {' and '.join(reasons)} (component {component or '-'}); "
            f"only {sorted(allowed)} may run privileged",
            None,
        )


privileged_only_where_needed = ResourceValidationPolicy(
    name="privileged-only-where-needed",
    description=(
        "Only containers that need the host run privileged: the workers' slurmd (cgroups, devices) and the "
        "in-cluster NFS server (kernel nfsd)."
    ),
    validate=_validate_privileged,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "allowedContainers": {
                **STRING_LIST,
                "default": ALLOWED_PRIVILEGED,
                "description": f"component/container pairs ({COMPONENT_LABEL} label) allowed privileged.",
            }
        }
    ),
    remediation_steps=(
        "Remove securityContext.privileged (and SYS_ADMIN / ALL capabilities); add only the capabilities the "
        "process needs (see the munged sidecar: CHOWN, FOWNER, DAC_OVERRIDE, SETUID, SETGID) with "
        "allowPrivilegeEscalation: false. If a new component truly needs the host, add it to "
        "privileged-only-where-needed.allowedContainers in the shared policy configuration, with a reviewer."
    ),
)
