"""What one run leaves for the next on the same node: an NVML call still stuck, the machine's fingerprint.

Kept in a directory of the container's own (:data:`slonk_infra.vocab.HEALTH_STATE_DIR`, which
healthcheck.sh passes: gone with the container, so a new pod starts clean). Both are best effort: a
directory that cannot be written loses only them.

* A run that gave up on a stuck NVML call records the child it left behind. While that process lives
  (it dies when the kernel lets its call go), the next runs judge the GPUs from the record at once
  instead of leaving one more process stuck behind every interval.
* The fingerprint of the GPUs' UUIDs from the last run that read them, for a run that cannot ask NVML:
  a verdict must name the same machine whether NVML answered or not (slonk_infra/health/identity.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from slonk_infra.health.result import Fingerprint

STUCK_FILE = "nvml-stuck.json"
FINGERPRINT_FILE = "fingerprint.json"


@dataclass(frozen=True)
class StuckCall:
    """An earlier run's child still stuck in an NVML call."""

    pid: int
    since: float
    """When the run gave up on it (seconds since the epoch)."""
    what: str
    """The call, as the earlier run's reason named it (``GPU 1: NVML eccErrors...``)."""


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), None when it is
    gone or only a zombie: with the PID, it names one process even after PIDs are reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # After "pid (comm) ", where comm may hold any byte, ")" included: state is field 3, start field 22.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return None if fields[0] == b"Z" else fields[19].decode()


class NodeState:
    """The state directory; None: keep nothing."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _write(self, name: str, data: dict[str, object]) -> None:
        if self.path is None:
            return
        tmp: str | None = None
        try:
            self.path.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(tmp, self.path / name)
        except OSError:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def _read(self, name: str) -> dict[str, object] | None:
        if self.path is None:
            return None
        try:
            data = json.loads((self.path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def record_stuck(self, pid: int, since: float, what: str) -> None:
        """Remember the child left stuck in an NVML call (while it still runs)."""
        start = _process_start(pid)
        if start is not None:
            self._write(STUCK_FILE, {"pid": pid, "start": start, "since": since, "what": what})

    def stuck(self) -> StuckCall | None:
        """An earlier run's child still stuck in NVML, None when there is none (its record is then dropped)."""
        data = self._read(STUCK_FILE)
        if data is None:
            return None
        pid, since = data.get("pid"), data.get("since")
        if isinstance(pid, int) and isinstance(since, int | float) and _process_start(pid) == data.get("start"):
            return StuckCall(pid, float(since), str(data.get("what", "")))
        if self.path is not None:
            with contextlib.suppress(OSError):
                (self.path / STUCK_FILE).unlink()
        return None

    def keep_fingerprint(self, fingerprint: Fingerprint) -> None:
        """Remember the GPUs' fingerprint (only that kind: the others need no NVML)."""
        if fingerprint.kind == "gpu-uuids":
            self._write(FINGERPRINT_FILE, fingerprint.model_dump(by_alias=True))

    def fingerprint(self) -> Fingerprint | None:
        """The GPUs' fingerprint an earlier run read, if any."""
        data = self._read(FINGERPRINT_FILE)
        if data is None:
            return None
        with contextlib.suppress(ValueError):
            return Fingerprint.model_validate(data)
        return None
