"""The local adapter and the cloud dispatch under Pulumi mocks (preview=False)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan, deploy_cloud
from slonk_infra.clouds.common import cloud_effect, exec_kubeconfig
from slonk_infra.clouds.local import TOKEN, LocalInfrastructure
from slonk_infra.declaration.model import Taint
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.offline.runner import OfflineRun, run_offline
from slonk_infra.plan import ClusterPlan

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")
PROVIDER = "pulumi:providers:kubernetes"


def raw_local() -> dict[str, Any]:
    return copy.deepcopy(load_declaration("local"))


@pytest.fixture(scope="module")
def plan() -> ClusterPlan:
    return build_plan(raw_local())


@pytest.fixture(scope="module")
def run(plan: ClusterPlan) -> OfflineRun[CloudResult]:
    return run_offline(lambda: deploy_cloud(plan).result)


def test_only_a_provider_for_the_declared_context(run: OfflineRun[CloudResult]) -> None:
    assert [r.type for r in run.registrations] == [TOKEN, PROVIDER]
    component, provider = run.registrations
    assert provider.parent == component.urn
    assert provider.name == "slonk-local-k8s"
    assert provider.inputs["context"] == "kind-slonk"
    assert "kubeconfig" not in provider.inputs


def test_result_is_unpinned_and_has_no_cloud_volumes(run: OfflineRun[CloudResult]) -> None:
    result = run.value
    assert result.provider is not None
    assert result.pin_to_pools is False
    assert dict(result.volumes) == {}
    assert result.topology_labels == ()
    assert dict(result.node_pools) == {}


def test_kubeconfig_and_context_are_optional() -> None:
    raw = raw_local()
    raw["kubernetes"] = {"create": False}
    plan = build_plan(raw)
    run = run_offline(lambda: LocalInfrastructure("bare", plan).result)
    [provider] = run.of_type(PROVIDER)
    assert "context" not in provider.inputs and "kubeconfig" not in provider.inputs


@pytest.mark.parametrize(
    ("stack", "token"),
    [
        ("gcp", "slonk-infra:gcp:Infrastructure"),
        ("aws", "slonk-infra:aws:Infrastructure"),
        ("local", "slonk-infra:local:Infrastructure"),
    ],
)
def test_deploy_cloud_picks_the_adapter_by_cloud(stack: str, token: str) -> None:
    plan = build_plan(load_declaration(stack))
    run = run_offline(lambda: deploy_cloud(plan).result)
    [component] = [
        r for r in run.registrations if not r.custom and r.parent.endswith("pulumi:pulumi:Stack::slonk-infra-offline")
    ]
    assert component.type == token
    assert component.name == plan.name
    assert run.duplicate_urns() == []
    assert run.output_leaks() == []


def test_shared_helpers() -> None:
    assert cloud_effect(Taint(key="k", effect="NoExecute")) == "NO_EXECUTE"
    assert cloud_effect(Taint(key="k", effect="PreferNoSchedule")) == "PREFER_NO_SCHEDULE"
    config = exec_kubeconfig("c", "https://h", "Q0E=", {"command": "x"})
    assert '"current-context": "c"' in config and '"certificate-authority-data": "Q0E="' in config
