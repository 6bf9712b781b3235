"""OperationsSpec: camelCase, defaults that work, a description on every field, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from slonk_infra.ops.config import (
    CloudSection,
    ControllerConfig,
    OperationsSpec,
    RemediationSpec,
    SignalsSpec,
    SpecError,
    load_config,
    load_spec,
)


def test_every_field_of_every_model_is_described() -> None:
    for model in (OperationsSpec, RemediationSpec, SignalsSpec):
        assert model.__doc__
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"


def test_camel_case_round_trip_and_defaults() -> None:
    spec = OperationsSpec.model_validate({"reasonPrefix": "ops:", "remediation": {"maxActionsPerWindow": 2}})
    assert spec.reason_prefix == "ops:" and spec.remediation.max_actions_per_window == 2
    dumped = spec.model_dump(by_alias=True)
    assert "reasonPrefix" in dumped and "maxPoolFraction" in dumped["remediation"]
    assert OperationsSpec.model_validate(dumped) == spec
    assert OperationsSpec().all_owned_prefixes == ("slonk:", "slonk-health:")


def test_the_health_checkers_prefix_is_the_one_it_writes() -> None:
    # Imported lazily: the health package is optional in images that run only the controller.
    from slonk_infra.health.drain import DRAIN_REASON_PREFIX

    assert DRAIN_REASON_PREFIX in OperationsSpec().owned_reason_prefixes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "remediation: {maxPoolFraction: 2}",
            "remediation.maxPoolFraction: Input should be less than or equal to 1 (got 2)",
        ),
        ("intervalSecond: 5", "intervalSecond: unknown field"),
        ("reasonPrefix: 'has space'", "reasonPrefix: String should match pattern"),
        ("ownedReasonPrefixes: ['slonk:x']", "overlaps reasonPrefix 'slonk:'"),
        ("- a list", "expected a mapping of settings, got list"),
        ("a: [", "while parsing"),
    ],
)
def test_bad_files_give_one_line_naming_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert message in str(err.value)
    assert str(err.value).startswith(str(path))


def test_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("")
    assert load_spec(path) == OperationsSpec()


def test_models_are_frozen() -> None:
    spec = OperationsSpec()
    assert isinstance(spec, BaseModel)
    with pytest.raises(ValueError):
        spec.interval_seconds = 1  # type: ignore[misc]


def test_cloud_settings_default_to_acting_with_care() -> None:
    spec = OperationsSpec()
    assert spec.cloud_actions and spec.scale_in_grace_seconds == 600 and spec.max_removals_per_tick == 2
    assert spec.metrics_namespaces == ["gmp-system", "monitoring"]
    assert not spec.owns_pool_sizes  # off until enabled
    assert OperationsSpec(enabled=True).owns_pool_sizes
    assert not OperationsSpec(enabled=True, cloud_actions=False).owns_pool_sizes
    for model in (CloudSection, ControllerConfig):
        assert model.__doc__ and all(f.description for f in model.model_fields.values())


def test_the_cloud_section_is_read_beside_the_settings(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "intervalSeconds: 5\ncloud: {kind: aws, cluster: c, location: us-east-1, nodePools: {h100: h100},"
        " capacityBlocks: {h100: cr-1}}\n"
    )
    config = load_config(path)
    assert config.spec.interval_seconds == 5 and load_spec(path) == OperationsSpec(interval_seconds=5)
    assert config.cloud == CloudSection(
        kind="aws", cluster="c", location="us-east-1", node_pools={"h100": "h100"}, capacity_blocks={"h100": "cr-1"}
    )
    path.write_text("cloud: {kind: aws, cluster: '', location: x, nodePoolz: {}}\n")
    with pytest.raises(SpecError) as err:
        load_config(path)
    assert "cloud.cluster: String should have at least 1 character" in str(err.value)
    assert "cloud.nodePoolz: unknown field" in str(err.value)
    path.write_text("maxRemovalsPerTick: 0\n")
    with pytest.raises(SpecError, match=r"maxRemovalsPerTick: Input should be greater than or equal to 1 \(got 0\)"):
        load_config(path)
