"""What the plan needs of a deployment target, and receives from its caller.

The plan names no cloud: :func:`~slonk_infra.plan.resolve.build_plan` is handed the targets by
``cloud`` value and asks the declared one for its rules and defaults. The cloud layer's descriptors
(:class:`slonk_infra.clouds.target.CloudTarget`) meet this protocol, and
:func:`slonk_infra.clouds.build_plan` passes every registered one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from slonk_infra.declaration.errors import Problem
from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec


class Target(Protocol):
    """The rules and defaults of one target, as the plan reads them."""

    @property
    def storage_kinds(self) -> tuple[str, ...]:
        """Storage kinds a declaration may use on this target, in the order messages list them."""
        ...

    @property
    def restrict_load_balancers(self) -> bool:
        """Whether a LoadBalancer login Service accepts only private ranges unless ranges are declared."""
        ...

    def storage_problems(self, index: int, volume: StorageSpec, /) -> list[Problem]:
        """What is wrong with ``storage[index]`` on this target: tier, capacity, size steps."""
        ...

    def declaration_problems(self, declaration: ClusterDeclaration, /) -> list[Problem]:
        """Checks only this target has (region, zone, cluster creation, placement it cannot honour)."""
        ...

    def declaration_warnings(self, declaration: ClusterDeclaration, /) -> list[Problem]:
        """What deploys on this target but probably needs a person (plan/lint.py style)."""
        ...


Targets = Mapping[str, Target]
"""The targets a plan may be built for, by the declaration's ``cloud`` value."""
