"""Local adapter: an existing Kubernetes cluster (kind, k3d, minikube); only a Kubernetes provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.lazy import lazy_getattr

if TYPE_CHECKING:
    from slonk_infra.clouds.local.infrastructure import TOKEN, LocalInfrastructure

# Imported on first use, so the descriptor can be read without loading the Pulumi SDK.
_WHERE = {
    "TOKEN": "slonk_infra.clouds.local.infrastructure",
    "LocalInfrastructure": "slonk_infra.clouds.local.infrastructure",
}

__all__ = ["TOKEN", "LocalInfrastructure"]


__getattr__ = lazy_getattr(__name__, _WHERE)
