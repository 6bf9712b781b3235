"""Names a package exports but imports only when first used (PEP 562 ``__getattr__``).

The package root and the cloud packages use it so that importing them, or a light module beside
them, does not load the Pulumi or cloud SDKs: the pods' programs (slonk-health, slonk-ops) run in
images without them, and validating a declaration reads only a cloud's rules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``name`` from the module ``where[name]`` on first use."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
