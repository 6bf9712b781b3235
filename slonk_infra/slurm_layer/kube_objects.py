"""Declaring a Kubernetes object dict as the matching typed pulumi_kubernetes resource."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# apiVersion -> SDK module; only the groups the Slurm layer uses.
_MODULES: dict[str, Any] = {
    "v1": k8s.core.v1,
    "apps/v1": k8s.apps.v1,
    "batch/v1": k8s.batch.v1,
    "policy/v1": k8s.policy.v1,
    "rbac.authorization.k8s.io/v1": k8s.rbac.v1,
    "networking.k8s.io/v1": k8s.networking.v1,
    "scheduling.k8s.io/v1": k8s.scheduling.v1,
    "storage.k8s.io/v1": k8s.storage.v1,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def resource_class(api_version: str, kind: str) -> Callable[..., pulumi.CustomResource]:
    """The typed resource class of an apiVersion/kind (raises KeyError for kinds not mapped)."""
    cls: Callable[..., pulumi.CustomResource] = getattr(_MODULES[api_version], kind)
    return cls


def declare(
    resource_name: str, obj: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
) -> pulumi.CustomResource:
    """Declare ``obj`` as a resource. Top-level fields become keyword arguments of the typed class, so a
    misspelt top-level field raises TypeError; nested fields keep Kubernetes' camelCase."""
    if obj["apiVersion"] not in _MODULES:
        # A custom resource (the Prometheus operator's ServiceMonitor): the generic class.
        rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return k8s.apiextensions.CustomResource(
            resource_name, api_version=obj["apiVersion"], kind=obj["kind"], opts=opts, **rest
        )
    cls = resource_class(obj["apiVersion"], obj["kind"])
    kwargs = {_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return cls(resource_name, opts=opts, **kwargs)
