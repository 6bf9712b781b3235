"""Bad declarations are rejected before any resource exists, naming the field, the value and what is allowed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.stacks import load_declaration

Raw = dict[str, Any]


def gcp() -> Raw:
    return copy.deepcopy(load_declaration("gcp"))


def aws() -> Raw:
    return copy.deepcopy(load_declaration("aws"))


def local() -> Raw:
    return copy.deepcopy(load_declaration("local"))


def edit(base: Callable[[], Raw], fn: Callable[[Raw], object]) -> Raw:
    raw = base()
    fn(raw)
    return raw


def pool(raw: Raw, i: int = 0) -> Raw:
    p: Raw = raw["pools"][i]
    return p


# (id, declaration, field path that must be named, fragments the message must contain)
CASES: list[tuple[str, Raw, str, list[str]]] = [
    (
        "unknown machine type, closest name suggested",
        edit(gcp, lambda r: pool(r).update(machineType="a3-megagpu-8x", accelerator=None)),
        "pools[0].machineType",
        ["'a3-megagpu-8x'", "did you mean 'a3-megagpu-8g'"],
    ),
    (
        "unknown accelerator type",
        edit(gcp, lambda r: pool(r)["accelerator"].update(type="h1000")),
        "pools[0].accelerator.type",
        ["'h1000'", "allowed:", "h100"],
    ),
    (
        "accelerator not offered on the cloud",
        edit(gcp, lambda r: pool(r)["accelerator"].update(type="l40s")),
        "pools[0].accelerator.type",
        ["'l40s' is not offered on gcp", "offered on: aws"],
    ),
    (
        "accelerator count not offered",
        edit(aws, lambda r: pool(r)["accelerator"].update(count=4)),
        "pools[0].accelerator.count",
        ["h100 x4 is not offered on aws", "allowed counts: 8"],
    ),
    (
        "TPU slices on AWS",
        edit(aws, lambda r: r.update(tpuSlices=[{"name": "v5p", "generation": "v5p", "topology": "2x2x1"}])),
        "tpuSlices[0]",
        ["only on gcp", "not on aws"],
    ),
    (
        "TPU topology invalid for its generation",
        edit(gcp, lambda r: r["tpuSlices"][0].update(topology="4x4")),
        "tpuSlices[0].topology",
        ["'4x4' is not a valid v5p slice topology", "4x4x4"],
    ),
    (
        "unknown TPU generation",
        edit(gcp, lambda r: r["tpuSlices"][0].update(generation="v5x")),
        "tpuSlices[0].generation",
        ["'v5x'", "v5p"],
    ),
    (
        "zero nodes",
        edit(gcp, lambda r: pool(r).update(nodes=0)),
        "pools[0].nodes",
        ["greater than 0", "got 0"],
    ),
    (
        "negative slice count",
        edit(gcp, lambda r: r["tpuSlices"][0].update(slices=-1)),
        "tpuSlices[0].slices",
        ["greater than 0", "got -1"],
    ),
    (
        "duplicate pool names",
        edit(gcp, lambda r: pool(r, 1).update(name="h100-a")),
        "pools[1].name",
        ["'h100-a' collides with pools[0].name"],
    ),
    (
        "slice name collides with a pool",
        edit(gcp, lambda r: pool(r, 2).update(name="v5p-1")),
        "tpuSlices[0].name",
        ["'v5p-1' collides with pools[2].name"],
    ),
    (
        "pool name too long",
        edit(gcp, lambda r: pool(r).update(name="h100-" + "x" * 40)),
        "pools[0].name",
        ["45 characters", "at most 30"],
    ),
    (
        "pool name not DNS-safe",
        edit(gcp, lambda r: pool(r).update(name="H100_A")),
        "pools[0].name",
        ["'H100_A' is not a DNS-1123 label", "lowercase"],
    ),
    (
        "reserved pool name",
        edit(local, lambda r: pool(r).update(name="login")),
        "pools[0].name",
        ["'login' is reserved"],
    ),
    (
        "storage kind not available on the cloud",
        edit(aws, lambda r: r["storage"][0].update(kind="filestore")),
        "storage[0].kind",
        ["'filestore' is not available on aws", "allowed: efs, fsx-lustre, nfs-server, nfs-export"],
    ),
    (
        "unknown storage kind",
        edit(gcp, lambda r: r["storage"][0].update(kind="gcsfuse")),
        "storage[0].kind",
        ["'filestore'", "got 'gcsfuse'"],
    ),
    (
        "Filestore capacity below the minimum",
        edit(gcp, lambda r: r["storage"][0].update(capacityGib=100)),
        "storage[0].capacityGib",
        ["100 GiB is not a Filestore ZONAL size: 1024..9984 GiB in steps of 256", "nearest: 1024 GiB"],
    ),
    (
        "image reference not parseable",
        edit(gcp, lambda r: r["image"].update(reference="Registry/Bad Image::tag")),
        "image.reference",
        ["not a parseable image reference"],
    ),
    (
        "partition names an unknown pool",
        edit(gcp, lambda r: r["slurm"].update(partitions=[{"name": "p", "pools": ["h100a"]}])),
        "slurm.partitions[0].pools[0]",
        ["'h100a' is not a known pool or TPU slice", "did you mean 'h100-a'"],
    ),
    (
        "partition time limit slurmctld cannot parse",
        edit(gcp, lambda r: r["slurm"].update(partitions=[{"name": "p", "pools": ["*"], "maxTime": "48h"}])),
        "slurm.partitions[0].maxTime",
        ["'48h' is not a Slurm time", "DAYS-HH:MM:SS or UNLIMITED"],
    ),
    (
        "unknown field (typo)",
        edit(gcp, lambda r: pool(r).update(nodez=3)),
        "pools[0].nodez",
        ["unknown field"],
    ),
    (
        "unknown cloud",
        edit(gcp, lambda r: r.update(cloud="azure")),
        "cloud",
        ["'azure' is not a known cloud", "allowed: aws, gcp, local"],
    ),
    (
        "cloud missing",
        edit(gcp, lambda r: r.pop("cloud")),
        "cloud",
        ["required field is missing; one of: gcp, aws, local"],
    ),
    (
        "gcp settings missing on gcp (the declaration is a tagged type per cloud)",
        edit(gcp, lambda r: r.pop("gcp")),
        "gcp",
        ["required when cloud is gcp"],
    ),
    (
        "another cloud's settings",
        edit(local, lambda r: r.update(aws={"vpcId": "vpc-1", "subnetIds": ["subnet-1"]})),
        "aws",
        ["given but cloud is local"],
    ),
    (
        "a field error on a tagged declaration has no tag in its path",
        edit(aws, lambda r: pool(r, 0).update(nodes=0)),
        "pools[0].nodes",
        ["greater than 0"],
    ),
    (
        "GPU pool on the local cloud",
        edit(
            local,
            lambda r: r["pools"].append(
                {"name": "gpu", "kind": "gpu", "accelerator": {"type": "h100", "count": 8}, "nodes": 1}
            ),
        ),
        "pools[2].accelerator.type",
        ["'h100' is not offered on local", "none: CPU only"],
    ),
    (
        "machine type from another cloud",
        edit(aws, lambda r: pool(r, 2).update(machineType="n2-standard-16")),
        "pools[2].machineType",
        ["'n2-standard-16' is a gcp machine type, not offered on aws", "m7i.4xlarge"],
    ),
    (
        "explicit machine contradicts the accelerator request",
        edit(gcp, lambda r: pool(r).update(machineType="a3-ultragpu-8g")),
        "pools[0].machineType",
        ["carries h200 x8, not the requested h100 x8"],
    ),
    (
        "topology.yaml needs a newer Slurm than the image has",
        edit(gcp, lambda r: r["image"].update(slurmVersion="24.11")),
        "slurm.topology",
        ["'yaml' needs Slurm >= 25.05", "the image has 24.11"],
    ),
    (
        "topology/block on 22.05",
        edit(local, lambda r: (r["image"].update(slurmVersion="22.05"), r["slurm"].update(topology="block"))),
        "slurm.topology",
        ["'block' needs Slurm >= 23.11"],
    ),
    (
        "maxNodes below nodes",
        edit(gcp, lambda r: pool(r, 1).update(maxNodes=2)),
        "pools[1]",
        ["maxNodes 2 is below nodes 8"],
    ),
    (
        "region missing on gcp",
        edit(gcp, lambda r: r.pop("region")),
        "region",
        ["required on gcp"],
    ),
    (
        "two volumes at one mount path",
        edit(aws, lambda r: r["storage"][1].update(mountPath="/home")),
        "storage[1].mountPath",
        ["'/home' is already mounted"],
    ),
    (
        "no /home",
        edit(local, lambda r: r["storage"][0].update(mountPath="/data")),
        "storage",
        ["no volume mounts at /home"],
    ),
    (
        "unknown Filestore tier",
        edit(gcp, lambda r: r["storage"][0].update(tier="ZONNAL")),
        "storage[0].tier",
        ["'ZONNAL' is not a known filestore tier", "did you mean 'ZONAL'"],
    ),
    (
        "pool named like the system node pool",
        edit(gcp, lambda r: pool(r, 2).update(name="slonk-system")),
        "pools[2].name",
        ["'slonk-system' is reserved"],
    ),
    (
        "bad Slurm feature name",
        edit(gcp, lambda r: pool(r).update(features=["fast net"])),
        "pools[0].features[0]",
        ["'fast net' is not a Slurm feature name"],
    ),
]


def assert_refused_at(declaration: Raw, path: str, fragments: list[str]) -> None:
    """The plan refuses ``declaration`` with a problem at ``path`` whose message holds every fragment (the
    bad-declaration tables of every layer use this)."""
    with pytest.raises(DeclarationError) as info:
        build_plan(declaration)
    problems = {p.path: p.message for p in info.value.problems}
    assert path in problems, f"no problem at {path}; got {problems}"
    for fragment in fragments:
        assert fragment in problems[path], f"{fragment!r} not in {problems[path]!r}"


@pytest.mark.parametrize(("declaration", "path", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_declaration_is_rejected_with_a_precise_message(declaration: Raw, path: str, fragments: list[str]) -> None:
    assert_refused_at(declaration, path, fragments)


def test_table_cases_are_distinct() -> None:
    assert len({c[0] for c in CASES}) == len(CASES)


def test_every_problem_is_reported_at_once() -> None:
    raw = gcp()
    pool(raw)["accelerator"]["type"] = "h1000"
    raw["storage"][0]["kind"] = "efs"
    raw["tpuSlices"][0]["topology"] = "3x3x3"
    with pytest.raises(DeclarationError) as info:
        build_plan(raw)
    assert {p.path for p in info.value.problems} >= {
        "pools[0].accelerator.type",
        "storage[0].kind",
        "tpuSlices[0].topology",
    }


@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_shipped_stacks_are_valid(stack: str) -> None:
    build_plan(load_declaration(stack))


def test_a_health_interval_of_a_minute_or_less_is_refused_by_field() -> None:
    raw = copy.deepcopy(load_declaration("local"))
    raw["health"] = {"intervalSeconds": 5}
    with pytest.raises(DeclarationError) as err:
        build_plan(raw)
    assert "health.intervalSeconds" in str(err.value) and "greater than 60" in str(err.value)


@pytest.mark.parametrize(
    ("health", "field", "says"),
    [
        ({"intervalSeconds": 60}, "health.intervalSeconds", "greater than 60"),
        ({"gpu": {"xidWaitMs": 30000}, "disk": {"timeoutSeconds": 30}}, "health", "slurmd stops it after 60 s"),
    ],
)
def test_a_health_check_that_slurm_would_stop_or_overlap_is_refused(
    health: dict[str, Any], field: str, says: str
) -> None:
    raw = copy.deepcopy(load_declaration("local"))
    raw["health"] = health
    with pytest.raises(DeclarationError) as err:
        build_plan(raw)
    problems = {p.path: p.message for p in err.value.problems}
    assert says in problems[field], problems


def test_a_number_where_a_string_belongs_says_to_quote_it() -> None:
    """YAML reads 1.30 as 1.3 and 30:00 as 1800; the message says how to keep what was written."""
    from slonk_infra.clouds import build_plan
    from tests.support import declaration

    raw = declaration("local")
    raw.setdefault("kubernetes", {})["version"] = 1.3
    with pytest.raises(DeclarationError) as caught:
        build_plan(raw)
    (problem,) = caught.value.problems
    assert problem.path == "kubernetes.version"
    assert "got the number 1.3" in problem.message and "quote it" in problem.message
