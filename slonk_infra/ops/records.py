"""What the controller keeps on its volume: its memory (state.json) and which machines each job ran on.

**Job hardware record** (``jobs.jsonl``): one JSON line per job, written the first tick the job is
seen running, naming for each Slurm node the machine's fingerprint and the Kubernetes node::

    {"job": 42, "name": "train", "user": "alice", "partition": "h100", "submitted": 1795395000,
     "started": 1795395007, "nodes": {"h100-0": {"fingerprint": "sha256:...", "kubeNode": "gke-..."}}}

Why a file of JSON lines on the controller's PersistentVolume, not a ConfigMap: it is append-only
by construction, costs no API call per job (a ConfigMap would need a read and a write per job,
write access to configmaps, and stops at 1 MiB), survives controller restarts, and log shippers
can tail it. The same line is also logged on stdout. On start the last megabyte is read back so a
restart does not record running jobs twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slonk_infra.ops.model import SlurmJob
from slonk_infra.ops.remediation import RemediationState

SEED_BYTES = 1 << 20
_RECENT_IDS = 100_000


class StateStore:
    """``state.json``: the remediation memory, rewritten atomically when it changes (no directory: memory only)."""

    def __init__(self, directory: Path | None) -> None:
        self.path = directory / "state.json" if directory else None
        self._last = ""

    def load(self) -> RemediationState:
        if self.path is None or not self.path.exists():
            return RemediationState()
        text = self.path.read_text(encoding="utf-8")
        self._last = text
        return RemediationState.from_json(json.loads(text))

    def save(self, state: RemediationState) -> None:
        if self.path is None:
            return
        text = json.dumps(state.to_json(), indent=1, sort_keys=True)
        if text == self._last:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.path)
        self._last = text


class JobRecord:
    """The append-only job -> machines record."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.seen: set[int] = set()
        if path is not None and path.exists():
            with path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - SEED_BYTES))
                tail = fh.read().decode(errors="replace").splitlines()
            for line in tail[1:] if size > SEED_BYTES else tail:
                try:
                    self.seen.add(int(json.loads(line)["job"]))
                except (ValueError, KeyError, TypeError):
                    continue

    def record(self, jobs: Sequence[SlurmJob], machines: Mapping[str, tuple[str, str]]) -> list[dict[str, Any]]:
        """Appends a line for each running job not recorded yet; returns those lines."""
        new = []
        for job in jobs:
            if job.state != "RUNNING" or job.job_id in self.seen or not job.nodes:
                continue
            self.seen.add(job.job_id)
            new.append(
                {
                    "job": job.job_id,
                    "name": job.name,
                    "user": job.user,
                    "partition": job.partition,
                    "submitted": int(job.submit_time),
                    "started": int(job.start_time),
                    "nodes": {
                        n: {"fingerprint": machines.get(n, ("", ""))[0], "kubeNode": machines.get(n, ("", ""))[1]}
                        for n in job.nodes
                    },
                }
            )
        if new and self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                for entry in new:
                    fh.write(json.dumps(entry, sort_keys=True) + "\n")
        if len(self.seen) > _RECENT_IDS:
            # Job ids only grow; the oldest ones will not be listed again.
            self.seen = set(sorted(self.seen)[-_RECENT_IDS // 2 :])
        return new
