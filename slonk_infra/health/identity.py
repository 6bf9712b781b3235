"""Hardware identity: a fingerprint that follows the physical machine, not the pod or the node object.

Pods and Kubernetes nodes are re-created with new names on the same hardware, and a cloud may hand the
same bad GPUs back under a new VM. The GPUs' UUIDs are burnt into the boards, so their hash names
the hardware that a verdict is about. Without GPUs the cloud's instance id (read from a file the
Kubernetes layer provides), and failing that the OS machine id, stand in.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from slonk_infra.health.nvml import Nvml, NvmlError
from slonk_infra.health.result import Fingerprint


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def gpu_fingerprint(uuids: list[str]) -> str:
    """``sha256:<hex>`` of the sorted UUIDs, one per line: independent of enumeration order."""
    return _sha("\n".join(sorted(uuids)))


def _read(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def fingerprint(
    nvml: Nvml | None,
    instance_id: str | None = None,
    instance_id_file: Path | None = None,
    machine_id_file: Path = Path("/etc/machine-id"),
) -> Fingerprint:
    """The best identity available: GPU UUIDs, else the instance id, else the machine id."""
    if nvml is not None:
        try:
            uuids = [nvml.uuid(i) for i in range(nvml.device_count())]
        except NvmlError:
            uuids = []
        if uuids:
            return Fingerprint(kind="gpu-uuids", value=gpu_fingerprint(uuids))
    instance = instance_id or _read(instance_id_file)
    if instance:
        return Fingerprint(kind="instance-id", value=_sha(instance))
    machine = _read(machine_id_file)
    if machine:
        return Fingerprint(kind="machine-id", value=_sha(machine))
    return Fingerprint(kind="unknown", value="")
