"""The cloud registry and the rules each adapter owns."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from slonk_infra.clouds import registry
from slonk_infra.clouds.rules import CloudRules, StorageLimits, StorageRules
from slonk_infra.declaration.model import StorageSpec
from slonk_infra.plan import build_plan
from tests.support import declaration


@pytest.mark.parametrize("cloud", sorted(registry.TARGETS))
def test_every_target_meets_the_protocol(cloud: str) -> None:
    rules = registry.rules_for(cloud)
    assert isinstance(rules.cloud, str) and rules.cloud == cloud
    assert {"nfs-server", "nfs-export"} <= rules.storage_kinds
    for method in ("storage_problems", "declaration_problems", "deploy"):
        assert callable(getattr(rules, method))


def test_reading_rules_does_not_load_a_cloud_sdk() -> None:
    code = (
        "import sys; from slonk_infra.clouds.registry import rules_for; rules_for('gcp'); rules_for('aws'); "
        "print(sorted(m for m in ('pulumi_gcp', 'pulumi_aws') if m in sys.modules))"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_target_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: gcp, aws, local"):
        registry.rules_for("azure")


def test_storage_rules_tier_range_and_step() -> None:
    rules = StorageRules(
        kinds=frozenset({"filestore"}),
        tiers={"filestore": ("ZONAL", "BASIC_HDD")},
        limits={
            "filestore": StorageLimits(1024, 102400),
            "filestore/ZONAL": StorageLimits(1024, 102400, step=256),
        },
        default_tiers={"filestore": "ZONAL"},
    )
    vol = StorageSpec(name="home", kind="filestore", capacity_gib=1000)
    [range_problem] = rules.problems(0, vol)
    assert range_problem.path == "storage[0].capacityGib" and "1024..102400" in range_problem.message
    [step_problem] = rules.problems(1, vol.model_copy(update={"capacity_gib": 1100}))
    assert "steps of 256 GiB" in step_problem.message and "filestore ZONAL" in step_problem.message
    assert rules.problems(0, vol.model_copy(update={"capacity_gib": 1280})) == []
    # BASIC_HDD has no tier-specific limits here: the kind's range applies, without steps.
    assert rules.problems(0, vol.model_copy(update={"capacity_gib": 1100, "tier": "basic_hdd"})) == []
    [tier_problem] = rules.problems(2, vol.model_copy(update={"tier": "zonl"}))
    assert tier_problem.path == "storage[2].tier" and "did you mean 'ZONAL'" in tier_problem.message


def test_a_new_target_is_one_module_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target registered at run time deploys through deploy_cloud, with no other change."""
    from slonk_infra.clouds import deploy_cloud
    from slonk_infra.clouds.local_rules import RULES as LOCAL

    deployed: list[str] = []

    class Toy:
        cloud = "local"
        storage_kinds = LOCAL.storage_kinds
        storage_problems = LOCAL.storage_problems
        declaration_problems = LOCAL.declaration_problems

        def deploy(self, name: str, plan: Any, opts: Any) -> Any:
            deployed.append(name)
            return "component"

    rules: CloudRules = Toy()
    module = types.ModuleType("toy_target")
    module.RULES = rules  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_target", module)
    monkeypatch.setitem(registry.TARGETS, "local", "toy_target")
    plan = build_plan(declaration("local"))
    assert deploy_cloud(plan, name="x") == "component"  # type: ignore[comparison-overlap]
    assert deployed == ["x"]
