"""The descriptor of a deployment target: everything the library knows about it without its SDK.

Each target ships ``slonk_infra/clouds/<cloud>/target.py`` holding a ``TARGET`` :class:`CloudTarget`,
and :mod:`slonk_infra.clouds.registry` names that module in one line. From the descriptors come the
declaration rules and defaults the plan applies (the plan asks for them through its own protocol,
:class:`slonk_infra.plan.target.Target`, and receives them from :func:`slonk_infra.clouds.build_plan`),
the resource types the policy pack recognizes, and the component that deploys the target. The
component is named by a string, so reading a descriptor loads no cloud SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slonk_infra.declaration.errors import Problem
    from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec


@dataclass(frozen=True)
class PolicyTypes:
    """The target's own resource types (Pulumi type tokens) that the policy pack must recognize.

    The pack builds its tables from every registered descriptor, so a new target's filesystems and
    accelerator pools are guarded as soon as its descriptor names them.
    """

    managed_clusters: tuple[str, ...] = ()
    """A managed Kubernetes cluster and its node pools: where one is in a stack, claims must name a StorageClass."""
    stateful: Mapping[str, str] = field(default_factory=dict)
    """Resources holding user data (shared filesystems), with what to call them: they must be protected."""
    accelerator_pools: Mapping[str, str] = field(default_factory=dict)
    """Node pools that may carry GPUs or TPUs, each with the shape the taint policy reads it as (a key of
    ``slonk_infra.policy.gpu_node_pools_tainted.READERS``)."""
    tpu_slice_pools: tuple[str, ...] = ()
    """Node pools that may hold a TPU slice, read as GKE node pools by the ``tpu-slice-shape`` policy."""


def _no_warnings(_declaration: ClusterDeclaration) -> list[Problem]:
    return []


@dataclass(frozen=True)
class CloudTarget:
    """One deployment target (``gcp``, ``aws``, ``local``): its rules, its defaults and its deployer."""

    cloud: str
    """The declaration's ``cloud`` value this target answers to (its key in the registry)."""
    deployer: str
    """The component that deploys the target, as ``module:Class``; it is constructed with the
    component name, the plan and the resource options (:func:`slonk_infra.clouds.deploy_cloud`)."""
    storage_kinds: tuple[str, ...]
    """Storage kinds a declaration may use here, in the order messages list them."""
    storage_problems: Callable[[int, StorageSpec], list[Problem]]
    """What is wrong with ``storage[index]`` on this target: tier, capacity, size steps."""
    declaration_problems: Callable[[ClusterDeclaration], list[Problem]]
    """Checks only this target has: region, zone, cluster creation, placement it cannot honour."""
    restrict_load_balancers: bool
    """Whether a LoadBalancer login Service accepts only private ranges unless the declaration names
    its own: true where a LoadBalancer faces the internet."""
    policy_types: PolicyTypes
    """The target's resource types the policy pack must recognize."""
    stack_config_problems: Callable[[ClusterDeclaration, Mapping[str, Any]], list[Problem]] | None = None
    """What the stack's other config keys (the provider's, such as ``aws:region``) say against the
    declaration; None where nothing is checked."""
    sdk_modules: tuple[str, ...] = ()
    """The provider SDK modules its deployer imports (``pulumi_gcp``); none for a target that needs only
    Kubernetes."""
    extra: str | None = None
    """The package extra that installs them (``slonk-infra[gcp]``)."""
    declaration_warnings: Callable[[ClusterDeclaration], list[Problem]] = _no_warnings
    """What deploys on this target but probably needs a person (warnings, :mod:`slonk_infra.plan.lint`
    style); the plan appends them to its own."""

    def login_service_annotations(self, internal: bool) -> dict[str, str]:
        """Annotations of the login Service when it is a LoadBalancer: ``internal`` is true when every
        source range it admits is private, so the cloud's load balancer must be internal (one with a
        public address would never see a private client address, and nobody could reach SSH).

        None here: a target whose load balancers need an annotation to be internal (GKE, EKS) overrides
        this in its own ``target.py``. The plan calls it (:attr:`slonk_infra.plan.ClusterPlan.login_service_annotations`).
        """
        return {}
