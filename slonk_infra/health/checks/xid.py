"""XID events: listen to NVML for ``xidWaitMs`` and map each XID code to an action.

NVML delivers only events raised while a listener is registered, so this check sees XIDs that happen
during its window: a GPU that keeps failing shows up on the next boot or interval run. Double-bit ECC
events count as XID 48. Systems that offer no events (some virtual machines) pass with a note.
"""

from __future__ import annotations

from typing import Any

from slonk_infra.health.checks.gpu import nvml_fault_action
from slonk_infra.health.context import CheckContext
from slonk_infra.health.nvml import EVENT_DOUBLE_BIT_ECC, EVENT_XID_CRITICAL, WATCHED_EVENTS, NvmlError
from slonk_infra.health.result import Action, CheckResult, failed, passed, worst

DBE_AS_XID = 48


def gpu_xid(ctx: CheckContext) -> CheckResult:
    """No XID event that calls for an action arrives while listening."""
    spec = ctx.spec.gpu
    assert ctx.nvml is not None
    nvml = ctx.nvml
    figures: dict[str, Any] = {"waitMs": spec.xid_wait_ms}
    try:
        masks = {i: nvml.supported_event_types(i) & WATCHED_EVENTS for i in ctx.gpus()}
        figures["supportedEvents"] = {str(i): mask for i, mask in masks.items()}
        events = nvml.wait_events(masks, spec.xid_wait_ms) if any(masks.values()) else None
    except NvmlError as err:
        if not err.not_supported:
            return failed("gpu-xid", nvml_fault_action(err), f"listening for XID events failed: {err}", figures)
        events = None
    if events is None:
        figures["supported"] = False
        return passed("gpu-xid", "XID events are not offered on this system", figures)
    figures["supported"] = True
    seen: list[dict[str, Any]] = []
    problems: list[tuple[Action, str]] = []
    for event in events:
        if event.event_type == EVENT_XID_CRITICAL:
            code = event.data
        elif event.event_type == EVENT_DOUBLE_BIT_ECC:
            code = DBE_AS_XID
        else:
            continue
        action, meaning = spec.xid_action(code)
        seen.append({"gpu": event.device, "xid": code, "action": action})
        if action != "none":
            problems.append((action, f"GPU {event.device}: XID {code} ({meaning})"))
    figures["events"] = seen
    if not problems:
        note = f", {len(seen)} needing no action" if seen else ""
        return passed("gpu-xid", f"no XID event in {spec.xid_wait_ms} ms{note}", figures)
    return failed("gpu-xid", worst([a for a, _ in problems]), "; ".join(r for _, r in problems), figures)
