"""What the operations controller sees and writes: plain records of Slurm and Kubernetes objects.

The adapters (:mod:`slonk_infra.ops.slurm_rest`, :mod:`slonk_infra.ops.kube_api`) turn API answers
into these records; everything between them and the actions is pure Python over them.

Names the controller reads or writes on Kubernetes objects (spelled in :mod:`slonk_infra.vocab`):

* ``slonk.dev/slurm-state`` / ``slonk.dev/slurm-reason`` on a worker pod: the Slurm node's state and
  reason while it is out of service (DRAIN or DOWN); absent while the node is usable. On the
  Kubernetes node the same keys hold ``<slurm node>=<state>`` and ``<slurm node>: <reason>`` entries
  (one per worker pod on that machine, joined with ``,`` and ``; ``).
* ``slonk.dev/cordoned-by: slonk`` and ``slonk.dev/cordon-reason``: the controller cordoned this
  node. Only such cordons are ever lifted by the controller, and only they are not taken as a
  person's cordon (which would drain the Slurm node in turn).
* ``slonk.dev/replace-machine``: JSON ``{"reason", "fingerprint", "requestedAt", "providerID"}``
  written when a verdict asked for a new machine (see :mod:`slonk_infra.ops.remediation`).
* ``slonk.dev/health``: the health checker's verdict, on the worker pod (preferred) or the
  Kubernetes node; see :func:`parse_verdict` for the format.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from slonk_infra.vocab import CORDONED_BY, GROUP_LABEL

# The value of CORDONED_BY on a node this controller cordoned.
CORDONED_BY_US = "slonk"
# Kubernetes well-known label of a node's cloud machine type (kubernetes.io/docs/reference/labels-annotations-taints,
# "node.kubernetes.io/instance-type": set by the kubelet from the cloud provider).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

Action = Literal["none", "restart-pod", "replace-machine", "needs-person"]
ACTIONS: tuple[Action, ...] = ("none", "restart-pod", "replace-machine", "needs-person")
# Slurm node states that mean "out of service" whatever the reason.
_DOWN_BASES = frozenset({"DOWN", "ERROR"})
_UNREACHABLE_BASES = frozenset({"DOWN", "UNKNOWN", "FUTURE"})
_BUSY_BASES = frozenset({"ALLOCATED", "MIXED"})


@dataclass(frozen=True)
class SlurmNode:
    """One Slurm node record, the same whatever the REST API version that delivered it."""

    name: str
    state: str  # base state, upper case: IDLE, ALLOCATED, MIXED, DOWN, FUTURE, UNKNOWN, ...
    flags: frozenset[str] = frozenset()  # DRAIN, NOT_RESPONDING, COMPLETING, FAIL, ...
    reason: str = ""
    reason_time: float = 0.0  # when the reason was set (epoch seconds; 0 if unknown)
    cpus: int = 0
    alloc_cpus: int = 0
    gpus: int = 0
    gpus_used: int = 0
    partitions: tuple[str, ...] = ()
    comment: str = ""
    slurmd_start: float = 0.0  # when its slurmd last registered (epoch seconds; 0 if unknown)

    @property
    def drained(self) -> bool:
        """DRAIN flag set: draining (jobs still running) or drained."""
        return "DRAIN" in self.flags

    @property
    def down(self) -> bool:
        """DOWN (or ERROR, or FAIL flag): Slurm gives it no jobs whatever the drain flag."""
        return self.state in _DOWN_BASES or "FAIL" in self.flags

    @property
    def out(self) -> bool:
        """Out of service: drained or down."""
        return self.drained or self.down

    @property
    def busy(self) -> bool:
        """Jobs still hold resources on it."""
        return self.state in _BUSY_BASES or "COMPLETING" in self.flags or self.alloc_cpus > 0

    @property
    def responding(self) -> bool:
        """slurmd answers slurmctld."""
        return self.state not in _UNREACHABLE_BASES and "NOT_RESPONDING" not in self.flags

    @functools.cached_property  # records are kept across ticks; metrics and annotations read this each tick
    def state_text(self) -> str:
        """``IDLE+DRAIN`` style, flags sorted."""
        return "+".join([self.state, *sorted(self.flags)])


@dataclass(frozen=True)
class SlurmJob:
    """One job as the controller needs it: where it ran, for how long it waited."""

    job_id: int
    state: str  # RUNNING, PENDING, COMPLETED, ...
    partition: str = ""
    nodes: tuple[str, ...] = ()
    submit_time: float = 0.0
    start_time: float = 0.0
    name: str = ""
    user: str = ""


@dataclass(frozen=True)
class Taint:
    """A Kubernetes node taint."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class KubeNode:
    """A Kubernetes node: scheduling state, taints, labels, conditions and machine identity."""

    name: str
    uid: str = ""
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    conditions: Mapping[str, str] = field(default_factory=dict)  # type -> "True" / "False" / "Unknown"
    provider_id: str = ""
    boot_id: str = ""
    created: float = 0.0  # when the Node object was created (epoch seconds; 0 if unknown)

    @property
    def machine_type(self) -> str:
        """The cloud machine type (``a3-megagpu-8g``, ``p5.48xlarge``), from the well-known label; '' if none."""
        return self.labels.get(INSTANCE_TYPE_LABEL, "")

    @property
    def cordoned_by_us(self) -> bool:
        """The controller set the current cordon (or still claims one)."""
        return self.annotations.get(CORDONED_BY) == CORDONED_BY_US


@dataclass(frozen=True)
class KubePod:
    """A worker pod; its name is its Slurm node's name."""

    name: str
    uid: str = ""
    node_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    created: float = 0.0
    phase: str = "Running"
    deleting: bool = False

    @property
    def pool(self) -> str:
        """The worker group (pool) this pod belongs to."""
        return self.labels.get(GROUP_LABEL, "")


@dataclass(frozen=True)
class WorkerSet:
    """A worker StatefulSet: how many worker pods (and so machines) its group should have."""

    name: str
    group: str
    replicas: int


@dataclass(frozen=True)
class CheckOutcome:
    """One health check's result inside a verdict."""

    check: str
    ok: bool
    action: Action = "none"
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    """The health checker's judgement of one machine."""

    ok: bool
    action: Action
    reason: str
    fingerprint: str
    time: float | None
    checks: tuple[CheckOutcome, ...] = ()
    source: str = "pod"
    node: str = ""  # the Slurm node the checker judged ('' if not said)

    @property
    def failing(self) -> bool:
        """A verdict that asks for an action."""
        return self.action != "none"


class VerdictError(ValueError):
    """An annotation that does not hold a readable verdict."""


def _action(value: Any, where: str) -> Action:
    if value not in ACTIONS:
        raise VerdictError(f"{where}: action {value!r} is not one of {', '.join(ACTIONS)}")
    return value  # type: ignore[no-any-return]


def _time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise VerdictError(f"time {value!r} is neither epoch seconds nor RFC 3339") from None
    raise VerdictError(f"time {value!r} is neither epoch seconds nor RFC 3339")


def parse_verdict(text: str, source: str = "pod") -> Verdict:
    """Reads the ``slonk.dev/health`` annotation.

    The value is the JSON report ``slonk-health`` prints (``HealthReport`` in slonk_infra.health,
    camelCase keys) plus a ``time``. Only these keys are read; others are ignored::

        {"schema": "slonk-health/v1", "node": "h100-3", "ok": false, "action": "restart-pod",
         "fingerprint": {"kind": "gpu-uuids", "value": "sha256:..."},
         "results": [{"check": "gpu-ecc", "ok": false, "action": "restart-pod", "reason": "..."}],
         "time": "2026-11-23T01:00:00Z"}

    ``node`` (optional) must be the pod's name, else the verdict is about another node and ignored.
    ``action`` is the worst action of the results (none, restart-pod, replace-machine,
    needs-person). ``fingerprint`` may also be a plain string. ``time`` (RFC 3339 or epoch seconds)
    tells a fresh verdict from one about an earlier pod on the same machine; on a pod it may be
    left out (the pod's creation time stands in), on a Kubernetes node it is required.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VerdictError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise VerdictError("not a JSON object")
    schema = data.get("schema", "slonk-health/v1")
    if schema != "slonk-health/v1":
        raise VerdictError(f"schema {schema!r} is not slonk-health/v1")
    action = _action(data.get("action", "none"), "verdict")
    fp = data.get("fingerprint", "")
    fingerprint = str(fp.get("value", "")) if isinstance(fp, dict) else str(fp or "")
    checks = []
    for i, item in enumerate(data.get("results") or []):
        if not isinstance(item, dict) or "check" not in item:
            raise VerdictError(f"results[{i}] is not a check result")
        checks.append(
            CheckOutcome(
                check=str(item["check"]),
                ok=bool(item.get("ok", item.get("action", "none") == "none")),
                action=_action(item.get("action", "none"), f"results[{i}]"),
                reason=str(item.get("reason", "")),
            )
        )
    return Verdict(
        ok=bool(data.get("ok", action == "none")),
        action=action,
        reason=_verdict_reason(action, checks, str(data.get("reason", ""))),
        fingerprint=fingerprint,
        time=_time(data.get("time")),
        checks=tuple(checks),
        source=source,
        node=str(data.get("node") or ""),
    )


def _verdict_reason(action: Action, checks: list[CheckOutcome], given: str) -> str:
    # The first check with the worst action speaks for the verdict, as slonk-health's own drain does.
    for c in checks:
        if c.action == action and action != "none":
            return f"{c.check}: {c.reason}" if c.reason else c.check
    return given or action


def instance_fingerprint(node: KubeNode | None) -> str:
    """Stand-in identity when no verdict names the hardware: the cloud instance (providerID)."""
    if node is None or not node.provider_id:
        return ""
    return "instance:" + node.provider_id


def short(fingerprint: str) -> str:
    """A fingerprint cut for reasons and logs: ``sha256:1a2b3c4d``."""
    kind, _, value = fingerprint.rpartition(":")
    return f"{kind}:{value[:8]}" if kind else value[:12]
