"""Offline render: run the real Pulumi program in-process under Pulumi's mock runtime.

No CLI, no cloud, no cluster. Every resource the program registers is recorded with its inputs and
options; Kubernetes objects are written as YAML, cloud resources as JSON, the Slurm files as they
are. Values that only exist after deployment (IPs, endpoints, ids) appear as ``<known after deploy: ...>``.

The program is slonk-infra's own or a user's (``--program``): a user's runs under its own project name
(``name:`` of its ``Pulumi.yaml``), so ``pulumi.Config()`` reads its keys from the stack file as under
``pulumi up``; its exports are written to ``outputs.json``; and the summary describes the plan each
:class:`slonk_infra.Cluster` of the run was built with, not a declaration in the stack file.
"""

from __future__ import annotations

import json
import runpy
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from slonk_infra import vocab
from slonk_infra.declaration.errors import StackFileError
from slonk_infra.declaration.stacks import PROJECT, PROJECT_FILE
from slonk_infra.offline.heap import few_full_collections
from slonk_infra.offline.runner import (
    RESOURCE_SIG,
    SECRET_PLACEHOLDER,
    SECRET_SIG,
    SECRET_SIG_KEY,
    UNKNOWN,
    Registration,
    after_deploy,
    run_offline,
)
from slonk_infra.plan import ClusterPlan

_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class ProgramRun:
    """What one in-process run of the program produced."""

    stack: str
    registrations: list[Registration]
    seconds: float
    plan: ClusterPlan | None = None
    """The plan of the run's one Cluster (None when it built none, or several: see ``plans``)."""
    transforms_run: int = 0
    plans: dict[str, ClusterPlan] = field(default_factory=dict)
    """The plan each :class:`slonk_infra.Cluster` of the run was built with, by component name."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """The program's exports, unknowns and secrets as placeholders, by name."""

    def transforms_note(self) -> str:
        """One line on resource transforms: offline runs apply them as ``pulumi preview`` does."""
        if not self.transforms_run:
            return "transforms: none registered by the program"
        return (
            f"transforms: {self.transforms_run} resource transform call(s) applied as `pulumi preview` would "
            "(own, then parents', then stack transforms); invoke transforms are not run offline"
        )

    def counts(self) -> Counter[str]:
        """Resources by type (custom resources only; components are not deployed objects)."""
        return Counter(r.type for r in self.registrations if r.custom and not r.type.startswith("pulumi:providers:"))

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Kubernetes objects as manifests (inputs are already camelCase wire form); Secret data masked.

        Sorted in apply order (namespace and cluster-wide objects first, workloads last) and then by name,
        so the rendered files do not depend on the order the runtime happened to register them in.
        """
        out = []
        for r in self.registrations:
            if _is_manifest(r):
                obj = _clean(r.inputs)
                if obj.get("kind") == "Secret":
                    # Every key of a Secret is shown under its real name, its value never.
                    for part in ("data", "stringData"):
                        if isinstance(obj.get(part), dict):
                            obj[part] = {k: SECRET_PLACEHOLDER for k in obj[part]}
                out.append(obj)
        return sorted(out, key=_apply_order)

    def cloud_resources(self) -> list[dict[str, Any]]:
        """Every other resource (cloud, providers, randomness) with its inputs and options, by type and name.

        Sorted so the file does not depend on the order the runtime happened to register them in.
        """
        found = [
            {"type": r.type, "name": r.name, "protect": r.protect, "inputs": _mask(r)}
            for r in self.registrations
            if r.custom and not _is_manifest(r)
        ]
        return sorted(found, key=lambda r: (r["type"], r["name"]))


APPLY_ORDER = (
    "Namespace", "PriorityClass", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
    "ConfigMap", "Secret",
    "PersistentVolume", "PersistentVolumeClaim", "Service", "NetworkPolicy", "Deployment", "StatefulSet", "CronJob",
    "PodDisruptionBudget",
)  # fmt: skip


def _apply_order(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    # The kind breaks ties between kinds of equal rank (those not listed) that share a name, such as a
    # ClusterRole and its binding, which the runtime registers in either order.
    kind = obj.get("kind", "")
    rank = APPLY_ORDER.index(kind) if kind in APPLY_ORDER else len(APPLY_ORDER)
    return rank, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], kind


def _is_manifest(r: Registration) -> bool:
    """Kubernetes objects proper (Helm releases and providers are recorded with the other resources)."""
    return r.custom and r.type.startswith("kubernetes:") and "kind" in r.inputs


def _mask(r: Registration) -> Any:
    if r.type.startswith("pulumi:providers:"):
        return {k: (SECRET_PLACEHOLDER if k == "kubeconfig" else v) for k, v in _clean(r.inputs).items()}
    return _clean(r.inputs)


def _clean(value: Any, secret: bool = False) -> Any:
    """Wire values back to what a person wrote: integral floats to ints, unknowns to placeholders.

    A secret's wire envelope is opened so its keys show as written; every value inside it becomes
    the secret placeholder.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return _clean(value.get("value"), secret=True)
        return {k: _clean(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, secret) for v in value]
    if value == UNKNOWN:
        return after_deploy("value")
    return SECRET_PLACEHOLDER if secret and value is not None else value


def clean_exports(exports: Mapping[str, Any]) -> dict[str, Any]:
    """Exports in wire form as a person reads them: secrets and unknowns as placeholders, resources by URN.

    Keys are sorted at every level: the wire form keeps no order, and a render must not change between runs.
    """
    cleaned: dict[str, Any] = _clean(_resource_urns(dict(exports)))
    return cleaned


def _resource_urns(value: Any) -> Any:
    # An exported resource travels as a reference envelope; its URN says which resource it is.
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == RESOURCE_SIG:
            return value.get("urn", "")
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return {**value, "value": _resource_urns(value.get("value"))}
        return {k: _resource_urns(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_resource_urns(v) for v in value]
    return value


def program_project(path: Path) -> str:
    """The project a program file runs under: ``name:`` of the nearest ``Pulumi.yaml`` in its folder or
    above, as the Pulumi CLI finds it; ``slonk-infra`` when there is none (a lone file using our program)."""
    folder = path.resolve().parent
    for directory in (folder, *folder.parents):
        for file in (directory / PROJECT_FILE, directory / "Pulumi.yml"):
            if file.is_file():
                return _project_name(file)
    return PROJECT


def _project_name(file: Path) -> str:
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise StackFileError(f"{file}: cannot be read as a Pulumi project file: {err}") from None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise StackFileError(f"{file}: a Pulumi project file needs 'name:' (the project name config keys start with)")
    return name


def program_file(path: Path) -> Callable[[], Any]:
    """A Pulumi program file (a project's ``__main__.py``) as a program to run, as the Pulumi CLI runs it:
    as ``__main__``, with its folder first on ``sys.path``."""

    def run() -> Any:
        folder = str(path.resolve().parent)
        sys.path.insert(0, folder)
        try:
            return runpy.run_path(str(path), run_name="__main__")
        finally:
            sys.path.remove(folder)

    return run


def run_program(
    stack: str,
    config: Mapping[str, Any],
    program: Callable[[], Any] | Path | None = None,
    *,
    project: str | None = None,
) -> ProgramRun:
    """Run ``program`` for ``stack`` with the stack file's ``config`` under mocks.

    ``program`` is slonk-infra's own (None), a program file (a ``Path``: its project name comes from its
    ``Pulumi.yaml``, see :func:`program_project`) or a function. ``project`` overrides the project name
    (default: the file's, else ``slonk-infra``). A config key the program requires and the stack file
    lacks raises :class:`StackFileError` naming the key.
    """
    import pulumi

    from slonk_infra.cluster import recording_plans
    from slonk_infra.program import main

    if isinstance(program, Path):
        project = project or program_project(program)
        program = program_file(program)
    wire = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    start = time.perf_counter()
    try:
        with recording_plans() as built, few_full_collections():
            # slonk-infra's own program reads no Kubernetes object's outputs back; a user's program may.
            run = run_offline(
                program or main, project=project or PROJECT, stack=stack, config=wire, kubernetes_outputs=bool(program)
            )
    except pulumi.ConfigMissingError as err:
        raise StackFileError(
            f"the program requires config key {err.key!r}, which the stack file does not set under 'config:'"
        ) from None
    seconds = time.perf_counter() - start
    plans = dict(built)
    plan = next(iter(plans.values())) if len(plans) == 1 else None
    return ProgramRun(stack, run.registrations, seconds, plan, run.transforms_run, plans, clean_exports(run.exports))


def write_render(run: ProgramRun, out_dir: Path) -> dict[str, Any]:
    """Write manifests, Slurm files, cloud resources and a summary under ``out_dir``; return the summary."""
    kube_dir, slurm_dir, cloud_dir = out_dir / "kubernetes", out_dir / "slurm", out_dir / "cloud"
    for d in (kube_dir, slurm_dir, cloud_dir):
        d.mkdir(parents=True, exist_ok=True)
    objects = run.kubernetes_objects()
    # Each object is dumped once, with libyaml when present (the pure-Python emitter dominated large
    # renders); all.yaml is the same documents joined, as safe_dump_all would write them.
    texts = [yaml.dump(obj, Dumper=_DUMPER, sort_keys=False) for obj in objects]
    for i, (obj, text) in enumerate(zip(objects, texts, strict=True)):
        name = f"{i:03d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        (kube_dir / name).write_text(text, encoding="utf-8")
    (kube_dir / "all.yaml").write_text("---\n".join(texts), encoding="utf-8")
    # The Slurm files are written from the ConfigMaps the program declared, not rendered a second time.
    folders = {vocab.CONFIG_MAP: "", vocab.TOPOLOGY_MAP: "", vocab.SCRIPTS_MAP: "scripts/"}
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in folders:
            for name, text in obj.get("data", {}).items():
                path = slurm_dir / f"{folders[obj['metadata']['name']]}{name}"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    (cloud_dir / "resources.json").write_text(json.dumps(run.cloud_resources(), indent=2), encoding="utf-8")
    (out_dir / "outputs.json").write_text(json.dumps(run.outputs, indent=2), encoding="utf-8")
    summary = {
        "stack": run.stack,
        "resources": sum(run.counts().values()),
        "by_type": dict(sorted(run.counts().items())),
        "kubernetes_objects": len(objects),
        "plan": run.plan.summary() if run.plan else {},
        "clusters": {
            name: {"cluster": plan.name, "cloud": plan.declaration.cloud, "plan": plan.summary()}
            for name, plan in run.plans.items()
        },
        "outputs": run.outputs,
        "seconds": round(run.seconds, 3),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary
