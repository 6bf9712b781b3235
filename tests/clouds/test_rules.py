"""The storage rules the targets' descriptors share (registry and descriptors: test_cloud_targets.py)."""

from __future__ import annotations

from slonk_infra.clouds.rules import StorageLimits, StorageRules
from slonk_infra.declaration.model import StorageSpec


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
