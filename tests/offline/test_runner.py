"""The offline runner: the fake clouds' table, transforms applied as the engine applies them, secrets masked."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from slonk_infra.cli import DEFAULT_POLICY_CONFIG
from slonk_infra.declaration.stacks import CONFIG_KEY, load_declaration, load_stack_config
from slonk_infra.offline import render
from slonk_infra.offline.fake_clouds import FAKE_OUTPUTS, FakeClouds
from slonk_infra.offline.render import _apply_order, _clean, run_program
from slonk_infra.offline.runner import SECRET_PLACEHOLDER, UNKNOWN, run_offline
from slonk_infra.policy.config import load_policy_config
from slonk_infra.policy.runner import check_registrations
from slonk_infra.program import main as program_main
from tests.clouds.test_first_deploy import gcp_with_rdma
from tests.kube.test_controller_ha import ha

Seen = list[tuple[str, str]]
STACKS = Path(__file__).resolve().parents[2] / "stacks"


def test_every_fake_output_type_answers_with_its_outputs() -> None:
    mocks = FakeClouds()
    for typ, fake in FAKE_OUTPUTS.items():
        inputs: dict[str, Any] = {"name": "x", "networks": [{"network": "n"}], "spec": {"type": "ClusterIP"}}
        rid, state = mocks.new_resource(pulumi.runtime.MockResourceArgs(typ, "res", inputs, None, None, True))
        assert rid, typ
        for key, value in fake.outputs("res", inputs).items():
            assert state[key] == value, (typ, key)
        added = fake.outputs("res", inputs)
        assert all(state[k] == v for k, v in inputs.items() if k not in added), typ  # the rest is echoed


def test_kubernetes_objects_echo_nothing_and_invokes_answer_from_the_table() -> None:
    mocks = FakeClouds()
    args = pulumi.runtime.MockResourceArgs("kubernetes:apps/v1:StatefulSet", "s", {"kind": "StatefulSet"}, None)
    assert mocks.new_resource(args) == ("s-id", {})
    vpc, _ = mocks.call(pulumi.runtime.MockCallArgs("aws:ec2/getVpc:getVpc", {"id": "vpc-1"}, ""))
    assert vpc["id"] == "vpc-1" and vpc["cidrBlock"]
    assert mocks.call(pulumi.runtime.MockCallArgs("unknown:index:fn", {}, "")) == ({}, [])


def _transform(tag: str, seen: Seen, **opts: Any) -> pulumi.ResourceTransform:
    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        seen.append((tag, args.name))
        props: dict[str, Any] = dict(args.props)
        if "data" in props:
            props["data"] = {**props["data"], tag: "after-protect" if args.opts.protect else "yes"}
        return pulumi.ResourceTransformResult(
            props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(**opts))
        )

    return transform


class Holder(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("test:index:Holder", name, None, opts)
        k8s.core.v1.ConfigMap(
            f"{name}-cm",
            metadata={"name": "cm"},
            data={"k": "v"},
            opts=pulumi.ResourceOptions(parent=self, transforms=[_transform("own", SEEN)]),
        )
        self.register_outputs({})


SEEN: Seen = []


def test_stack_reference_outputs_are_unknown_and_their_applies_do_not_run() -> None:
    constructor = pulumi.StackReference.__init__
    ran: list[Any] = []

    def program() -> None:
        network = pulumi.StackReference("network", stack_name="org/net/prod")
        network.get_output("vpcId").apply(ran.append)
        pulumi.export("vpcId", network.get_output("vpcId"))
        pulumi.export("subnetId", network.require_output("subnetId").apply(str.upper))
        pulumi.export("outputs", network.outputs)
        pulumi.export("stack", network.id)

    run = run_offline(program)
    assert ran == []
    assert run.exports == {"vpcId": UNKNOWN, "subnetId": UNKNOWN, "outputs": UNKNOWN, "stack": "org/net/prod"}
    assert not run.registrations  # read, not registered: nothing to deploy
    assert pulumi.StackReference.__init__ is constructor  # the run leaves the SDK as it found it


def test_kubernetes_outputs_left_unknown_only_where_asked_and_then_applies_on_them_do_not_run() -> None:
    read: list[Any] = []

    def program() -> None:
        cm = k8s.core.v1.ConfigMap("cm", metadata={"name": "cm"}, data={"k": "v"})
        cm.data.apply(read.append)
        pulumi.export("data", cm.data)
        service = k8s.core.v1.Service("svc", metadata={"name": "svc"}, spec={"type": "ClusterIP"})
        pulumi.export("ip", service.spec.apply(lambda s: s.cluster_ip))

    rpc_resolve = pulumi.runtime.rpc.resolve_outputs
    echoed = run_offline(program)
    assert read == [{"k": "v"}] and echoed.exports["data"] == {"k": "v"}
    read.clear()
    unread = run_offline(program, kubernetes_outputs=False)
    assert read == [] and unread.exports["data"] == UNKNOWN
    assert unread.exports["ip"] == echoed.exports["ip"] != UNKNOWN  # a Service's address is still answered
    # Independent registrations arrive in either order.
    assert sorted(unread.registrations, key=lambda r: r.urn) == sorted(echoed.registrations, key=lambda r: r.urn)
    assert pulumi.runtime.rpc.resolve_outputs is rpc_resolve  # the run leaves the SDK as it found it


def _two_controllers(stack: str) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(load_declaration(stack))
    ha(raw)
    return raw


# The example stacks, and what they leave out: GPUDirect-RDMA's custom resources, a backup controller.
OWN_PROGRAM_CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "local": lambda: load_stack_config("local", STACKS),
    "gcp": lambda: load_stack_config("gcp", STACKS),
    "aws": lambda: load_stack_config("aws", STACKS),
    "gcp with GPUDirect-RDMA pools": lambda: {CONFIG_KEY: gcp_with_rdma()},
    "aws with two controllers": lambda: {CONFIG_KEY: _two_controllers("aws")},
}


@pytest.mark.parametrize("case", sorted(OWN_PROGRAM_CASES))
def test_the_own_program_reads_no_kubernetes_output(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_program`` leaves the Kubernetes objects' outputs of slonk-infra's own program unknown (the
    SDK would rebuild them from the inputs, a fifth of a large render); the render must not change."""
    config = OWN_PROGRAM_CASES[case]()

    def snapshot() -> tuple[Any, ...]:
        run = run_program(case.split()[0], config)
        # The SDK gathers dependencies through a set: their order is not the program's.
        records = sorted(
            (replace(r, dependencies=tuple(sorted(r.dependencies))) for r in run.registrations), key=lambda r: r.urn
        )
        return records, run.outputs, run.kubernetes_objects(), run.cloud_resources()

    fast = snapshot()
    monkeypatch.setattr(render, "run_offline", lambda *a, **k: run_offline(*a, **{**k, "kubernetes_outputs": True}))
    assert snapshot() == fast


def test_transforms_run_own_then_parents_then_stack_and_are_recorded() -> None:
    SEEN.clear()

    def program() -> None:
        pulumi.runtime.register_resource_transform(_transform("stack", SEEN, retain_on_delete=True))
        outer = Holder("outer", pulumi.ResourceOptions(transforms=[_transform("grandparent", SEEN)]))
        Holder("inner", pulumi.ResourceOptions(parent=outer, transforms=[_transform("parent", SEEN, protect=True)]))

    run = run_offline(program)
    inner_cm = run.named("inner-cm")
    assert [tag for tag, name in SEEN if name == "inner-cm"] == ["own", "parent", "grandparent", "stack"]
    assert inner_cm.inputs["data"] == {
        "k": "v",
        "own": "yes",
        "parent": "yes",
        "grandparent": "after-protect",
        "stack": "after-protect",
    }
    assert inner_cm.protect and inner_cm.retain_on_delete
    outer_cm = run.named("outer-cm")
    assert outer_cm.inputs["data"] == {"k": "v", "own": "yes", "grandparent": "yes", "stack": "yes"}
    assert not outer_cm.protect and outer_cm.retain_on_delete
    assert run.transforms_run == len(SEEN)


def test_offline_check_sees_what_a_stack_transform_did() -> None:
    """A user transform that unprotects the controller's state claim fails the check, as in ``pulumi preview``."""
    config = load_policy_config(DEFAULT_POLICY_CONFIG)
    stack = load_stack_config("gcp")

    def unprotect(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ == "kubernetes:core/v1:PersistentVolumeClaim":
            return pulumi.ResourceTransformResult(
                args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(protect=False))
            )
        return None

    def program() -> Any:
        pulumi.runtime.register_resource_transform(unprotect)
        return program_main()

    plain = check_registrations(run_program("gcp", stack).registrations, config)
    transformed_run = run_program("gcp", stack, program)
    transformed = check_registrations(transformed_run.registrations, config)
    assert not plain.failed
    assert transformed.failed and {v.policy for v in transformed.mandatory} == {"stateful-resources-protected"}
    assert (
        transformed_run.transforms_run > 0 and "applied as `pulumi preview` would" in transformed_run.transforms_note()
    )


def test_secret_envelopes_are_opened_to_their_keys_with_values_masked() -> None:
    sig_key, sig = pulumi.runtime.rpc._special_sig_key, pulumi.runtime.rpc._special_secret_sig
    wire = {"data": {sig_key: sig, "value": {"munge.key": "c2VjcmV0", "n": 1.0}}, "count": 2.0}
    assert _clean(wire) == {"data": {"munge.key": SECRET_PLACEHOLDER, "n": SECRET_PLACEHOLDER}, "count": 2}


def test_rendered_objects_are_ordered_whatever_order_the_runtime_registered_them_in() -> None:
    # A ClusterRole and its binding share a name; the runtime registers them in either order.
    role = {"kind": "ClusterRole", "metadata": {"name": "slurm-ops"}}
    binding = {"kind": "ClusterRoleBinding", "metadata": {"name": "slurm-ops"}}
    deployment = {"kind": "Deployment", "metadata": {"name": "slurm-ops", "namespace": "slurm"}}
    for given in ([deployment, binding, role], [role, deployment, binding], [binding, role, deployment]):
        assert sorted(given, key=_apply_order) == [role, binding, deployment]
