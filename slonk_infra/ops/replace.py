"""The cloud call of a ``replace-machine`` remediation, pure bookkeeping: which calls are due, backoff, outcome.

A remediation of a bad machine first drains its Slurm node, cordons the machine and deletes the pod
(:mod:`slonk_infra.ops.sync`); then the controller asks the cloud once for a new machine in that slot
(:meth:`~slonk_infra.ops.cloud.CloudMachines.replace`): GKE ``instances.reportHostAsFaulty`` for
machine types the catalog marks (``faulty_host_report``), else ``instanceGroupManagers.recreateInstances``;
EKS ``autoscaling:SetInstanceHealth`` Unhealthy. The call and its outcome live in the remediation
record (state.json), so a restart neither repeats an accepted call nor forgets a failed one.

A failed call is tried again on a later tick, never twice in one: the first retry on the next tick,
then after twice the previous wait, up to :data:`MAX_BACKOFF`. A remediation that timed out (it needs
a person) gets no more calls, and a repeat offender gets none at all: it is kept out before any
remediation starts.

The attempt is written down before the call: a controller killed during a call retries it after the
backoff, which is the one way a call can be made twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from slonk_infra.ops.remediation import Remediation, RemediationState

FIRST_RETRY = 1.0  # seconds: any later tick
MAX_BACKOFF = 900.0


def due(state: RemediationState, now: float) -> list[Remediation]:
    """Replace-machine remediations whose cloud call is to be made (or tried again) now."""
    return [
        r
        for r in sorted(state.active.values(), key=lambda r: r.node)
        if r.action == "replace-machine" and not r.cloud_call and not r.timed_out and r.cloud_next <= now
    ]


def backoff(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th failed call: next tick, then doubling, up to the cap."""
    if attempts <= 1:
        return FIRST_RETRY
    return min(MAX_BACKOFF, 30.0 * 2.0 ** (attempts - 2))


def attempt(rem: Remediation, now: float) -> None:
    """Writes down a call about to be made; the earliest next try assumes it fails."""
    rem.cloud_attempts += 1
    rem.cloud_next = now + backoff(rem.cloud_attempts)


def accepted(rem: Remediation, call: str, now: float) -> None:
    """The cloud accepted the call: it is never made again for this remediation."""
    rem.cloud_call, rem.cloud_at, rem.cloud_error = call, now, ""


def failed(rem: Remediation, error: str) -> None:
    """The call failed: kept for the next try (after :func:`attempt`'s backoff)."""
    rem.cloud_error = error[:300]


def faulty_host(rem: Remediation, machine_types: Iterable[str]) -> bool:
    """Whether the machine's type supports reporting its host as faulty (GCP, from the catalog)."""
    return bool(rem.machine_type) and rem.machine_type in set(machine_types)
