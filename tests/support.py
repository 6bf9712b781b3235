"""Helpers shared by the tests: declarations resized, the cloud layer run under the mock runtime."""

from __future__ import annotations

import copy
import math
from collections import Counter
from typing import Any

from slonk_infra.binding import CloudResult
from slonk_infra.clouds import deploy_cloud
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.offline.runner import OfflineRun, Registration, run_offline
from slonk_infra.plan import ClusterPlan


def declaration(stack: str) -> dict[str, Any]:
    """A private copy of a shipped stack's raw declaration."""
    return copy.deepcopy(load_declaration(stack))


def with_nodes(raw: dict[str, Any], nodes: int) -> dict[str, Any]:
    """The declaration with every pool resized to ``nodes`` nodes (and as many Slurm records)."""
    out = copy.deepcopy(raw)
    for pool in out["pools"]:
        pool["nodes"] = nodes
        pool.pop("maxNodes", None)
    return out


def resolve_result(result: CloudResult) -> dict[str, Any]:
    """The volume sources of a cloud result, resolved (they may hold Outputs)."""
    return {name: dict(vol.pv_source) for name, vol in result.volumes.items()}


def deploy(plan: ClusterPlan) -> OfflineRun[CloudResult]:
    """Run the plan's cloud layer under the mock runtime."""
    return run_offline(lambda: deploy_cloud(plan).result, resolve_result)


def count_by_type(regs: list[Registration]) -> dict[str, int]:
    """Registrations per resource type."""
    return dict(Counter(r.type for r in regs))


def ancestors(regs: list[Registration], reg: Registration) -> list[str]:
    """URNs of the components above ``reg``, nearest first."""
    by_urn = {r.urn: r for r in regs}
    out: list[str] = []
    parent = by_urn.get(reg.parent)
    while parent is not None:
        out.append(parent.urn)
        parent = by_urn.get(parent.parent)
    return out


def parse_quantity_mib(value: str) -> int:
    """A Kubernetes memory quantity (``512Mi``, ``2Gi``, ``1048576Ki``, bytes) in MiB, rounded up."""
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return math.ceil(float(value[: -len(suffix)]) * factor)
    return math.ceil(int(value) / (1024 * 1024))


def parse_quantity_m(value: str) -> int:
    """A Kubernetes CPU quantity (``250m``, ``2``, ``0.5``) in millicores."""
    if value.endswith("m"):
        return int(value[:-1])
    return round(float(value) * 1000)
