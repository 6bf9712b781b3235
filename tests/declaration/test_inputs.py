"""Pulumi Outputs in a declaration: held as stand-ins at the fields naming cloud objects, refused elsewhere."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.inputs import accepted_fields, hold_outputs, is_output
from slonk_infra.offline.runner import run_offline
from slonk_infra.plan import ClusterPlan
from tests.support import declaration

ACCEPTED = [
    "aws.nodeRoleArn",
    "aws.publicSubnetIds[*]",
    "aws.subnetIds[*]",
    "aws.vpcId",
    "gcp.network",
    "gcp.project",
    "gcp.subnetwork",
    "kubernetes.context",
    "kubernetes.kubeconfig",
    "pools[*].reservation.name",
    "tpuSlices[*].reservation.name",
]


def plan_in_runtime(make: Any) -> ClusterPlan:
    """``build_plan`` of the declaration ``make()`` returns, inside a Pulumi run (Outputs need the runtime)."""
    run = run_offline(lambda: build_plan(make()))
    plan: ClusterPlan = run.value
    return plan


def test_the_fields_that_name_cloud_objects_and_only_they_accept_outputs() -> None:
    assert accepted_fields() == ACCEPTED


def test_a_plain_declaration_passes_through_untouched() -> None:
    raw = declaration("aws")
    held, outputs = hold_outputs(raw)
    assert held is raw and outputs == {}
    assert build_plan(raw).pulumi_inputs == {}


def test_outputs_become_stand_ins_that_validate_and_the_plan_keeps_the_outputs() -> None:
    outputs: dict[str, pulumi.Output[str]] = {}

    def make() -> dict[str, Any]:
        raw = declaration("aws")
        outputs["vpc"] = pulumi.Output.from_input("vpc-from-program")
        outputs["subnet"] = pulumi.Output.from_input("subnet-from-program")
        outputs["reservation"] = pulumi.Output.from_input("cr-from-program")
        raw["aws"]["vpcId"] = outputs["vpc"]
        raw["aws"]["subnetIds"] = [outputs["subnet"], "subnet-plain"]
        raw["pools"][0]["reservation"]["name"] = outputs["reservation"]
        return raw

    plan = plan_in_runtime(make)
    aws = plan.declaration.aws
    assert aws is not None
    assert aws.vpc_id == "<pulumi output: aws.vpcId>"
    assert aws.subnet_ids == ["<pulumi output: aws.subnetIds[0]>", "subnet-plain"]
    assert plan.pulumi_input(aws.vpc_id) is outputs["vpc"]
    assert plan.pulumi_input(aws.subnet_ids[0]) is outputs["subnet"]
    assert plan.pulumi_input(aws.subnet_ids[1]) == "subnet-plain"
    reservation = plan.group("h100-a").reservation
    assert reservation is not None and plan.pulumi_input(reservation.name) is outputs["reservation"]
    assert plan.pulumi_input(None) is None
    # Nothing that decides the plan changed: the same groups and nodes as the plain stack.
    plain = build_plan(declaration("aws"))
    assert plan.summary() == plain.summary()


def test_snake_case_keys_and_awaitables_are_held_too() -> None:
    async def project() -> str:
        return "project-from-coroutine"

    def make() -> dict[str, Any]:
        raw = declaration("gcp")
        raw["gcp"] = {"project": project(), "network": pulumi.Output.from_input("net")}
        raw["kubernetes"]["kubeconfig"] = pulumi.Output.secret("apiVersion: v1")
        return raw

    plan = plan_in_runtime(make)
    gcp = plan.declaration.gcp
    assert gcp is not None and gcp.project == "<pulumi output: gcp.project>"
    assert isinstance(plan.pulumi_input(gcp.project), pulumi.Output)  # awaited once, shared as an Output
    assert plan.declaration.kubernetes.kubeconfig == "<pulumi output: kubernetes.kubeconfig>"


@pytest.mark.parametrize(
    ("place", "path", "why"),
    [
        (lambda raw, o: raw["pools"][0].__setitem__("nodes", o), "pools[0].nodes", "decides the plan"),
        (lambda raw, o: raw["pools"][2].__setitem__("machine_type", o), "pools[2].machineType", "decides the plan"),
        (lambda raw, o: raw.__setitem__("region", o), "region", "decides the plan"),
        (lambda raw, o: raw["aws"].__setitem__("subnetIds", o), "aws.subnetIds", "Output of the whole list"),
        (lambda raw, o: raw["aws"].__setitem__("adminRoleArns", [o]), "aws.adminRoleArns[0]", "decides the plan"),
        (lambda raw, o: raw["pools"][0].__setitem__("labels", {"team": o}), "pools[0].labels.team", "plain value"),
    ],
)
def test_an_output_where_the_plan_needs_the_value_is_refused_naming_the_field(place: Any, path: str, why: str) -> None:
    def program() -> None:
        raw = declaration("aws")
        place(raw, pulumi.Output.from_input(3))
        build_plan(raw)

    with pytest.raises(DeclarationError) as caught:
        run_offline(program)
    (problem,) = caught.value.problems
    assert problem.path == path
    assert why in problem.message
    assert "fields that accept Outputs: " + ", ".join(ACCEPTED) in problem.message


def test_is_output_knows_outputs_and_awaitables_but_not_plain_values() -> None:
    async def later() -> str:
        return "x"

    def program() -> None:
        coroutine = later()
        assert is_output(pulumi.Output.from_input("x")) and is_output(coroutine)
        coroutine.close()  # never awaited here, on purpose

    run_offline(program)
    assert not any(is_output(v) for v in ("x", 3, None, ["x"], {"a": "b"}))
