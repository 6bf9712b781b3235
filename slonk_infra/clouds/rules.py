"""Rule pieces the targets' descriptors share: storage tiers and sizes, and placement a target refuses.

The descriptors (``slonk_infra/clouds/<cloud>/target.py``) build their declaration rules from these;
nothing here imports a cloud SDK, the plan or a component.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slonk_infra.declaration.errors import Problem, choice

if TYPE_CHECKING:
    from slonk_infra.declaration.model import ClusterDeclaration, StorageSpec

# Storage the Kubernetes layer provisions itself on every target (an in-cluster NFS server, or an
# NFS export that already exists).
KUBERNETES_STORAGE = frozenset({"nfs-server", "nfs-export"})


@dataclass(frozen=True)
class StorageLimits:
    """Capacity rules of one storage kind (or one tier of it), in GiB, with where they come from."""

    minimum: int
    maximum: int
    step: int = 1
    source: str = ""


@dataclass(frozen=True)
class StorageRules:
    """Storage rules shared by the adapters: tiers per kind and capacity limits per kind / tier."""

    kinds: frozenset[str]
    tiers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Keyed by kind, or by ``kind/TIER`` where a tier has its own limits.
    limits: Mapping[str, StorageLimits] = field(default_factory=dict)
    default_tiers: Mapping[str, str] = field(default_factory=dict)

    @property
    def offered(self) -> tuple[str, ...]:
        """The kinds in the order messages list them: the target's filesystems, then the Kubernetes ones."""
        return (*sorted(self.kinds - KUBERNETES_STORAGE), *sorted(self.kinds & KUBERNETES_STORAGE, reverse=True))

    def problems(self, index: int, volume: StorageSpec) -> list[Problem]:
        """Tier and capacity problems of ``storage[index]``."""
        out: list[Problem] = []
        tier = volume.tier.upper() if volume.tier else self.default_tiers.get(volume.kind)
        if volume.tier is not None:
            tiers = self.tiers.get(volume.kind, ())
            if not tiers:
                with_tiers = ", ".join(sorted(self.tiers)) or "(none here)"
                out.append(
                    Problem(f"storage[{index}].tier", f"{volume.kind} has no tiers; tier applies to {with_tiers}")
                )
                return out
            if volume.tier.upper() not in tiers:
                out.append(Problem(f"storage[{index}].tier", choice(volume.tier.upper(), tiers, f"{volume.kind} tier")))
                return out
        limits = self.limits.get(f"{volume.kind}/{tier}") or self.limits.get(volume.kind)
        if limits is None:
            return out
        what = f"{volume.kind} {tier}" if tier else volume.kind
        gib = volume.capacity_gib
        if not limits.minimum <= gib <= limits.maximum:
            out.append(
                Problem(
                    f"storage[{index}].capacityGib",
                    f"{gib} GiB is outside what {what} accepts: {limits.minimum}..{limits.maximum} GiB",
                )
            )
        elif limits.step > 1 and (gib - limits.minimum) % limits.step:
            out.append(
                Problem(
                    f"storage[{index}].capacityGib",
                    f"{gib} GiB is not a size {what} offers: {limits.minimum} GiB plus steps of {limits.step} GiB",
                )
            )
        return out


def dropped_placement(declaration: ClusterDeclaration, why: Mapping[str, str]) -> list[Problem]:
    """``compactPlacement: true`` on pools this target would place otherwise: refused, never ignored.

    ``why`` maps a reason key to the sentence explaining it: ``reservation`` (a reservation fixes its
    VMs' placement), ``cpu`` (the target places no CPU group), ``any`` (the target has no placement).
    Only an explicit ``true`` is checked; the default (on for GPU pools) quietly yields to a reservation.
    """
    out: list[Problem] = []
    for i, pool in enumerate(declaration.pools):
        if pool.compact_placement is not True:
            continue
        reason = None
        if "any" in why:
            reason = why["any"]
        elif pool.reservation is not None and "reservation" in why:
            reason = why["reservation"]
        elif pool.kind == "cpu" and "cpu" in why:
            reason = why["cpu"]
        if reason is not None:
            out.append(
                Problem(f"pools[{i}].compactPlacement", f"true cannot be honoured: {reason}; remove compactPlacement")
            )
    return out
