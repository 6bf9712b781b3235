"""slurmrestd answers -> :class:`SlurmNode` / :class:`SlurmJob`, for every data-parser version in use.

Two shapes exist (both read from real slurmrestd in the tests):

* v0.0.38 (Slurm 22.05): ``state`` is a lower-case base state with ``state_flags`` beside it, numbers
  are plain, ``features`` is a comma string, ``job_state`` a string.
* v0.0.39 and later (23.02 .. 26.05, v0.0.4x): ``state`` / ``job_state`` are lists (base state and
  flags together), numbers are ``{"set": true, "infinite": false, "number": N}`` structs.

The readers accept either form of every field, so a version in between reads too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import hostlist
import msgspec

from slonk_infra.ops.model import SlurmJob, SlurmNode
from slonk_infra.ops.wire import SlurmJobWire, SlurmNodeWire

# Base states; everything else in a v0.0.4x state list is a flag.
BASE_STATES = frozenset({"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN"})
_GRES_COUNT = re.compile(r"^(?P<name>[^:(]+)(?::[^:(]+)?:(?P<count>\d+)")


def number(value: Any, default: float = 0.0) -> float:
    """A plain number or a ``{"set", "infinite", "number"}`` struct; ``default`` when unset or infinite."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return default
        return number(value.get("number"), default)
    return default


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return [str(v) for v in value]


def split_gres(text: str) -> list[str]:
    """Top-level comma split: ``gpu:h100:3(IDX:0,2-3),nic:1`` -> two entries."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


@functools.lru_cache(maxsize=1024)  # thousands of nodes share a handful of GRES strings
def gpu_count(gres: str) -> int:
    """GPUs in a GRES string (``gpu:h100:8(S:0-1)``, ``gpu:2``); 0 for N/A or none."""
    total = 0
    for entry in split_gres(gres or ""):
        m = _GRES_COUNT.match(entry.strip())
        if m and m.group("name") == "gpu":
            total += int(m.group("count"))
    return total


def state_parts(state: Any, flags: Any = None) -> tuple[str, frozenset[str]]:
    """(base state, flags) from either shape."""
    items = [s.upper() for s in _strings(state)] + [f.upper() for f in _strings(flags)]
    base = next((s for s in items if s in BASE_STATES), items[0] if items else "UNKNOWN")
    return base, frozenset(s for s in items if s != base)


def node_from(raw: SlurmNodeWire | Mapping[str, Any]) -> SlurmNode:
    """One node record (as a list decodes it, or as JSON)."""
    w = raw if isinstance(raw, SlurmNodeWire) else msgspec.convert(raw, SlurmNodeWire)
    if w.name is None:
        raise KeyError("name")
    base, flags = state_parts(w.state, w.state_flags)
    return SlurmNode(
        name=str(w.name),
        state=base,
        flags=flags,
        reason=str(w.reason or ""),
        reason_time=number(w.reason_changed_at),
        cpus=int(number(w.cpus)),
        alloc_cpus=int(number(w.alloc_cpus)),
        gpus=gpu_count(str(w.gres or "")),
        gpus_used=gpu_count(str(w.gres_used or "")),
        partitions=_partitions(w.partitions),
        comment=str(w.comment or ""),
        slurmd_start=number(w.slurmd_start_time),
    )


def job_from(raw: SlurmJobWire | Mapping[str, Any]) -> SlurmJob:
    """One job record (as a list decodes it, or as JSON)."""
    w = raw if isinstance(raw, SlurmJobWire) else msgspec.convert(raw, SlurmJobWire)
    nodes = str(w.nodes or "")
    return SlurmJob(
        job_id=int(number(w.job_id)),
        state=_job_state(w.job_state),
        partition=str(w.partition or ""),
        nodes=tuple(hostlist.expand_hostlist(nodes)) if nodes and nodes != "None assigned" else (),
        submit_time=number(w.submit_time),
        start_time=number(w.start_time),
        name=str(w.name or ""),
        user=str(w.user_name or ""),
    )


@functools.lru_cache(maxsize=1024)  # thousands of nodes share a handful of partition lists
def _partitions_of(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_strings(value))


def _partitions(value: Any) -> tuple[str, ...]:
    return _partitions_of(tuple(value) if isinstance(value, list) else value) if value else ()


def _job_state(value: Any) -> str:
    items = [s.upper() for s in _strings(value)]
    return items[0] if items else "UNKNOWN"
