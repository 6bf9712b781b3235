"""What the aws target refuses before any resource is declared, by field (the table style of test_errors)."""

from __future__ import annotations

from typing import Any

import pytest

from slonk_infra.clouds import build_plan
from tests.declaration.test_errors import assert_refused_at, aws, edit, pool

Raw = dict[str, Any]


def public_login(raw: Raw, ranges: list[str], public_subnets: list[str] | None = None) -> None:
    raw["login"].update(serviceType="LoadBalancer", loadBalancerSourceRanges=ranges)
    if public_subnets is not None:
        raw["aws"]["publicSubnetIds"] = public_subnets


# (id, declaration, field path that must be named, fragments the message must contain)
CASES: list[tuple[str, Raw, str, list[str]]] = [
    (
        "public login range without public subnets",
        edit(aws, lambda r: public_login(r, ["8.8.8.0/24"])),
        "login.loadBalancerSourceRanges",
        ["'8.8.8.0/24' is a public range", "aws.publicSubnetIds", "internal load balancer"],
    ),
    (
        "the whole internet without public subnets",
        edit(aws, lambda r: public_login(r, ["10.0.0.0/8", "0.0.0.0/0"])),
        "login.loadBalancerSourceRanges",
        ["'0.0.0.0/0' is a public range"],
    ),
    (
        "several public ranges named together",
        edit(aws, lambda r: public_login(r, ["8.8.8.0/24", "1.1.1.0/24"])),
        "login.loadBalancerSourceRanges",
        ["'8.8.8.0/24', '1.1.1.0/24' are public ranges"],
    ),
    (
        "compact placement with a Capacity Block (still refused)",
        edit(aws, lambda r: pool(r).update(compactPlacement=True)),
        "pools[0].compactPlacement",
        ["cannot be honoured", "Capacity Block"],
    ),
]


@pytest.mark.parametrize(("declaration", "path", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_aws_declaration_is_rejected_with_a_precise_message(
    declaration: Raw, path: str, fragments: list[str]
) -> None:
    assert_refused_at(declaration, path, fragments)


def test_table_cases_are_distinct() -> None:
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    "change",
    [
        # Private ranges only: an internal load balancer, which the private subnets serve.
        lambda r: public_login(r, ["10.0.0.0/8", "192.168.0.0/16"]),
        # A public range with public subnets to put the internet-facing load balancer in.
        lambda r: public_login(r, ["8.8.8.0/24"], public_subnets=["subnet-0ccccccccccccccccc"]),
        # Not a load balancer: the ranges say nothing.
        lambda r: r["login"].update(serviceType="ClusterIP", loadBalancerSourceRanges=["8.8.8.0/24"]),
    ],
    ids=["private ranges", "public range with public subnets", "ClusterIP"],
)
def test_logins_that_can_be_reached_are_accepted(change: Any) -> None:
    build_plan(edit(aws, change))
