"""Workers drain before they stop: a preStop hook on slurmd and a termination grace period long enough
to requeue jobs."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.policy.common import (
    setting,
)
from slonk_infra.policy.props import (
    accelerator_container,
    as_int,
    containers,
    describe,
    get,
    is_slurm,
    pod_spec,
    worker_group,
)

MIN_GRACE_SECONDS = 120


def _validate_drain(args: ResourceValidationArgs, report: ReportViolation) -> None:
    spec = pod_spec(args.resource_type, args.props)
    if spec is None or not is_slurm(args.props) or worker_group(args.props) is None:
        return
    where = describe(args.resource_type, args.props, args.name)
    minimum = as_int(setting(args, "minGraceSeconds", MIN_GRACE_SECONDS)) or MIN_GRACE_SECONDS
    grace = as_int(get(spec, "terminationGracePeriodSeconds", default=30)) or 0
    if grace < minimum:
        report(
            f"{where}: terminationGracePeriodSeconds {grace} is under {minimum}; slurmd is killed before its "
            "jobs can be requeued",
            None,
        )
    name = accelerator_container(spec)
    for container in containers(spec):
        if container.role == "container" and container.name in ("slurmd", name):
            if not get(container.spec, "lifecycle", "preStop"):
                report(
                    f"{where} container {container.name}: no lifecycle.preStop hook; the node is not drained "
                    "in Slurm before its pod stops",
                    None,
                )
            break


worker_graceful_drain = ResourceValidationPolicy(
    name="worker-graceful-drain",
    description=(
        "Worker pods drain their Slurm node before they stop: a preStop hook on slurmd and a termination grace "
        "period long enough to requeue jobs."
    ),
    validate=_validate_drain,
    # Advisory: spot capacity gives 30 s notice whatever the pod asks for, and some sites accept that.
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={"minGraceSeconds": {"type": "integer", "default": MIN_GRACE_SECONDS, "minimum": 0}}
    ),
    remediation_steps=(
        "Give slurmd a lifecycle.preStop hook that drains the node (slonk-infra runs /opt/slonk/scripts/drain.sh) "
        "and set terminationGracePeriodSeconds to at least minGraceSeconds."
    ),
)
