"""The targets this library deploys to: ``cloud`` value -> the module holding that target's ``RULES``.

Adding a target is one adapter package (its components and a ``rules`` module with a ``RULES``
object meeting :class:`~slonk_infra.clouds.rules.CloudRules`) and one line here.
"""

from __future__ import annotations

import importlib

from slonk_infra.clouds.rules import CloudRules

TARGETS: dict[str, str] = {
    "gcp": "slonk_infra.clouds.gcp.rules",
    "aws": "slonk_infra.clouds.aws.rules",
    "local": "slonk_infra.clouds.local_rules",
}


def rules_for(cloud: str) -> CloudRules:
    """The rules of target ``cloud`` (raises ValueError naming the known targets)."""
    if cloud not in TARGETS:
        raise ValueError(f"no cloud adapter for {cloud!r}; known: {', '.join(TARGETS)}")
    rules: CloudRules = importlib.import_module(TARGETS[cloud]).RULES
    return rules
