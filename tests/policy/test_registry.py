"""The pack's registry: one module per policy, each registered once, named after the module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

from pulumi_policy import Policy

import slonk_infra.policy
from slonk_infra.policy import ALL_POLICIES

DEFINITION = re.compile(r"^(\w+) = (?:Resource|Stack)ValidationPolicy\(", re.M)


def _policy_modules() -> dict[str, list[Policy]]:
    """Module name -> the Policy objects its source constructs (imports do not count)."""
    found: dict[str, list[Policy]] = {}
    for info in pkgutil.iter_modules(slonk_infra.policy.__path__):
        module = importlib.import_module(f"slonk_infra.policy.{info.name}")
        built = DEFINITION.findall(inspect.getsource(module))
        if built:
            found[info.name] = [getattr(module, name) for name in built]
    return found


def test_each_policy_lives_in_its_own_module_named_after_it() -> None:
    modules = _policy_modules()
    assert len(modules) == len(ALL_POLICIES)
    for name, policies in modules.items():
        assert [p.name for p in policies] == [name.replace("_", "-")], name


def test_every_policy_module_is_registered_once_and_nothing_else_is() -> None:
    defined = [p for policies in _policy_modules().values() for p in policies]
    assert sorted(p.name for p in ALL_POLICIES) == sorted(p.name for p in defined)
    assert len({p.name for p in ALL_POLICIES}) == len(ALL_POLICIES)
    assert all(any(p is q for q in defined) for p in ALL_POLICIES)
