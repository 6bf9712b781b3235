"""What a check returns and what the whole run reports: actions, their order, exit codes.

An action says what fixes a failure, from the cheapest to the most expensive:

- ``none``: nothing to do (the check passed, or what it saw needs no remedy);
- ``restart-pod``: a fresh pod fixes it (leftover processes, a stale mount, a full emptyDir);
- ``replace-machine``: the machine must be rebooted or replaced (a GPU that needs a reset, fell off
  the bus, lost PCIe lanes, or is throttled by hardware);
- ``needs-person``: automation cannot fix it (the image lacks NVML, more GPUs than declared, row
  remapping out of spares, the shared filesystem's server not answering).

``needs-person`` ranks worst: a machine that automation cannot mend must not be recycled in a loop.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

Action = Literal["none", "restart-pod", "replace-machine", "needs-person"]
ACTIONS: tuple[Action, ...] = ("none", "restart-pod", "replace-machine", "needs-person")

# The exit code names the worst action, so a prolog/epilog wrapper or a pod's start command can branch
# on it without parsing JSON. 1 is left to Python's own crash exit and 2 to usage/spec errors (click's
# usage exit), so a code from 3 on always means "the checks ran and found this".
EXIT_CODES: dict[Action, int] = {"none": 0, "restart-pod": 3, "replace-machine": 4, "needs-person": 5}
EXIT_USAGE = 2


def severity(action: Action) -> int:
    """Rank of ``action``: higher is worse."""
    return ACTIONS.index(action)


def worst(actions: list[Action]) -> Action:
    """The worst of ``actions`` (``none`` for an empty list)."""
    return max(actions, key=severity, default="none")


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class CheckResult(_Model):
    """One check's verdict on this node."""

    check: str = Field(description="The check's name, e.g. gpu-ecc.")
    ok: bool = Field(description="True when the check found nothing that needs an action.")
    action: Action = Field(description="What fixes the failure; none when ok.")
    reason: str = Field(description="One line saying what was found (and on which device).")
    figures: dict[str, Any] = Field(default_factory=dict, description="The values read, for people and metrics.")


def passed(check: str, reason: str, figures: dict[str, Any]) -> CheckResult:
    """A passing result."""
    return CheckResult(check=check, ok=True, action="none", reason=reason, figures=figures)


def failed(check: str, action: Action, reason: str, figures: dict[str, Any]) -> CheckResult:
    """A failing result; ``action`` ``none`` means "reported, nothing to do" and still counts as ok."""
    return CheckResult(check=check, ok=action == "none", action=action, reason=reason, figures=figures)


class Skipped(_Model):
    """A check this run did not perform, and why."""

    check: str = Field(description="The check's name.")
    reason: str = Field(description="Why it did not run (mode, not configured, a prerequisite failed).")


class Fingerprint(_Model):
    """The physical machine's identity: a verdict follows it across pod and node re-creation."""

    kind: Literal["gpu-uuids", "instance-id", "machine-id", "unknown"] = Field(description="What was hashed.")
    value: str = Field(description="sha256:<hex> of the sorted GPU UUIDs, the instance id or the machine id.")


class DrainOutcome(_Model):
    """What the run did about draining the Slurm node."""

    requested: bool = Field(description="Whether draining was asked for (--drain).")
    node: str = Field(description="The Slurm node name.")
    reason: str | None = Field(default=None, description="The drain reason set or that would be set.")
    done: bool = Field(default=False, description="Whether scontrol drained the node.")
    note: str | None = Field(default=None, description="Why no drain happened, or scontrol's error.")


class HealthReport(_Model):
    """The one JSON document a run prints on stdout."""

    schema_version: Literal["slonk-health/v1"] = Field(default="slonk-health/v1", alias="schema")
    mode: str = Field(description="boot, interval, prolog or epilog.")
    node: str = Field(description="The Slurm node name the run judged.")
    fingerprint: Fingerprint = Field(description="The physical machine's identity.")
    ok: bool = Field(description="True when every check passed.")
    action: Action = Field(description="The worst action among the results.")
    exit_code: int = Field(description="The process exit code (see EXIT_CODES).")
    duration_ms: int = Field(description="Wall time of the run.")
    results: list[CheckResult] = Field(description="One result per check run.")
    skipped: list[Skipped] = Field(default_factory=list, description="Checks not run, with the reason.")
    drain: DrainOutcome | None = Field(default=None, description="What was done about the Slurm node.")
    error: str | None = Field(default=None, description="Why the checks could not run at all (bad spec).")
