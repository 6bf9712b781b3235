"""Helpers of the Kubernetes builder tests: shipped stacks' plans (optionally edited) and object lookups."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.manifests import KubeInputs, build_manifests
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import SlurmFiles, render_slurm_files

Obj = dict[str, Any]


def plan_for(stack: str, edit: Callable[[dict[str, Any]], None] | None = None) -> ClusterPlan:
    """The plan of a shipped stack, after ``edit`` changed a private copy of its declaration."""
    raw: dict[str, Any] = copy.deepcopy(load_declaration(stack))
    if edit is not None:
        edit(raw)
    return build_plan(raw)


def with_slurm(version: str) -> Callable[[dict[str, Any]], None]:
    """Declaration edit: the image carries Slurm ``version`` (topology as a tree, which every release reads)."""

    def edit(raw: dict[str, Any]) -> None:
        raw["image"]["slurmVersion"] = version
        raw["slurm"]["topology"] = "tree"

    return edit


def with_rest_api(raw: dict[str, Any]) -> None:
    """Declaration edit: ask for slurmrestd."""
    raw.setdefault("slurm", {})["restApi"] = True


def without_rest_api(raw: dict[str, Any]) -> None:
    """Declaration edit: no slurmrestd, and so no operations controller."""
    raw.setdefault("slurm", {})["restApi"] = False
    raw.pop("operations", None)


def files_for(plan: ClusterPlan) -> SlurmFiles:
    """The Slurm files of a plan."""
    return render_slurm_files(plan)


def objects(plan: ClusterPlan, inputs: KubeInputs | None = None) -> list[Obj]:
    """Every object of the Slurm layer for ``plan``."""
    return build_manifests(plan, render_slurm_files(plan), inputs)


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    """The one object of ``kind`` called ``name``."""
    [found] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def container(pod_spec: Obj, name: str) -> Obj:
    """A container or init container of a pod spec by name."""
    found: list[Obj] = [c for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]] if c["name"] == name]
    [one] = found
    return one


def mounts(c: Obj) -> dict[str, str]:
    """Mount path -> volume name of a container."""
    return {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a matchLabels selector selects objects with ``labels``."""
    return all(labels.get(k) == v for k, v in selector.items())
