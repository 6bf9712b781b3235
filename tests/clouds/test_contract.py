"""What every cloud in the registry must do, checked once for all of them on its shipped stack.

A new cloud is held to this contract by registering it: these tests are parametrized over the
registry, not written per cloud.
"""

from __future__ import annotations

import pulumi
import pytest

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan, registry
from slonk_infra.clouds.rules import KUBERNETES_STORAGE
from slonk_infra.offline.runner import OfflineRun
from slonk_infra.plan import ClusterPlan
from tests.support import ancestors, count_by_type, declaration, deploy, with_nodes

CLOUDS = sorted(registry.TARGETS)
# Importing a cloud SDK warns about deprecated resources the adapters do not use.
pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")


@pytest.fixture(scope="module", params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def plan(cloud: str) -> ClusterPlan:
    return build_plan(declaration(cloud))


@pytest.fixture(scope="module")
def run(plan: ClusterPlan) -> OfflineRun[CloudResult]:
    return deploy(plan)


def test_one_component_of_the_declared_cloud_holds_everything(run: OfflineRun[CloudResult], cloud: str) -> None:
    urns = {r.urn for r in run.registrations}
    roots = [r for r in run.registrations if r.parent not in urns]
    assert [r.type for r in roots] == [f"slonk-infra:{cloud}:Infrastructure"]


def test_every_child_is_under_the_component_and_named_after_it(run: OfflineRun[CloudResult], cloud: str) -> None:
    [component] = run.of_type(f"slonk-infra:{cloud}:Infrastructure")
    by_urn = {r.urn: r for r in run.registrations}
    for child in run.registrations:
        if child is component:
            continue
        assert component.urn in ancestors(run.registrations, child), child.name
        # Directly, or through a component of the same cloud (a worker group, a shared filesystem).
        parent = by_urn[child.parent]
        assert parent is component or parent.type.startswith(f"slonk-infra:{cloud}:"), (child.name, parent.type)
        assert child.name.startswith(f"{component.name}-"), child.name


def test_no_duplicate_urns_and_no_stringified_outputs(run: OfflineRun[CloudResult]) -> None:
    assert run.duplicate_urns() == []
    assert run.output_leaks() == []


def test_resource_count_does_not_depend_on_node_count(cloud: str) -> None:
    small = deploy(build_plan(with_nodes(declaration(cloud), 4)))
    large = deploy(build_plan(with_nodes(declaration(cloud), 4096)))
    assert count_by_type(small.registrations) == count_by_type(large.registrations)


def test_the_result_the_slurm_layer_gets(run: OfflineRun[CloudResult], plan: ClusterPlan) -> None:
    result = run.value
    assert isinstance(result.provider, pulumi.ProviderResource)
    # Pinned workers need a node pool per group; unpinned ones (an existing cluster's nodes) need none.
    groups = sorted(g.name for g in plan.groups)
    assert sorted(result.node_pools) == (groups if result.pin_to_pools else [])
    # Every cloud filesystem of the declaration arrives as a volume, and nothing else does.
    cloud_volumes = sorted(v.name for v in plan.declaration.storage if v.kind not in KUBERNETES_STORAGE)
    assert sorted(result.volumes) == cloud_volumes
