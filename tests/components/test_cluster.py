"""slonk_infra.Cluster: a short user program under the mock runtime reads every documented output."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

import slonk_infra
from slonk_infra import tokens
from slonk_infra.clouds import build_plan
from slonk_infra.cluster import OUTPUT_KEYS, Cluster
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.offline.runner import run_offline
from tests.support import declaration


def user_program(raw: dict[str, Any]) -> dict[str, pulumi.Output[Any]]:
    """What a platform engineer writes: ten lines, no private attribute."""
    cluster = slonk_infra.Cluster("research", raw)
    return {
        "clusterName": cluster.cluster_name,
        "namespace": cluster.namespace,
        "loginAddress": cluster.login_address,
        "controllerHost": cluster.controller_host,
        "kubeconfig": cluster.kubeconfig,
        "nodePools": cluster.node_pools,
        "slurmFiles": cluster.slurm_files,
    }


@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_a_ten_line_program_reads_every_output(stack: str) -> None:
    raw = declaration(stack)
    run = run_offline(lambda: user_program(raw), lambda outs: outs)
    out = run.resolved
    assert set(out) == set(OUTPUT_KEYS)
    plan = build_plan(raw)
    assert out["clusterName"] == plan.name
    assert out["namespace"] == plan.namespace
    assert out["controllerHost"] == f"slurmctld-0.{plan.namespace}.svc.cluster.local."
    # The mock gives Services a placeholder ClusterIP and no LoadBalancer status.
    assert out["loginAddress"] == "<known after deploy: Service research-service-login .spec.clusterIP>"
    assert "slurm.conf" in out["slurmFiles"] and f"ClusterName={plan.name}" in out["slurmFiles"]["slurm.conf"]
    assert any(path.startswith("scripts/") for path in out["slurmFiles"])
    if stack == "local":
        assert out["nodePools"] == {}
        assert out["kubeconfig"] == ""
    else:
        assert set(out["nodePools"]) == {g.name for g in plan.groups}
        assert all(out["nodePools"].values())
        if plan.declaration.kubernetes.create:
            assert '"current-context"' in out["kubeconfig"]
    assert run.duplicate_urns() == [] and run.output_leaks() == []


def test_children_hang_under_the_cluster_component() -> None:
    run = run_offline(lambda: slonk_infra.Cluster("research", declaration("gcp")))
    [top] = [r for r in run.registrations if r.type == tokens.CLUSTER]
    children = {r.type for r in run.registrations if r.parent == top.urn}
    assert children == {tokens.GCP_INFRASTRUCTURE, tokens.SLURM_CLUSTER}
    # Every registration descends from the top component.
    by_urn = {r.urn: r for r in run.registrations}
    for reg in run.registrations:
        if reg is top:
            continue
        parent = by_urn.get(reg.parent)
        while parent is not None and parent is not top:
            parent = by_urn.get(parent.parent)
        assert parent is top, reg.urn


def test_the_outputs_are_registered_with_the_documented_keys() -> None:
    cluster_outputs: dict[str, Any] = {}

    def program() -> Cluster:
        cluster = slonk_infra.Cluster("research", declaration("local"))
        cluster_outputs.update(dict(zip(OUTPUT_KEYS, cluster._outputs(), strict=True)))
        return cluster

    run_offline(program)
    assert list(cluster_outputs) == list(OUTPUT_KEYS)


@pytest.mark.parametrize("form", ["dict", "model", "plan"])
def test_every_form_of_the_declaration_is_accepted(form: str) -> None:
    raw = declaration("local")
    plan = build_plan(raw)
    arg: Any = {"dict": raw, "model": plan.declaration, "plan": plan}[form]
    run = run_offline(lambda: slonk_infra.Cluster("c", arg), lambda c: c.cluster_name)
    assert run.resolved == plan.name


def test_a_bad_declaration_declares_nothing() -> None:
    raw = declaration("local")
    raw["pools"][0]["nodes"] = 0
    with pytest.raises(DeclarationError, match=r"pools\[0\]\.nodes"):
        run_offline(lambda: slonk_infra.Cluster("c", raw))


def test_typed_args_cover_every_declaration_field() -> None:
    from slonk_infra.declaration import args
    from slonk_infra.declaration.model import ClusterDeclaration

    assert set(args.ClusterArgs.__annotations__) == set(ClusterDeclaration.model_fields)
