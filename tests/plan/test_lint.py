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
    (
        "misspelt-region",
        "gcp",
        _set("region", "us-centrall1"),
        "error",
        "region",
        ("does not match zone", "us-central1"),
    ),
    (
        "misspelt-region-no-zone",
        "aws",
        # Without the pools: the zone warning of GPU pools without a zone is another mistake's (below).
        _both(
            _set("region", "us-easst-1"),
            lambda raw: raw.pop("zone", None),
            lambda raw: raw.update(pools=[p for p in raw["pools"] if p["kind"] == "cpu"]),
        ),
        "warning",
        "region",
        ("not in the catalog", "did you mean 'us-east-1'"),
    ),
    ("not-a-region-name", "gcp", _set("region", "Iowa"), "error", "region", ("not a GCP region name",)),
    (
        "govcloud",
        "aws",
        _both(_set("region", "us-gov-west-1"), _set("zone", "us-gov-west-1a")),
        "error",
        "region",
        ("aws-us-gov",),
    ),
    ("aws-zone-outside-region", "aws", _set("zone", "us-west-2a"), "error", "zone", ("us-east-1",)),
    ("aws-az-id-of-another-region", "aws", _set("zone", "usw2-az1"), "error", "zone", ("use1-az",)),
    ("aws-unknown-az-letter", "aws", _set("zone", "us-east-1z"), "warning", "zone", ("not in the catalog's zones",)),
    ("gcp-unknown-zone-once", "gcp", _set("zone", "us-central1-z"), "warning", "zone", ("not in the catalog's zones",)),
    (
        "region-and-zone-disagree-names-the-zones-region",
        "gcp",
        _set("region", "us-centrall"),
        "error",
        "region",
        ("did you mean 'us-central1', the region of 'us-central1-a'",),
    ),
    (
        "region-opened-since",
        "gcp",
        _both(
            _set("region", "us-east9"),
            _set("zone", "us-east9-a"),
            lambda raw: raw.update(pools=[p for p in raw["pools"] if p["kind"] == "cpu"], tpuSlices=[]),
        ),
        "warning",
        "region",
        ("not in the catalog", "opened since"),
    ),
    (
        "ai-zone",
        "gcp",
        _both(
            _set("zone", "us-central1-ai1a"),
            lambda raw: raw.update(pools=[p for p in raw["pools"] if p["kind"] == "cpu"], tpuSlices=[]),
        ),
        "warning",
        "zone",
        ("AI zone",),
    ),
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
    (
        "no-operations-on-aws",
        "aws",
        # Without the Capacity Block, whose own warning (the command to scale it) is tested below.
        _both(_set("operations.enabled", False), lambda raw: raw["pools"][0].pop("reservation")),
        "warning",
        "operations.enabled",
        ("lowering nodes removes arbitrary machines", "enable operations (with cloudActions) for safe scale-in"),
    ),
    (
        "no-cloud-actions-on-gcp",
        "gcp",
        _set("operations.cloudActions", False),
        "warning",
        "operations.cloudActions",
        ("lowering nodes removes arbitrary machines",),
    ),
    (
        "gpudirect-on-an-existing-gke-cluster",
        "gcp",
        _both(_set("kubernetes.create", False), _set("kubernetes.authorizedNetworks", None)),
        "warning",
        "kubernetes.create",
        ("GPUDirect pools (h100-a, h100-b)", "multi-networking"),
    ),
    (
        "aws-gpu-pools-without-a-zone",
        "aws",
        lambda raw: raw.pop("zone", None),
        "warning",
        "zone",
        ("subnetIds[0]",),
    ),
    ("kubernetes-1.28", "gcp", _set("kubernetes.version", "1.28"), "error", "kubernetes.version", ("1.29",)),
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


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        # Tags that name Slurm: an explicit token, or a leading Slurm release in a repository named for Slurm.
        ("registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.8.1", ("25.05", "12.8")),
        ("registry.example.com/hpc/worker:slurm-24.11.5-cuda12.6.3-ubuntu24.04", ("24.11", "12.6")),
        ("ghcr.io/slinkyproject/slurmd:25.05-ubuntu24.04", ("25.05", None)),
        ("registry.example.com/x/img:ubuntu-24.04-slurm-25.05-cuda12.8", ("25.05", "12.8")),
        ("registry.example.com/x/img:pytorch-25.01-slurm-25.05", ("25.05", None)),
        ("registry.example.com/x/img:25.01-py3-slurm25.05", ("25.05", None)),
        # Look-alikes that say nothing about Slurm: NGC's monthly releases, OS versions.
        ("nvcr.io/nvidia/pytorch:25.01-py3", (None, None)),
        ("nvcr.io/nvidia/pytorch:24.11-py3", (None, None)),
        ("nvcr.io/nvidia/tensorflow:24.10-tf2-py3", (None, None)),
        ("nvcr.io/nvidia/nemo:25.02.01", (None, None)),
        ("registry.example.com/slurm-cuda:ubuntu-22.04", (None, None)),
        ("registry.example.com/slurm-cuda:24.04-25.05", (None, None)),
        ("registry.example.com/slurm-cuda:debian-12.10", (None, None)),
        ("nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04", (None, None)),
    ],
)
def test_tag_versions_read_real_world_tags(reference: str, expected: tuple[str | None, str | None]) -> None:
    assert tag_versions(reference) == expected


def test_tag_versions_read_only_tags_that_name_them() -> None:
    ref = "registry.example.com/slonk/slurm-cuda:25.05.3-cuda12.8.1@sha256:" + "a" * 64
    assert image_tag(ref) == "25.05.3-cuda12.8.1"
    assert tag_versions(ref) == ("25.05", "12.8")
    assert tag_versions("localhost:5000/slonk:slurm-24.11-cuda-12.4") == ("24.11", "12.4")
    assert tag_versions("localhost:5000/slurm:24.11-cuda-12.4") == ("24.11", "12.4")
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


@pytest.mark.parametrize("zone", ["use1-az4", "us-east-1-bos-1a", "us-east-1f"])
def test_aws_zone_forms_are_accepted(zone: str) -> None:
    """AZ IDs (what shared reservations name) and Local Zones are valid AWS zones: never refused."""
    raw = declaration("aws")
    raw["zone"] = zone
    assert build_plan(raw).warnings == ()


def test_no_accelerator_warning_where_the_list_does_not_reach_or_a_reservation_proves_it() -> None:
    # TPU v5p in europe-west4-b: the catalog's TPU lists cover North America only.
    raw = declaration("gcp")
    raw.update(region="europe-west4", zone="europe-west4-b", pools=[p for p in raw["pools"] if p["kind"] == "cpu"])
    assert [w for w in build_plan(raw).warnings if "tpu" in w.message] == []
    # An H100 pool with a reservation in a zone the GPU list lacks: the reservation is the proof.
    raw = declaration("gcp")
    raw.update(zone="us-central1-f", tpuSlices=[])
    raw["pools"] = [p for p in raw["pools"] if p["name"] in ("h100-a", "cpu")]
    assert raw["pools"][0]["reservation"]
    assert build_plan(raw).warnings == ()
    del raw["pools"][0]["reservation"]
    (warning,) = build_plan(raw).warnings
    assert warning.path == "zone" and "gcloud compute machine-types list" in warning.message


def test_az_id_prefixes_follow_the_region_names() -> None:
    from slonk_infra.catalog.regions import az_id_prefix

    assert [
        az_id_prefix(r) for r in ("us-east-1", "ap-southeast-2", "ap-northeast-1", "eu-central-1", "sa-east-1")
    ] == [
        "use1",
        "apse2",
        "apne1",
        "euc1",
        "sae1",
    ]


def test_a_capacity_block_without_the_controller_says_how_to_scale_it_up() -> None:
    raw = declaration("aws")
    raw["operations"] = {**raw.get("operations", {}), "enabled": False}
    errors, warnings = _outcome(raw)
    assert not errors
    [block] = [w for w in warnings if w.path == "pools[0].reservation"]
    assert "created with 0 nodes" in block.message
    assert "aws eks update-nodegroup-config --region us-east-1 --cluster-name slonk-aws" in block.message
