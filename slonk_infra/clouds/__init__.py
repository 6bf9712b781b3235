"""Cloud layer: one descriptor and one adapter per target; the Slurm layer gets the same :class:`CloudResult`.

Every target is described once (:mod:`slonk_infra.clouds.target`, registered in
:mod:`slonk_infra.clouds.registry`); this module binds the descriptors to the two operations that
need them:

- :func:`build_plan` validates and resolves a declaration against every registered target's rules;
- :func:`deploy_cloud` creates the declared target's component, named by its descriptor:

  - ``gcp``: :class:`~slonk_infra.clouds.gcp.GcpInfrastructure` (GKE, node pools, Filestore)
  - ``aws``: :class:`~slonk_infra.clouds.aws.AwsInfrastructure` (EKS, node groups with EFA, EFS, FSx)
  - ``local``: :class:`~slonk_infra.clouds.local.LocalInfrastructure` (an existing cluster; nothing created)

Each adapter is a ``ComponentResource`` whose resource count grows with the number of worker
groups and storage entries, never with the number of nodes. Importing this module loads no cloud
SDK: a deployer's module is imported when :func:`deploy_cloud` first needs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from slonk_infra import plan as _plan
from slonk_infra.catalog import Catalog
from slonk_infra.clouds import registry
from slonk_infra.clouds.registry import MissingExtraError, require_sdk
from slonk_infra.declaration.errors import Problem
from slonk_infra.declaration.model import ClusterDeclaration
from slonk_infra.lazy import lazy_getattr
from slonk_infra.plan import ClusterPlan

if TYPE_CHECKING:
    import pulumi

    from slonk_infra.clouds.common import CloudComponent

__all__ = [
    "CloudComponent",
    "Deployer",
    "MissingExtraError",
    "build_plan",
    "deploy_cloud",
    "deployer_of",
    "require_sdk",
]

# The component base loads the Pulumi SDKs; imported on first use.
__getattr__ = lazy_getattr(__name__, {"CloudComponent": "slonk_infra.clouds.common"})


class Deployer(Protocol):
    """How a descriptor's deployer is called: a component class taking the component name, plan and options."""

    def __call__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None, /) -> CloudComponent: ...


def build_plan(raw: Mapping[str, Any] | ClusterDeclaration, catalog: Catalog | None = None) -> ClusterPlan:
    """Validate a declaration (raw stack config or model) against the registered targets and resolve it.

    Raises :class:`~slonk_infra.declaration.errors.DeclarationError` listing every problem.
    """
    return _plan.build_plan(raw, targets=registry.targets(), catalog=catalog)


def stack_config_problems(plan: ClusterPlan, config: Mapping[str, Any]) -> list[Problem]:
    """What the stack file's other config keys (``aws:region``) say against the plan's declaration."""
    check = registry.target(plan.declaration.cloud).stack_config_problems
    return check(plan.declaration, config) if check else []


def deployer_of(cloud: str) -> Deployer:
    """The component class that deploys target ``cloud`` (imports its module, and so its SDK, now).

    Raises :class:`~slonk_infra.clouds.registry.MissingExtraError` naming the extra to install when the
    target's SDK is missing.
    """
    registry.require_sdk(cloud)
    module, _, name = registry.target(cloud).deployer.partition(":")
    deployer: Deployer = getattr(importlib.import_module(module), name)
    return deployer


def deploy_cloud(
    plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None, name: str | None = None
) -> CloudComponent:
    """Create the cloud side of ``plan`` as one component (named ``name``, default the cluster's name).

    Its ``result`` (a :class:`~slonk_infra.binding.CloudResult`) is what the Slurm layer consumes.
    """
    return deployer_of(plan.declaration.cloud)(name or plan.name, plan, opts)
