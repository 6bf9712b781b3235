"""Resolution and problem collection kept apart: checks only collect, resolution builds the plan."""

from __future__ import annotations

from typing import Any

import pytest

from slonk_infra.clouds import build_plan, registry
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.plan import GPU_TAINT, Problems, default_partitions
from slonk_infra.plan.checks import check_storage
from tests.kube_support import plan_for


def test_one_run_reports_every_problem_in_declaration_order() -> None:
    def broken(raw: dict[str, Any]) -> None:
        raw["pools"][0]["accelerator"]["count"] = 3
        raw["pools"][1]["name"] = "slurmctld"
        raw["storage"][0]["mountPath"] = "/data"

    with pytest.raises(DeclarationError) as err:
        plan_for("gcp", broken)
    paths = [p.path for p in err.value.problems]
    assert paths == ["pools[0].accelerator.count", "pools[1].name", "storage"]


def test_checks_collect_without_raising() -> None:
    plan = plan_for("local")
    problems = Problems()
    check_storage(plan.declaration.model_copy(update={"storage": []}), registry.target("local"), problems)
    assert [p.path for p in problems.items] == ["storage"]
    assert problems
    with pytest.raises(DeclarationError):
        problems.raise_if_any()
    Problems().raise_if_any()


def test_resolution_gives_gpu_pools_the_gpu_taint_and_the_default_partitions() -> None:
    plan = plan_for("aws")
    for g in plan.groups:
        assert (GPU_TAINT in g.taints) == (g.kind == "gpu")
    assert plan.partitions == tuple(default_partitions(list(plan.groups)))
    assert [p.name for p in plan.partitions if p.default] == ["general"]


def test_a_model_goes_through_the_same_gate() -> None:
    plan = plan_for("local")
    assert build_plan(plan.declaration) == plan
