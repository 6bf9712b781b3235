"""No floating versions: no image without a tag or with :latest, no Helm chart without a version."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.policy.images import parse_image
from slonk_infra.policy.props import (
    containers,
    describe,
    get,
    pod_spec,
)

LOCAL_CHART_PREFIXES = ("./", "../", "/")


def _validate_floating(args: ResourceValidationArgs, report: ReportViolation) -> None:
    where = describe(args.resource_type, args.props, args.name)
    if args.resource_type in ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"):
        chart = str(get(args.props, "chart", default=""))
        if not get(args.props, "version") and not chart.startswith(LOCAL_CHART_PREFIXES) and "@sha256:" not in chart:
            report(f"{where}: chart {chart} has no version; the next deploy installs whatever is newest", None)
        return
    spec = pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    for container in containers(spec):
        image = container.image
        if isinstance(image, str) and image and parse_image(image).floating:
            report(f"{where} {container.role} {container.name}: image {image} floats (no tag, or :latest)", None)


no_floating_image_tags = ResourceValidationPolicy(
    name="no-floating-image-tags",
    description=(
        "No workload runs an image without a tag or with :latest, and no Helm chart is installed without a "
        "version: what runs must change only when this code changes."
    ),
    validate=_validate_floating,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation_steps=(
        "Pin images to a version tag, better a digest (repo:tag@sha256:...), and Helm releases to a chart version."
    ),
)
