"""An NVML stand-in for the container tier: a ``libnvidia-ml.so.1`` that answers like a real GPU node.

The library (``standin.c``) exports the NVML functions ``slonk-health`` calls through an unmodified
``pynvml`` and answers them from a plain-text profile it reads at every ``nvmlInit``: from
``$SLONK_NVML_PROFILE``, else :data:`DEFAULT_PROFILE_PATH`; without one NVML reports the driver not
loaded (9). The profile format is documented at the top of ``standin.c``; its keys are those of
``slonk-health --nvml-record`` recordings.

* :func:`build`: compile the library into a directory (put that directory on ``LD_LIBRARY_PATH``).
* :func:`write_profile` / :func:`profile_text`: a node of ``gpus`` copies of a recorded GPU (by default
  :data:`DEFAULT_RECORDING`, an idle H100) with distinct UUIDs, PCI addresses and minor numbers, and
  the :data:`FAULTS` injected per GPU index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PROFILE_PATH",
    "DEFAULT_RECORDING",
    "FAULTS",
    "LEFTOVER_BYTES",
    "LEFTOVER_PID",
    "PROFILE_ENV",
    "SONAME",
    "SOURCE",
    "StandinError",
    "build",
    "profile_text",
    "write_profile",
]

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "standin.c"
SONAME = "libnvidia-ml.so.1"
PROFILE_ENV = "SLONK_NVML_PROFILE"
DEFAULT_PROFILE_PATH = Path("/etc/nvml-standin/profile")
DEFAULT_RECORDING = HERE / "h100-idle.json"
"""What one NVIDIA H100 80GB HBM3 answered at idle (a copy of tests/data/nvml/h100-idle.json)."""

FAULTS = (
    "ecc-uncorrectable",
    "xid-<code>",
    "remapped-rows-failure",
    "pcie-x8",
    "leftover-process",
    "hang-<nvmlFunction>",
)
"""Faults :func:`profile_text` injects per GPU: an uncorrectable ECC error since the driver loaded, an
XID event pending (``xid-79``: fallen off the bus), a failed row remapping (out of spare rows), the
PCIe link at x8 of x16, a compute process (:data:`LEFTOVER_PID`) holding :data:`LEFTOVER_BYTES`, and
an NVML function that never returns for that GPU (``hang-nvmlDeviceGetTotalEccErrors``: a GPU that has
stopped answering)."""
LEFTOVER_PID = 4242
LEFTOVER_BYTES = 1 << 30

RECORDING_FORMAT = "slonk-health-nvml/1"
_CFLAGS = ("-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden")
_DEBIAN_PACKAGES = "gcc libc6-dev"

# Per-GPU recording keys the profile takes as they are, and the NVML functions that fail when the
# recording holds an error answer for the key.
_DEVICE_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("nvmlDeviceGetName",),
    "uuid": ("nvmlDeviceGetUUID",),
    "pciBusId": ("nvmlDeviceGetPciInfo_v3",),
    "minorNumber": ("nvmlDeviceGetMinorNumber",),
    "eccMode": ("nvmlDeviceGetEccMode",),
    "eccErrors.uncorrected.volatile": ("nvmlDeviceGetTotalEccErrors",),
    "eccErrors.uncorrected.aggregate": ("nvmlDeviceGetTotalEccErrors",),
    "eccErrors.corrected.volatile": ("nvmlDeviceGetTotalEccErrors",),
    "eccErrors.corrected.aggregate": ("nvmlDeviceGetTotalEccErrors",),
    "remappedRows": ("nvmlDeviceGetRemappedRows",),
    "pcie.currentGen": ("nvmlDeviceGetCurrPcieLinkGeneration",),
    "pcie.maxGen": ("nvmlDeviceGetMaxPcieLinkGeneration",),
    "pcie.gpuMaxGen": ("nvmlDeviceGetGpuMaxPcieLinkGeneration",),
    "pcie.currentWidth": ("nvmlDeviceGetCurrPcieLinkWidth",),
    "pcie.maxWidth": ("nvmlDeviceGetMaxPcieLinkWidth",),
    "clockEventReasons": ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
    "temperature": ("nvmlDeviceGetTemperature",),
    "performanceState": ("nvmlDeviceGetPerformanceState",),
    "memory": ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"),
    "computeProcesses": ("nvmlDeviceGetComputeRunningProcesses_v3",),
    "supportedEventTypes": ("nvmlDeviceGetSupportedEventTypes",),
}
_XID = re.compile(r"xid-(\d+)")
_HANG = re.compile(r"hang-(nvml[A-Za-z0-9_]+)")
_FUNCTION_NOT_FOUND = 13


class StandinError(RuntimeError):
    """The stand-in cannot be built, or a profile cannot be made from what was asked."""


def build(out_dir: Path) -> Path:
    """Compile ``standin.c`` into ``out_dir/libnvidia-ml.so.1`` (soname ``libnvidia-ml.so.1``); returns its path."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise StandinError(
            f"gcc is not on PATH: building the NVML stand-in needs a C compiler and the C library headers "
            f"(Debian/Ubuntu: apt-get install {_DEBIAN_PACKAGES})"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / SONAME
    fd, tmp_name = tempfile.mkstemp(prefix=f".{SONAME}.", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        cmd = [gcc, *_CFLAGS, f"-Wl,-soname,{SONAME}", "-o", str(tmp), str(SOURCE)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            raise StandinError(
                f"building the NVML stand-in failed ({' '.join(cmd)}; exit {proc.returncode}; a missing header "
                f"means the C library headers are absent: apt-get install {_DEBIAN_PACKAGES}):\n{proc.stderr}"
            )
        tmp.chmod(0o755)
        tmp.replace(target)  # a library being loaded elsewhere is never seen half written
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _load(recording: Path | Mapping[str, Any]) -> Mapping[str, Any]:
    rec: Mapping[str, Any] = (
        json.loads(recording.read_text(encoding="utf-8")) if isinstance(recording, Path) else recording
    )
    if rec.get("format") != RECORDING_FORMAT:
        raise StandinError(f"not a {RECORDING_FORMAT} recording: format is {rec.get('format')!r}")
    if "0" not in rec.get("devices", {}):
        raise StandinError("the recording holds no answers for GPU 0")
    return rec


def _nth_uuid(uuid: str, i: int) -> str:
    """GPU ``i``'s UUID: the recorded one (GPU 0) with ``i`` added to its last group."""
    head, _, last = uuid.rpartition("-")
    if not head or not re.fullmatch(r"[0-9a-f]+", last):
        return f"{uuid}-{i}" if i else uuid
    return f"{head}-{(int(last, 16) + i) % 16 ** len(last):0{len(last)}x}"


def _nth_bus_id(bus_id: str, i: int) -> str:
    """GPU ``i``'s PCI address: the recorded one (GPU 0) ``i`` device slots further on."""
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])", bus_id)
    if m is None:
        raise StandinError(f"cannot read the recorded PCI address {bus_id!r}")
    slot = int(m[3], 16) + i
    bus = int(m[2], 16) + slot // 32
    return f"{m[1]}:{bus:02X}:{slot % 32:02X}.{m[4]}"


def _value_words(key: str, value: Any) -> str:
    if key == "memory":  # recorded through the v1 query (no reserved): see _device_lines
        return f"{int(value['total'])} {int(value.get('reserved') or 0)} {int(value['used'])}"
    if key == "computeProcesses":
        return " ".join(f"{int(pid)}:{'-' if used is None else int(used)}" for pid, used in value)
    if isinstance(value, list):
        return " ".join(str(int(v)) for v in value)
    if isinstance(value, bool | int):
        return str(int(value))
    return str(value)


def _device_lines(i: int, answers: Mapping[str, Any]) -> list[str]:
    """Profile lines for GPU ``i`` from the recorded answers (recorded errors become injected errors)."""
    lines: list[str] = []
    for key, functions in _DEVICE_KEYS.items():
        answer = answers.get(key)
        if answer is None:
            continue  # not recorded: the stand-in answers NOT_SUPPORTED
        if answer.get("error") is not None:
            lines += [f"gpu {i} error {fn} {int(answer['error'])}" for fn in functions]
            continue
        value = answer["value"]
        lines.append(f"gpu {i} {key} {_value_words(key, value)}".rstrip())
        if key == "memory" and value.get("reserved") is None:
            # Recorded through the v1 query: offer only that one, as a driver before NVML's v2 does.
            lines.append(f"gpu {i} error nvmlDeviceGetMemoryInfo_v2 {_FUNCTION_NOT_FOUND}")
    return lines


def _apply_fault(i: int, fault: str, answers: dict[str, Any]) -> list[str]:
    """Change GPU ``i``'s answers for ``fault``; returns extra profile lines (pending events)."""
    if fault == "ecc-uncorrectable":
        answers["eccErrors.uncorrected.volatile"] = {"value": 1}
        answers["eccErrors.uncorrected.aggregate"] = {"value": 1}
    elif m := _XID.fullmatch(fault):
        return [f"gpu {i} xid {int(m[1])}"]
    elif m := _HANG.fullmatch(fault):
        return [f"gpu {i} hang {m[1]}"]
    elif fault == "remapped-rows-failure":
        answers["remappedRows"] = {"value": [0, 8, 0, 1]}
    elif fault == "pcie-x8":
        answers["pcie.currentWidth"] = {"value": 8}
        answers["pcie.maxWidth"] = {"value": 16}
    elif fault == "leftover-process":
        memory = dict(answers.get("memory", {}).get("value") or {})
        if not memory:
            raise StandinError(f"GPU {i}: leftover-process needs a recorded memory answer")
        memory["used"] = int(memory.get("used") or 0) + LEFTOVER_BYTES
        answers["memory"] = {"value": memory}
        answers["computeProcesses"] = {"value": [[LEFTOVER_PID, LEFTOVER_BYTES]]}
    else:
        raise StandinError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    return []


def _gpu_answers(
    base: Mapping[str, Any],
    i: int,
    name: str | None,
    uuids: Sequence[str] | None,
    bus_ids: Sequence[str] | None,
    minors: Sequence[int] | None,
) -> dict[str, Any]:
    """GPU ``i``'s answers: the recorded GPU's, with its own identity."""
    answers: dict[str, Any] = {k: dict(v) for k, v in base.items()}
    if name is not None:
        answers["name"] = {"value": name}
    if uuids is not None:
        answers["uuid"] = {"value": uuids[i]}
    elif "value" in answers.get("uuid", {}):
        answers["uuid"] = {"value": _nth_uuid(str(answers["uuid"]["value"]), i)}
    if bus_ids is not None:
        answers["pciBusId"] = {"value": bus_ids[i]}
    elif "value" in answers.get("pciBusId", {}):
        answers["pciBusId"] = {"value": _nth_bus_id(str(answers["pciBusId"]["value"]), i)}
    answers["minorNumber"] = {"value": i if minors is None else minors[i]}
    return answers


def profile_text(
    gpus: int = 8,
    recording: Path | Mapping[str, Any] = DEFAULT_RECORDING,
    faults: Mapping[int, Sequence[str]] | None = None,
    missing: int = 0,
    *,
    driver_version: str | None = None,
    name: str | None = None,
    uuids: Sequence[str] | None = None,
    bus_ids: Sequence[str] | None = None,
    minors: Sequence[int] | None = None,
) -> str:
    """The profile of a node with ``gpus`` copies of the recording's GPU 0, ``missing`` of them not seen.

    GPU ``i`` answers what the recorded GPU answered, except its UUID and PCI address (the recorded ones
    for GPU 0, then counted on; or ``uuids`` / ``bus_ids``), its minor number (``i``, or ``minors[i]``)
    and the ``faults`` given for its index. ``missing`` drops the last GPUs: NVML counts ``gpus - missing``.
    ``driver_version`` and ``name`` override the recorded ones. A recorded init error stays one.
    """
    if not 0 <= missing <= gpus <= 64:
        raise StandinError(f"need 0 <= missing ({missing}) <= gpus ({gpus}) <= 64")
    for label, seq in (("uuids", uuids), ("bus_ids", bus_ids), ("minors", minors)):
        if seq is not None and len(seq) != gpus:
            raise StandinError(f"{label} has {len(seq)} entries for {gpus} GPUs")
    visible = gpus - missing
    faults = faults or {}
    for index, names in faults.items():
        if not 0 <= index < visible:
            raise StandinError(f"fault(s) {list(names)} for GPU {index}, but NVML sees GPUs 0..{visible - 1}")
    rec = _load(recording)
    system = rec.get("system", {})
    base = rec["devices"]["0"]
    lines = [f"# NVML stand-in profile: {gpus} x the recording's GPU 0, {missing} missing (see testing/nvml)"]
    if rec.get("init", {}).get("error") is not None:
        lines.append(f"initError {int(rec['init']['error'])}")
    driver = driver_version or (system.get("driverVersion") or {}).get("value")
    if driver:
        lines.append(f"driverVersion {driver}")
    lines.append(f"deviceCount {visible}")
    for i in range(visible):
        answers = _gpu_answers(base, i, name, uuids, bus_ids, minors)
        extra: list[str] = []
        for fault in faults.get(i, ()):
            extra += _apply_fault(i, fault, answers)
        lines += _device_lines(i, answers) + extra
    return "\n".join(lines) + "\n"


def write_profile(
    path: Path,
    gpus: int = 8,
    recording: Path | Mapping[str, Any] = DEFAULT_RECORDING,
    faults: Mapping[int, Sequence[str]] | None = None,
    missing: int = 0,
    *,
    driver_version: str | None = None,
    name: str | None = None,
    uuids: Sequence[str] | None = None,
    bus_ids: Sequence[str] | None = None,
    minors: Sequence[int] | None = None,
) -> Path:
    """Write :func:`profile_text` to ``path`` atomically (an ``nvmlInit`` never reads half a profile)."""
    text = profile_text(
        gpus,
        recording,
        faults,
        missing,
        driver_version=driver_version,
        name=name,
        uuids=uuids,
        bus_ids=bus_ids,
        minors=minors,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
