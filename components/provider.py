"""What the slonk-infra component provider hosts, and its schema, generated from the components' typed args.

Pulumi's component provider for Python reads each hosted component's ``args`` annotation (a ``TypedDict``:
:class:`slonk_infra.declaration.args.ClusterArgs`, generated from the pydantic declaration) and its
``pulumi.Output`` attributes, and serves the package schema from them. :func:`render` runs the same
analysis for the checked-in ``schema.json``, which ``python tools/generate.py`` rewrites with the other
generated files.
"""

import importlib.metadata
import json
from typing import Any

from pulumi import ComponentResource
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.schema import generate_schema

from slonk_infra import tokens
from slonk_infra.cluster import Cluster

PACKAGE = tokens.PACKAGE
# Components whose args are TypedDicts. The lower-level pieces take plans and cloud results (Python
# objects), so they stay Python-only; Cluster covers every cloud through its declaration.
COMPONENTS: list[type[ComponentResource]] = [Cluster]


def version() -> str:
    """The package version: the installed slonk-infra distribution's."""
    return importlib.metadata.version(PACKAGE)


def schema() -> dict[str, Any]:
    """The package schema, built exactly as ``component_provider_host`` builds it."""
    result = Analyzer(PACKAGE).analyze(COMPONENTS)
    dependencies = sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")
    spec = generate_schema(
        PACKAGE, version(), None, result["component_definitions"], result["type_definitions"], dependencies
    )
    out: dict[str, Any] = spec.to_json()
    return out


def render() -> str:
    """``schema.json``'s text."""
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"
