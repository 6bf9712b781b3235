"""The target registry and its descriptors: every piece a target must provide, and who reads them.

Adding a target is one package with a descriptor and one registry line; these tests fail until the
declaration, the catalog and the descriptor agree, and show that the plan, the deploy step and the
policy pack read the descriptors rather than naming clouds.
"""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, get_args

import pytest

from slonk_infra.catalog import CLOUDS, Cloud
from slonk_infra.clouds import build_plan, deploy_cloud, deployer_of, registry
from slonk_infra.clouds.common import CloudComponent
from slonk_infra.clouds.rules import KUBERNETES_STORAGE
from slonk_infra.clouds.target import CloudTarget, PolicyTypes
from slonk_infra.declaration.errors import DeclarationError, Problem
from slonk_infra.declaration.model import CLOUD_TAGS, ClusterDeclaration, StorageKind, StorageSpec
from slonk_infra.kube import login
from slonk_infra.plan import PRIVATE_RANGES, ClusterPlan
from slonk_infra.plan import build_plan as build_plan_for
from slonk_infra.policy import common as policy_common
from slonk_infra.policy.gpu_node_pools_tainted import READERS
from tests.support import declaration

POLICY_DIR = Path(__file__).resolve().parents[2] / "slonk_infra" / "policy"


def test_the_registry_names_every_cloud_the_declaration_and_the_catalog_know() -> None:
    clouds = tuple(registry.TARGETS)
    assert get_args(Cloud) == clouds
    assert clouds == CLOUDS
    assert clouds == CLOUD_TAGS
    # One tagged declaration type per target, each answering to its own ``cloud`` value.
    tagged = [get_args(sub.model_fields["cloud"].annotation) for sub in ClusterDeclaration.__subclasses__()]
    assert sorted(value for values in tagged for value in values) == sorted(clouds)


@pytest.mark.parametrize("cloud", list(registry.TARGETS))
def test_every_descriptor_provides_what_a_target_must(cloud: str) -> None:
    target = registry.target(cloud)
    assert target.cloud == cloud
    deployer = deployer_of(cloud)
    assert isinstance(deployer, type) and issubclass(deployer, CloudComponent), target.deployer
    assert set(target.storage_kinds) >= KUBERNETES_STORAGE
    assert set(target.storage_kinds) <= set(get_args(StorageKind))
    assert len(set(target.storage_kinds)) == len(target.storage_kinds)
    assert callable(target.storage_problems) and callable(target.declaration_problems)
    assert isinstance(target.restrict_load_balancers, bool)
    types_ = target.policy_types
    # A target that creates filesystems names their resource types, so the pack protects them.
    assert len(types_.stateful) >= len(set(target.storage_kinds) - KUBERNETES_STORAGE)
    assert all(types_.stateful.values())
    # Node pools are judged only where a managed cluster is recognized, by a reader the pack has.
    assert set(types_.accelerator_pools) <= set(types_.managed_clusters)
    assert set(types_.tpu_slice_pools) <= set(types_.accelerator_pools)
    assert set(types_.accelerator_pools.values()) <= set(READERS)
    # Every type token belongs to the target's own provider.
    tokens = {*types_.managed_clusters, *types_.stateful, *types_.accelerator_pools, *types_.tpu_slice_pools}
    assert all(token.startswith(f"{cloud}:") for token in tokens), tokens


def test_reading_the_descriptors_and_the_policy_pack_loads_no_cloud_sdk() -> None:
    code = (
        "import sys; from slonk_infra.clouds.registry import targets; targets(); import slonk_infra.policy.policies; "
        "print(sorted(m for m in ('pulumi_gcp', 'pulumi_aws', 'pulumi_kubernetes') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_target_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: gcp, aws, local"):
        registry.target("azure")


def test_the_policy_tables_are_the_descriptors_types() -> None:
    every = [t.policy_types for t in registry.targets().values()]
    assert {t for p in every for t in p.managed_clusters} == policy_common.MANAGED_CLUSTER_TYPES
    assert {k: v for p in every for k, v in p.stateful.items()} == policy_common.STATEFUL_CLOUD_TYPES
    assert {k: v for p in every for k, v in p.accelerator_pools.items()} == policy_common.ACCELERATOR_POOL_TYPES
    assert {t for p in every for t in p.tpu_slice_pools} == policy_common.TPU_SLICE_POOL_TYPES


def test_no_policy_spells_a_cloud_resource_type() -> None:
    prefixes = tuple(f"{cloud}:" for cloud in registry.TARGETS)
    found = [
        f"{path.name}:{node.lineno} {node.value}"
        for path in sorted(POLICY_DIR.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(prefixes)
    ]
    assert found == [], "take resource types from the targets' descriptors (PolicyTypes)"


# A target no shipped stack uses: it answers to ``cloud: local`` (the declaration's tags are fixed),
# offers only an existing NFS export, allows one node per pool and keeps load balancers private.
def _toy_declaration_problems(declaration: ClusterDeclaration) -> list[Problem]:
    too_big = [i for i, pool in enumerate(declaration.pools) if pool.nodes > 1]
    return [Problem(f"pools[{i}].nodes", "a toy cluster runs one node per pool") for i in too_big]


def _toy_storage_problems(index: int, volume: StorageSpec) -> list[Problem]:
    return [] if volume.capacity_gib <= 100 else [Problem(f"storage[{index}].capacityGib", "toy exports hold 100 GiB")]


class ToyInfrastructure:
    """Stands in for a deployer component: records what deploy_cloud handed it."""

    def __init__(self, name: str, plan: ClusterPlan, opts: Any) -> None:
        self.name = name
        self.plan = plan


TOY = CloudTarget(
    cloud="local",
    deployer=f"{__name__}:ToyInfrastructure",
    storage_kinds=("nfs-export",),
    storage_problems=_toy_storage_problems,
    declaration_problems=_toy_declaration_problems,
    restrict_load_balancers=True,
    policy_types=PolicyTypes(),
)


def _toy_raw() -> dict[str, Any]:
    raw = declaration("local")
    for pool in raw["pools"]:
        pool.update(nodes=1, maxNodes=1)
    home = {"name": "home", "kind": "nfs-export", "capacityGib": 20, "mountPath": "/home"}
    raw["storage"] = [{**home, "server": "10.1.2.3", "exportPath": "/home"}]
    raw["login"]["serviceType"] = "LoadBalancer"
    return raw


def test_build_plan_consults_the_targets_it_is_given() -> None:
    with pytest.raises(DeclarationError) as refused:
        build_plan_for(declaration("local"), targets={"local": TOY})
    assert [str(p) for p in refused.value.problems] == [
        "storage[0].kind: 'nfs-server' is not available on local; allowed: nfs-export",
        "pools[0].nodes: a toy cluster runs one node per pool",
    ]
    plan = build_plan_for(_toy_raw(), targets={"local": TOY})
    assert plan.login_source_ranges == PRIVATE_RANGES
    with pytest.raises(DeclarationError, match="'local' is not a known target; allowed: gcp"):
        build_plan_for(_toy_raw(), targets={"gcp": registry.target("gcp")})


def test_a_new_target_is_one_descriptor_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("toy_target")
    module.TARGET = TOY  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_target", module)
    monkeypatch.setitem(registry.TARGETS, "local", "toy_target")

    raw = copy.deepcopy(_toy_raw())
    raw["storage"][0]["capacityGib"] = 500
    with pytest.raises(DeclarationError, match=r"storage\[0\]\.capacityGib: toy exports hold 100 GiB"):
        build_plan(raw)
    plan = build_plan(_toy_raw())
    # The login default comes from the descriptor through the plan, not from the cloud's name.
    assert login.service(plan)["spec"]["loadBalancerSourceRanges"] == list(PRIVATE_RANGES)
    component = deploy_cloud(plan, name="toy")
    assert isinstance(component, ToyInfrastructure)
    assert (component.name, component.plan) == ("toy", plan)
