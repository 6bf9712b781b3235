"""The mistakes a new user makes first: each refused (error) or warned, by field, and nothing else reported.

One row per mistake: the shipped stack it starts from, the edit, whether it must be an error or a warning,
the field path and words the message must carry. Each row also checks that the mistake is the only thing
reported (no cascade from it), and the shipped stacks themselves give no warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slonk_infra.catalog import load_catalog
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError, Problem
from slonk_infra.plan.lint import image_tag, tag_versions
from tests.support import declaration

Edit = Callable[[dict[str, Any]], None]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv0b3Rlc3RrZXlmb3JzbG9ua2luZnJhdGVzdHMwMDAw alice@laptop"


def _set(path: str, value: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = raw
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[last] = value

    return edit


def _users(users: list[dict[str, Any]]) -> Edit:
    return _set("users", users)


def _partitions(partitions: list[dict[str, Any]]) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw.setdefault("slurm", {})["partitions"] = partitions

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        for one in edits:
            one(raw)

    return edit


# (id, stack, edit, "error" | "warning", field path, words the message must contain)
MISTAKES: list[tuple[str, str, Edit, str, str, tuple[str, ...]]] = [
    (
        "max-time-48h",
        "local",
        _partitions([{"name": "batch", "pools": ["*"], "maxTime": "48h", "default": True}]),
        "error",
        "slurm.partitions[0].maxTime",
        ("48h",),
    ),
    ("zone-outside-region", "gcp", _set("zone", "us-east5-a"), "error", "zone", ("not a zone of region us-central1",)),
    ("misspelt-region", "gcp", _set("region", "us-centrall1"), "error", "region", ("us-central1",)),
    ("aws-zone-outside-region", "aws", _set("zone", "us-west-2a"), "error", "zone", ("us-east-1",)),
    (
        "tpu-v5p-where-none",
        "gcp",
        _both(
            _set("zone", "us-central1-f"), lambda raw: raw.update(pools=[p for p in raw["pools"] if p["kind"] != "gpu"])
        ),
        "warning",
        "zone",
        ("tpu-v5p", "us-central1-f"),
    ),
    (
        "image-tag-vs-slurm-version",
        "local",
        _set("image.slurmVersion", "24.11"),
        "warning",
        "image.slurmVersion",
        ("24.11", "25.05"),
    ),
    ("image-tag-vs-cuda-version", "gcp", _set("image.cudaVersion", "12.4"), "warning", "image.cudaVersion", ("12.8",)),
    (
        "user-without-key",
        "local",
        _users([{"name": "alice", "uid": 2001, "sshAuthorizedKeys": [KEY]}, {"name": "bob", "uid": 2002}]),
        "warning",
        "users[1].sshAuthorizedKeys",
        ("bob", "no SSH key"),
    ),
    (
        "pool-in-no-partition",
        "gcp",
        _partitions([{"name": "gpu", "pools": ["h100-a", "h100-b", "v5p"], "default": True}]),
        "warning",
        "pools[2]",
        ("'cpu'", "no partition"),
    ),
    (
        "bad-machine-type-no-cascade",
        "gcp",
        _both(
            _set("pools.2.machineType", "n2-standrd-16"),
            _partitions([{"name": "all", "pools": ["h100-a", "h100-b", "cpu", "v5p"], "default": True}]),
        ),
        "error",
        "pools[2].machineType",
        ("n2-standard-16",),
    ),
    (
        "directory-not-deployed",
        "local",
        _set("directory", {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}),
        "warning",
        "directory",
        ("no SSSD",),
    ),
    ("aws-no-admins", "aws", _set("aws.adminRoleArns", []), "warning", "aws.adminRoleArns", ("nobody",)),
]


def _outcome(raw: dict[str, Any]) -> tuple[list[Problem], tuple[Problem, ...]]:
    try:
        plan = build_plan(raw)
    except DeclarationError as err:
        return err.problems, ()
    return [], plan.warnings


@pytest.mark.parametrize(
    ("stack", "edit", "kind", "path", "words"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_each_mistake_is_reported_once_by_field(
    stack: str, edit: Edit, kind: str, path: str, words: tuple[str, ...]
) -> None:
    raw = declaration(stack)
    edit(raw)
    errors, warnings = _outcome(raw)
    reported = errors if kind == "error" else list(warnings)
    assert [p.path for p in reported] == [path], (
        f"expected one {kind} on {path}, got errors {errors}, warnings {warnings}"
    )
    if kind == "error":
        assert not warnings
    else:
        assert not errors
    for word in words:
        assert word in reported[0].message, reported[0]


@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_shipped_stacks_give_no_warning(stack: str) -> None:
    assert build_plan(declaration(stack)).warnings == ()


def test_tag_versions_read_only_tags_that_name_them() -> None:
    ref = "registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.8.1@sha256:" + "a" * 64
    assert image_tag(ref) == "25.05.3-cuda12.8.1"
    assert tag_versions(ref) == ("25.05", "12.8")
    assert tag_versions("localhost:5000/slonk:slurm-24.11-cuda-12.4") == ("24.11", "12.4")
    # A registry port is not a tag; a digest alone and a date tag name no versions.
    assert tag_versions("localhost:5000/slonk@sha256:" + "b" * 64) == (None, None)
    assert tag_versions("registry.example.com/slonk:2026-11-24") == (None, None)
    assert tag_versions("registry.example.com/slonk:latest") == (None, None)


def test_every_zone_offering_an_accelerator_is_a_zone_of_a_known_region() -> None:
    locations = load_catalog().locations
    known = {z for region in locations.gcp.regions for z in locations.zones("gcp", region)}
    for name, offering in locations.gcp.zones_offering.items():
        assert set(offering.zones) <= known, (name, sorted(set(offering.zones) - known))
        assert offering.source.startswith("https://"), name
    for name, aws_offering in locations.aws.regions_offering.items():
        assert set(aws_offering.regions) <= set(locations.aws.regions), name
