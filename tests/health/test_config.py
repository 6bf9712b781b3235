"""HealthSpec: camelCase file keys, defaults, a description on every field, clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from slonk_infra.health.config import HealthSpec, SpecError, load_spec


def _models(model: type[BaseModel], seen: list[type[BaseModel]]) -> list[type[BaseModel]]:
    if model not in seen:
        seen.append(model)
        for info in model.model_fields.values():
            for arg in [info.annotation, *getattr(info.annotation, "__args__", ())]:
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    _models(arg, seen)
    return seen


def test_every_field_has_a_description_and_every_model_a_docstring() -> None:
    models = _models(HealthSpec, [])
    assert len(models) >= 6
    for model in models:
        assert model.__doc__ and model.__doc__.strip(), model
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"


def test_defaults_are_usable_and_round_trip_through_the_file_format(tmp_path: Path) -> None:
    spec = HealthSpec()
    assert spec.gpu.count == 0 and spec.gpu.max_volatile_uncorrectable_ecc == 0
    path = tmp_path / "health.json"
    path.write_text(spec.model_dump_json(by_alias=True))
    assert load_spec(path) == spec
    keys = json.loads(path.read_text())
    assert "exclusiveNodes" in keys and "maxIdleMemoryMiB" in keys["gpu"] and "minFreeGiB" in keys["disk"]


def test_yaml_with_camel_case_keys(tmp_path: Path) -> None:
    path = tmp_path / "health.yaml"
    path.write_text(
        "gpu:\n  count: 8\n  pcie: {minGeneration: 5}\n  fatalThrottleReasons: {hwSlowdown: needs-person}\n"
        "tpu: {chipsPerHost: 4}\ndisk: {homePath: null}\n"
    )
    spec = load_spec(path)
    assert spec.gpu.count == 8 and spec.gpu.pcie.min_generation == 5
    assert spec.gpu.fatal_throttle_reasons == {"hwSlowdown": "needs-person"}
    assert spec.tpu.chips_per_host == 4 and spec.disk.home_path is None


def test_an_empty_file_means_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "health.yaml"
    path.write_text("")
    assert load_spec(path) == HealthSpec()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"gpu": {"count": -1}}', "gpu.count: -1: Input should be greater than or equal to 0"),
        ('{"gpu": {"cuont": 8}}', "gpu.cuont: 8: Extra inputs are not permitted"),
        ('{"gpu": {"fatalThrottleReasons": {"hot": "none"}}}', "gpu.fatalThrottleReasons.hot.[key]: 'hot'"),
        ('{"gpu": {"unknownXidAction": "reboot"}}', "gpu.unknownXidAction: 'reboot': Input should be 'none'"),
        (
            '{"gpu": {"xidRules": [{"codes": [79], "action": "none"}, {"codes": [79], "action": "needs-person"}]}}',
            "XID 79 is in xidRules[0] and xidRules[1]",
        ),
        ("[1, 2]", "expected a mapping at the top level, got list"),
        ("gpu: [", "is not JSON or YAML"),
    ],
)
def test_bad_files_name_the_field_the_value_and_the_rule(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "health.json"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value)


def test_a_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "absent.json")


def test_xid_lookup() -> None:
    gpu = HealthSpec().gpu
    assert gpu.xid_action(79)[0] == "replace-machine"
    assert gpu.xid_action(12345) == ("needs-person", "not in xidRules")
