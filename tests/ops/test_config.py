"""OperationsSpec: camelCase, defaults that work, a description on every field, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from slonk_infra.ops.config import OperationsSpec, RemediationSpec, SignalsSpec, SpecError, load_spec


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
