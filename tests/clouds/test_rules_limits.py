"""What each target refuses before any resource is declared: sizes a filesystem does not offer,
placement it would drop, and capacity that cannot exist (spot on a reservation)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from slonk_infra.clouds import build_plan, registry
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec
from tests.support import declaration


def _problems(cloud: str, index: int, **volume: Any) -> list[str]:
    return [str(p) for p in registry.target(cloud).storage_problems(index, StorageSpec(**volume))]


@pytest.mark.parametrize(
    ("tier", "gib", "refused"),
    [
        (None, 10240, False),  # ZONAL by default, the high band
        (None, 10000, True),  # between the bands
        ("ZONAL", 1280, False),
        ("ZONAL", 1300, True),
        ("BASIC_HDD", 1300, False),  # 1 GiB steps
        ("BASIC_SSD", 2048, True),  # below 2.5 TiB
        ("ENTERPRISE", 10496, True),  # above 10 TiB
        ("REGIONAL", 102400, False),
        ("HIGH_SCALE_SSD", 5120, True),
    ],
)
def test_filestore_sizes_are_checked_per_tier(tier: str | None, gib: int, refused: bool) -> None:
    found = _problems("gcp", 3, name="home", kind="filestore", tier=tier, capacity_gib=gib)
    assert bool(found) is refused, found
    if refused:
        [message] = found
        assert message.startswith("storage[3].capacityGib: ") and f"{gib} GiB" in message
        assert "nearest" in message or "GiB" in message


def test_filestore_message_names_bands_and_nearest() -> None:
    [message] = _problems("gcp", 0, name="home", kind="filestore", tier="zonal", capacity_gib=10000)
    assert "1024..9984 GiB in steps of 256 or 10240..102400 GiB in steps of 2560" in message
    assert "nearest: 10240 GiB" in message


@pytest.mark.parametrize(
    ("tier", "gib", "nearest"),
    [("PERSISTENT_2", 3600, 4800), ("SCRATCH_1", 4800, 7200), (None, 1000, 1200), ("SCRATCH_2", 38401, 40800)],
)
def test_fsx_sizes_fsx_would_round_are_refused_with_the_size_it_would_take(
    tier: str | None, gib: int, nearest: int
) -> None:
    [message] = _problems("aws", 1, name="scratch", kind="fsx-lustre", tier=tier, capacity_gib=gib)
    assert message.startswith("storage[1].capacityGib: ") and f"nearest: {nearest} GiB" in message
    assert _problems("aws", 1, name="scratch", kind="fsx-lustre", tier=tier, capacity_gib=nearest) == []


def test_shipped_stacks_pass_their_targets_rules() -> None:
    for cloud in registry.TARGETS:
        decl = ClusterDeclaration.model_validate(declaration(cloud))
        target = registry.target(cloud)
        assert target.declaration_problems(decl) == []
        for i, vol in enumerate(decl.storage):
            assert target.storage_problems(i, vol) == []


def _with_pool(cloud: str, **pool: Any) -> ClusterDeclaration:
    raw = copy.deepcopy(declaration(cloud))
    raw["pools"][0].update(pool)
    return ClusterDeclaration.model_validate(raw)


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_explicit_compact_placement_with_a_reservation_is_refused(cloud: str) -> None:
    decl = _with_pool(cloud, compactPlacement=True)
    assert decl.pools[0].reservation is not None
    [problem] = registry.target(cloud).declaration_problems(decl)
    assert problem.path == "pools[0].compactPlacement" and "reservation" in problem.message
    # The default (unset) yields to the reservation quietly: it was never asked for.
    assert registry.target(cloud).declaration_problems(_with_pool(cloud)) == []


def test_explicit_compact_placement_on_an_aws_cpu_group_is_refused() -> None:
    raw = copy.deepcopy(declaration("aws"))
    cpu = next(i for i, p in enumerate(raw["pools"]) if p["kind"] == "cpu")
    raw["pools"][cpu]["compactPlacement"] = True
    [problem] = registry.target("aws").declaration_problems(ClusterDeclaration.model_validate(raw))
    assert problem.path == f"pools[{cpu}].compactPlacement" and "CPU node groups" in problem.message
    # GKE places CPU pools compactly: nothing to refuse there.
    raw = copy.deepcopy(declaration("gcp"))
    cpu = next(i for i, p in enumerate(raw["pools"]) if p["kind"] == "cpu")
    raw["pools"][cpu]["compactPlacement"] = True
    assert registry.target("gcp").declaration_problems(ClusterDeclaration.model_validate(raw)) == []


def test_explicit_compact_placement_on_a_local_cluster_is_refused() -> None:
    [problem] = registry.target("local").declaration_problems(_with_pool("local", compactPlacement=True))
    assert problem.path == "pools[0].compactPlacement"


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_spot_with_a_reservation_is_refused_naming_both_fields(cloud: str) -> None:
    raw = copy.deepcopy(declaration(cloud))
    reserved = next(i for i, p in enumerate(raw["pools"]) if p.get("reservation"))
    raw["pools"][reserved]["spot"] = True
    with pytest.raises(DeclarationError) as err:
        build_plan(raw)
    [problem] = err.value.problems
    assert problem.path == f"pools[{reserved}]"
    assert "spot: true" in problem.message and "reservation" in problem.message


def test_spot_tpu_slice_with_a_reservation_is_refused() -> None:
    raw = copy.deepcopy(declaration("gcp"))
    raw["tpuSlices"][0].update(spot=True, reservation={"name": "v5p-res"})
    with pytest.raises(DeclarationError, match=r"tpuSlices\[0\]: spot: true and reservation 'v5p-res'"):
        build_plan(raw)
