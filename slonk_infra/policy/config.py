"""The shared policy configuration file, read the way the Pulumi CLI reads ``--policy-pack-config``.

Top-level keys are policy names (or ``all``); a value is an enforcement level string, or an object with
an optional ``enforcementLevel`` and the policy's properties. Schema defaults are filled in first, then
the file's values; required properties and simple JSON types are checked, and unlike the CLI an unknown
policy name is an error, because a typo there silently drops a setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi_policy import EnforcementLevel, Policy

LEVEL_KEY = "enforcementLevel"
ALL_KEY = "all"


class PolicyConfigError(ValueError):
    """The policy configuration file is missing, not JSON, or does not fit the policies' schemas."""


@dataclass(frozen=True)
class PolicyConfig:
    """Per-policy properties and enforcement levels, after defaults and the file are applied."""

    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    levels: dict[str, EnforcementLevel] = field(default_factory=dict)
    source: str = ""

    def level(self, policy: Policy) -> EnforcementLevel:
        """The enforcement level a policy runs at (the file overrides the policy's own)."""
        return self.levels.get(policy.name) or policy.enforcement_level or EnforcementLevel.ADVISORY

    def for_policy(self, name: str) -> dict[str, Any]:
        """A copy of one policy's properties."""
        return dict(self.properties.get(name, {}))


def _level(value: Any, where: str) -> EnforcementLevel:
    try:
        return EnforcementLevel(value)
    except ValueError:
        choices = ", ".join(level.value for level in EnforcementLevel)
        raise PolicyConfigError(f"{where}: {value!r} is not an enforcement level ({choices})") from None


def read_raw(path: Path) -> dict[str, Any]:
    """The file's JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyConfigError(f"policy configuration {path} not found") from None
    except json.JSONDecodeError as err:
        raise PolicyConfigError(f"policy configuration {path} is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise PolicyConfigError(f"policy configuration {path} must be a JSON object keyed by policy name")
    return data


def initial_config(raw: Mapping[str, Any]) -> dict[str, EnforcementLevel | dict[str, Any]]:
    """The file in ``PolicyPack(initial_config=...)`` form (levels as enums), for the pack itself."""
    out: dict[str, EnforcementLevel | dict[str, Any]] = {}
    for name, value in raw.items():
        if isinstance(value, str):
            out[name] = _level(value, name)
        elif isinstance(value, dict):
            entry = dict(value)
            if LEVEL_KEY in entry:
                entry[LEVEL_KEY] = _level(entry[LEVEL_KEY], f"{name}.{LEVEL_KEY}")
            out[name] = entry
    return out


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None:
        return True
    if isinstance(value, bool) and kind != "boolean":
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    if not isinstance(value, _JSON_TYPES.get(str(kind), (object,))):
        return False
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return all(_type_ok(item, schema["items"]) for item in value)
    return True


def resolve(raw: Mapping[str, Any], policies: Sequence[Policy], source: str = "") -> PolicyConfig:  # noqa: C901  one check per config key, each with its message
    """Apply schema defaults, then ``raw``; check names, required properties and types."""
    known = {p.name: p for p in policies}
    properties: dict[str, dict[str, Any]] = {}
    levels: dict[str, EnforcementLevel] = {}
    for policy in policies:
        schema = policy.config_schema
        defaults = {k: v["default"] for k, v in (schema.properties if schema else {}).items() if "default" in v}
        properties[policy.name] = defaults
    problems: list[str] = []
    for name, value in raw.items():
        if name != ALL_KEY and name not in known:
            problems.append(f"{name}: no such policy (known: {', '.join(sorted(known))})")
            continue
        if isinstance(value, str):
            level: EnforcementLevel | None = _level(value, name)
            given: dict[str, Any] = {}
        elif isinstance(value, dict):
            given = dict(value)
            level = _level(given.pop(LEVEL_KEY), f"{name}.{LEVEL_KEY}") if LEVEL_KEY in given else None
        else:
            problems.append(f"{name}: must be an enforcement level or an object")
            continue
        if name == ALL_KEY:
            if level is not None:
                levels.update({p: level for p in known if p not in levels})
            continue
        if level is not None:
            levels[name] = level
        properties[name].update(given)
    for policy in policies:
        schema = policy.config_schema
        props = properties[policy.name]
        for key in (schema.required or []) if schema else []:
            if key not in props:
                problems.append(f"{policy.name}: {key} is required")
        for key, value in props.items():
            spec = (schema.properties if schema else {}).get(key)
            if spec is None:
                problems.append(f"{policy.name}: {key} is not a setting of this policy")
            elif not _type_ok(value, spec):
                problems.append(f"{policy.name}: {key} must be of type {spec.get('type')}, not {value!r}")
    if problems:
        where = f"policy configuration {source}" if source else "policy configuration"
        raise PolicyConfigError(f"{where} is invalid:\n  " + "\n  ".join(problems))
    return PolicyConfig(properties=properties, levels=levels, source=source)


def load_policy_config(path: Path, policies: Sequence[Policy] | None = None) -> PolicyConfig:
    """Read and resolve the shared configuration file against ``policies`` (default: the whole pack)."""
    if policies is None:
        from slonk_infra.policy.policies import ALL_POLICIES

        policies = ALL_POLICIES
    return resolve(read_raw(path), policies, str(path))
