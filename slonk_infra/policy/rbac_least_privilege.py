"""Least privilege for the accounts this project creates: no wildcards, no Secrets, no escalation verbs,
and cluster-wide rights only on Nodes (the operations controller cordons and annotates them)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.policy.props import describe, get, is_list, kind_of

# Verbs that let an account grant itself more than it was given.
ESCALATING_VERBS = frozenset({"escalate", "bind", "impersonate"})
# Resources a cluster-wide role of this project may name; namespaced work stays in Roles.
CLUSTER_RESOURCES = frozenset({"nodes"})


def rule_problems(kind: str, rules: Any) -> list[str]:
    """What in a Role's / ClusterRole's ``rules`` is more than least privilege."""
    out: list[str] = []
    for i, rule in enumerate(rules if is_list(rules) else []):
        resources = [str(r) for r in get(rule, "resources", default=[]) or []]
        verbs = [str(v) for v in get(rule, "verbs", default=[]) or []]
        groups = [str(g) for g in get(rule, "apiGroups", default=[]) or []]
        where = f"rules[{i}]"
        for field, values in (("apiGroups", groups), ("resources", resources), ("verbs", verbs)):
            if "*" in values:
                out.append(f"{where}.{field} has a wildcard")
        if any(r == "secrets" or r.startswith("secrets/") for r in resources):
            out.append(f"{where} grants access to Secrets")
        if ESCALATING_VERBS & set(verbs):
            out.append(f"{where} grants {', '.join(sorted(ESCALATING_VERBS & set(verbs)))}")
        if get(rule, "nonResourceURLs"):
            out.append(f"{where} grants non-resource URLs")
        if kind == "ClusterRole":
            wider = sorted(set(resources) - CLUSTER_RESOURCES - {"*"})
            if wider:
                out.append(f"{where} grants cluster-wide {', '.join(wider)} (only nodes belong in a ClusterRole)")
    return out


def _validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
    kind = kind_of(args.resource_type)
    if kind not in ("Role", "ClusterRole"):
        return
    where = describe(args.resource_type, args.props, args.name)
    for problem in rule_problems(kind, get(args.props, "rules")):
        report(f"{where}: {problem}", None)


rbac_least_privilege = ResourceValidationPolicy(
    name="rbac-least-privilege",
    description=(
        "Roles and ClusterRoles grant named resources and verbs only: no wildcards, no Secrets, no "
        "escalate/bind/impersonate, and cluster-wide rights only on Nodes."
    ),
    validate=_validate,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "List the exact resources and verbs the account calls (the operations controller needs nodes list/patch "
        "cluster-wide and pods list/patch/delete in the Slurm namespace); move namespaced rights into a Role."
    ),
)
