"""rbac-least-privilege: the shipped roles pass; wildcards, Secrets, escalation and wide ClusterRoles fail."""

from __future__ import annotations

from typing import Any

import pytest

from slonk_infra.declaration.stacks import load_stack_config
from slonk_infra.offline.render import run_program
from slonk_infra.policy import policies as P
from slonk_infra.policy.rbac_least_privilege import rule_problems
from tests.policy.test_policies import run_resource

ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"


@pytest.mark.parametrize("stack", ["gcp", "aws"])
def test_the_shipped_roles_are_least_privilege(stack: str) -> None:
    run = run_program(stack, load_stack_config(stack))
    roles = [r for r in run.registrations if r.type in (ROLE, CLUSTER_ROLE)]
    # The Slurm pods' Role, and the operations controller's Role and ClusterRole.
    assert len(roles) == 3
    for reg in roles:
        assert run_resource(P.rbac_least_privilege, reg.type, reg.inputs, name=reg.name) == []


def _role(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "slurm"}, "rules": rules}


@pytest.mark.parametrize(
    ("kind", "rule", "expected"),
    [
        ("Role", {"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, "rules[0].resources has a wildcard"),
        ("Role", {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}, "rules[0].verbs has a wildcard"),
        ("Role", {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, "grants access to Secrets"),
        ("Role", {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind"]}, "bind"),
        ("ClusterRole", {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}, "cluster-wide pods"),
        ("ClusterRole", {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, "non-resource URLs"),
    ],
)
def test_more_than_least_privilege_is_refused(kind: str, rule: dict[str, Any], expected: str) -> None:
    typ = ROLE if kind == "Role" else CLUSTER_ROLE
    [message] = run_resource(P.rbac_least_privilege, typ, _role([rule]), name="x")
    assert expected in message
    assert rule_problems(kind, [rule])


def test_cluster_role_on_nodes_alone_passes() -> None:
    rule = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}
    assert run_resource(P.rbac_least_privilege, CLUSTER_ROLE, _role([rule]), name="x") == []
