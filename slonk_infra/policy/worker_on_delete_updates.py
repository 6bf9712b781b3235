"""Worker rollouts by hand: worker StatefulSets use OnDelete, so a template change never restarts a pod
that is running jobs."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.policy.props import (
    describe,
    get,
    is_slurm,
    kind_of,
    worker_group,
)


def _validate_on_delete(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if kind_of(args.resource_type) != "StatefulSet" or not is_slurm(args.props):
        return
    group = worker_group(args.props)
    if group is None:
        return
    strategy = get(args.props, "spec", "updateStrategy", "type", default="RollingUpdate")
    if strategy != "OnDelete":
        where = describe(args.resource_type, args.props, args.name)
        report(
            f"{where}: worker group {group} uses updateStrategy {strategy}; any template change would restart "
            "every worker and kill the jobs running on them",
            None,
        )


worker_on_delete_updates = ResourceValidationPolicy(
    name="worker-on-delete-updates",
    description=(
        "Worker StatefulSets use the OnDelete update strategy, so a template change never restarts a pod "
        "that is running jobs."
    ),
    validate=_validate_on_delete,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Set spec.updateStrategy.type: OnDelete on worker StatefulSets, then roll changes node by node: "
        "`scontrol update nodename=<node> state=drain reason=upgrade`, wait until it is drained, delete the pod."
    ),
)
