"""Records of what slurmdbd holds for one cluster, as the reconciler compares them.

GPU limits are TRES maps (``{"gres/gpu": 8}``); run-time limits are seconds, so ``2-00:00:00`` from sacctmgr
and ``48:00:00`` from a declaration compare equal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

GPU_TRES = "gres/gpu"
# Slurm's time forms (sacctmgr(1) MaxWall, slurm.conf(5) MaxTime): MINUTES, MINUTES:SECONDS,
# HOURS:MINUTES:SECONDS, DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS.
_TIME = re.compile(r"^(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})$")


class RecordError(ValueError):
    """A value sacctmgr printed that is not in the form sacctmgr(1) documents."""


def wall_seconds(text: str) -> int | None:
    """Seconds of a Slurm time string; None for empty, UNLIMITED or INFINITE (no limit)."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = _TIME.match(text)
    if not m:
        raise RecordError(f"{text!r} is not a Slurm time")
    parts = [int(p) for p in m.group("rest").split(":")]
    if m.group("days") is not None:
        # DAYS-HH, DAYS-HH:MM, DAYS-HH:MM:SS
        hours, minutes, seconds = [*parts, 0, 0][:3]
        return ((int(m.group("days")) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def format_wall(seconds: int) -> str:
    """``DAYS-HH:MM:SS`` (or ``HH:MM:SS``), the form sacctmgr prints and reads."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def parse_tres(text: str) -> dict[str, int]:
    """``cpu=4,gres/gpu=8`` -> ``{"cpu": 4, "gres/gpu": 8}``; empty for ``""``."""
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not value.isdigit():
            raise RecordError(f"{item!r} in {text!r} is not a TRES=count pair")
        out[key] = int(value)
    return out


def format_tres(tres: Mapping[str, int]) -> str:
    """``{"gres/gpu": 8}`` -> ``gres/gpu=8`` (sorted, so a command is the same every run)."""
    return ",".join(f"{k}={v}" for k, v in sorted(tres.items()))


@dataclass(frozen=True)
class Qos:
    """A QOS: priority, whom it preempts, per-user / per-account TRES limits, longest run time."""

    name: str
    priority: int = 0
    preempt: frozenset[str] = frozenset()
    max_tres_per_user: Mapping[str, int] = field(default_factory=dict)
    max_tres_per_account: Mapping[str, int] = field(default_factory=dict)
    max_wall: int | None = None
    """Seconds; None for no limit."""


@dataclass(frozen=True)
class Assoc:
    """An association on the cluster: an account's own (``user`` None) or a user's in an account."""

    account: str
    user: str | None = None
    partition: str = ""
    """Per-partition associations are never declared; one found is drift."""
    parent: str | None = None
    """An account's parent account (None for a user's association and for root)."""
    fairshare: int | None = None
    """None where sacctmgr shows ``parent`` or nothing."""
    grp_tres: Mapping[str, int] = field(default_factory=dict)
    qos: frozenset[str] = frozenset()
    default_qos: str | None = None

    @property
    def key(self) -> AssocKey:
        """(account, user, partition): what identifies the association on one cluster."""
        return (self.account, self.user, self.partition)

    def describe(self) -> str:
        """``account research`` or ``user alice in account research``, for messages."""
        where = f" partition {self.partition}" if self.partition else ""
        return f"user {self.user} in account {self.account}{where}" if self.user else f"account {self.account}{where}"


AssocKey = tuple[str, str | None, str]


@dataclass(frozen=True)
class User:
    """A user record: its default account (the one a job that names none is charged to)."""

    name: str
    default_account: str | None = None


@dataclass(frozen=True)
class State:
    """What slurmdbd holds for one cluster, or what the declaration asks it to hold."""

    cluster: str
    cluster_exists: bool = True
    qos: Mapping[str, Qos] = field(default_factory=dict)
    assocs: Mapping[AssocKey, Assoc] = field(default_factory=dict)
    users: Mapping[str, User] = field(default_factory=dict)


__all__ = [
    "GPU_TRES",
    "Assoc",
    "AssocKey",
    "Qos",
    "RecordError",
    "State",
    "User",
    "format_tres",
    "format_wall",
    "parse_tres",
    "wall_seconds",
]
