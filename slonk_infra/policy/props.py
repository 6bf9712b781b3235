"""Reading resource properties as a policy receives them.

The analyzer hands policies camelCase wire dicts wrapped in proxies (``Mapping`` / ``Sequence``, not
``dict`` / ``list``) that raise :class:`UnknownValueError` when a value is unknown during preview; numbers
arrive as floats. These helpers accept both proxies and plain dicts, return a default for missing or
mis-shaped values, and let unknowns propagate unless the caller asks to skip them, so the analyzer can
report "can't run during preview" instead of a wrong verdict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from slonk_infra.vocab import APP as SLURM_APP
from slonk_infra.vocab import COMPONENT as COMPONENT_LABEL
from slonk_infra.vocab import GPU_RESOURCE, GROUP_LABEL, NAME_LABEL, TPU_RESOURCE, WORKER_COMPONENT

# Kinds whose objects run containers, and where their pod spec sits.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
CONTAINER_LISTS = (
    ("initContainers", "init container"),
    ("containers", "container"),
    ("ephemeralContainers", "ephemeral container"),
)


def is_map(value: Any) -> bool:
    """A dict or the analyzer's dict proxy."""
    return isinstance(value, Mapping)


def is_list(value: Any) -> bool:
    """A list or the analyzer's list proxy (strings are not lists here)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def get(obj: Any, *path: str | int, default: Any = None) -> Any:
    """The value at ``path`` under ``obj``, or ``default`` if any step is missing or of the wrong shape."""
    current = obj
    for key in path:
        if isinstance(key, int):
            if not is_list(current) or not -len(current) <= key < len(current):
                return default
        elif not is_map(current):
            return default
        try:
            current = current[key]
        except (KeyError, IndexError):
            return default
    return default if current is None else current


def known(obj: Any, *path: str | int, default: Any = None) -> Any:
    """Like :func:`get`, but an unknown value gives ``default`` (for descriptions and best-effort scans)."""
    try:
        return get(obj, *path, default=default)
    except UnknownValueError:
        return default


def items(obj: Any) -> Iterator[tuple[str, Any]]:
    """Key/value pairs of a mapping, skipping values unknown during preview."""
    if not is_map(obj):
        return
    for key in obj:
        try:
            yield str(key), obj[key]
        except UnknownValueError:
            continue


def as_int(value: Any) -> int | None:
    """An integral count from a wire number (float) or a quantity string (``"8"``); None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


def kind_of(resource_type: str) -> str:
    """``kubernetes:apps/v1:StatefulSet`` -> ``StatefulSet``; other providers' types give ``""``."""
    if not resource_type.startswith("kubernetes:"):
        return ""
    return resource_type.rsplit(":", 1)[-1]


def describe(resource_type: str, props: Any, name: str) -> str:
    """How a violation names a resource: ``StatefulSet slurm/h100-a`` or ``gcp NodePool h100-a``."""
    kind = kind_of(resource_type)
    if resource_type.startswith("kubernetes:helm.sh/"):
        release, namespace = known(props, "name", default=name), known(props, "namespace")
        return f"Helm {kind} {namespace}/{release}" if isinstance(namespace, str) else f"Helm {kind} {release}"
    if kind:
        obj_name = known(props, "metadata", "name", default=name)
        namespace = known(props, "metadata", "namespace")
        return f"{kind} {namespace}/{obj_name}" if isinstance(namespace, str) else f"{kind} {obj_name}"
    short = resource_type.rsplit(":", 1)[-1] if ":" in resource_type else resource_type
    provider = resource_type.split(":", 1)[0]
    return f"{provider} {short} {name}"


def labels(props: Any) -> dict[str, str]:
    """Labels of an object and of its pod template together (the template wins on conflicts)."""
    out: dict[str, str] = {}
    for path in (("metadata", "labels"), ("spec", "template", "metadata", "labels")):
        for key, value in items(get(props, *path)):
            if isinstance(value, str):
                out[key] = value
    return out


def pod_spec(resource_type: str, props: Any) -> Any:
    """The pod spec of a workload object, or None for anything that runs no containers."""
    path = POD_SPEC_PATHS.get(kind_of(resource_type))
    return None if path is None else get(props, *path)


def is_slurm(props: Any) -> bool:
    """Whether the object belongs to a Slurm cluster (``app.kubernetes.io/name: slurm``)."""
    return labels(props).get(NAME_LABEL) == SLURM_APP


def worker_group(props: Any) -> str | None:
    """The worker group of a Slurm worker workload (``slonk.dev/group``), None for other workloads."""
    lab = labels(props)
    group = lab.get(GROUP_LABEL)
    if group is None and lab.get(COMPONENT_LABEL) == WORKER_COMPONENT:
        group = known(props, "metadata", "name")
    return group if isinstance(group, str) else None


@dataclass(frozen=True)
class Container:
    """One container of a pod spec and where it sits (``container`` / ``init container``)."""

    name: str
    role: str
    spec: Any

    @property
    def image(self) -> Any:
        """The image reference (may raise if unknown during preview)."""
        return get(self.spec, "image")

    def limit(self, resource: str) -> int | None:
        """The container's limit for ``resource`` (extended resources may give only a request)."""
        value = get(self.spec, "resources", "limits", resource)
        if value is None:
            value = get(self.spec, "resources", "requests", resource)
        return as_int(value)


def containers(spec: Any) -> Iterator[Container]:
    """Every init, regular and ephemeral container of a pod spec."""
    for key, role in CONTAINER_LISTS:
        entries = get(spec, key, default=[])
        if not is_list(entries):
            continue
        for entry in entries:
            name = known(entry, "name", default="?")
            yield Container(name=str(name), role=role, spec=entry)


def accelerator_limits(spec: Any) -> dict[str, int]:
    """``{"gpu": n, "tpu": m}`` summed over a pod's regular containers (what the pod holds on its node)."""
    totals: dict[str, int] = {}
    for container in containers(spec):
        if container.role != "container":
            continue
        for gres, resource in (("gpu", GPU_RESOURCE), ("tpu", TPU_RESOURCE)):
            count = container.limit(resource)
            if count:
                totals[gres] = totals.get(gres, 0) + count
    return totals


def accelerator_container(spec: Any) -> str:
    """Name of the container that asks for accelerators (``slurmd`` here), for messages."""
    for container in containers(spec):
        if container.role == "container" and (container.limit(GPU_RESOURCE) or container.limit(TPU_RESOURCE)):
            return container.name
    first = next((c for c in containers(spec) if c.role == "container"), None)
    return first.name if first else "?"


def dims_product(topology: str) -> int | None:
    """Chips of a TPU topology ``4x4x4`` (the product of its dimensions), None if malformed."""
    parts = topology.strip().lower().split("x")
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    product = 1
    for part in parts:
        product *= int(part)
    return product
