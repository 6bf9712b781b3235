"""NVML behind one thin interface, so checks run the same on a GPU and on recorded answers.

Every value a check reads goes through :meth:`Nvml._read`, keyed by a stable name (``eccMode``,
``remappedRows``, ...) and the GPU index. A backend answers it: :class:`~slonk_infra.health.nvml_live.LiveBackend`
calls NVML through ``nvidia-ml-py``; :class:`RecordingBackend` wraps another backend and keeps every
answer (value or NVML error code) for a JSON file; :class:`ReplayBackend` answers from such a file.
Tests replay answers recorded on a real GPU, and failure variants derived from them.

Recording format (``slonk-health-nvml/1``)::

    {"format": "slonk-health-nvml/1",
     "init": {"error": null},                      # or the NVML error code of nvmlInit
     "system": {"deviceCount": {"value": 1}, ...},
     "devices": {"0": {"eccMode": {"value": [1, 1]}, "remappedRows": {"error": 3}, ...}}}
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

FORMAT = "slonk-health-nvml/1"

# NVML return codes (nvml.h); mirrored so replaying needs no NVML library.
NOT_SUPPORTED = 3
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
UNKNOWN = 999

# nvmlEventType* bits the XID check listens for.
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8
WATCHED_EVENTS = EVENT_DOUBLE_BIT_ECC | EVENT_XID_CRITICAL

# nvmlClocksEventReason* bits (formerly "throttle reasons"), by the names HealthSpec uses.
CLOCK_EVENT_BITS: dict[str, int] = {
    "gpuIdle": 0x1,
    "applicationsClocksSetting": 0x2,
    "swPowerCap": 0x4,
    "hwSlowdown": 0x8,
    "syncBoost": 0x10,
    "swThermalSlowdown": 0x20,
    "hwThermalSlowdown": 0x40,
    "hwPowerBrakeSlowdown": 0x80,
    "displayClockSetting": 0x100,
}


class NvmlError(Exception):
    """An NVML call failed with ``code`` (an NVML return code)."""

    def __init__(self, code: int, call: str, message: str = "") -> None:
        super().__init__(f"{call}: NVML error {code}{': ' + message if message else ''}")
        self.code = code
        self.call = call
        self.message = message

    @property
    def not_supported(self) -> bool:
        """The GPU or driver does not offer this value (not a fault)."""
        return self.code in (NOT_SUPPORTED, FUNCTION_NOT_FOUND)


Fetch = Callable[[Any, Callable[[int], Any]], Any]
"""Reads one value: called with the ``pynvml`` module and a GPU-index-to-handle function."""


class Backend(Protocol):
    """Answers reads; raises :class:`NvmlError` for an NVML failure."""

    def read(self, device: int | None, key: str, fetch: Fetch) -> Any:
        """The JSON-compatible answer for ``key`` (of GPU ``device``, or system-wide when None)."""

    def close(self) -> None:
        """Release NVML."""


class ReplayBackend:
    """Answers from a recording (see the module docstring)."""

    def __init__(self, recording: dict[str, Any]) -> None:
        if recording.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} recording: format is {recording.get('format')!r}")
        self._rec = recording
        code = recording["init"]["error"]
        if code is not None:
            raise NvmlError(int(code), "nvmlInit", str(recording["init"].get("message", "")))

    @classmethod
    def from_file(cls, path: Path) -> ReplayBackend:
        """Load a recording file."""
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def read(self, device: int | None, key: str, fetch: Fetch) -> Any:
        scope = self._rec["system"] if device is None else self._rec["devices"][str(device)]
        if key not in scope:
            raise KeyError(f"the recording has no answer for {key!r} on {'system' if device is None else device}")
        answer = scope[key]
        if answer.get("error") is not None:
            raise NvmlError(int(answer["error"]), key, str(answer.get("message", "")))
        return answer["value"]

    def close(self) -> None:
        return None


class RecordingBackend:
    """Passes reads to ``inner`` and keeps each answer, for :meth:`recording`."""

    def __init__(self, inner: Backend | None, init_error: NvmlError | None = None) -> None:
        self._inner = inner
        self._rec: dict[str, Any] = {
            "format": FORMAT,
            "init": {"error": None}
            if init_error is None
            else {"error": init_error.code, "message": init_error.message},
            "system": {},
            "devices": {},
        }

    def read(self, device: int | None, key: str, fetch: Fetch) -> Any:
        if self._inner is None:
            raise NvmlError(UNKNOWN, key, "NVML is not initialised")
        scope = self._rec["system"] if device is None else self._rec["devices"].setdefault(str(device), {})
        try:
            value = self._inner.read(device, key, fetch)
        except NvmlError as exc:
            scope[key] = {"error": exc.code, "message": exc.message}
            raise
        scope[key] = {"value": value}
        return value

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()

    def recording(self) -> dict[str, Any]:
        """Everything read so far, in the recording format."""
        return self._rec


@dataclass(frozen=True)
class GpuEvent:
    """An NVML event: its GPU, type bit (EVENT_*) and data (the XID code for XID events)."""

    device: int
    event_type: int
    data: int


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _memory(nv: Any, handle: Any) -> dict[str, int | None]:
    try:
        info = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
        return {"total": int(info.total), "reserved": int(info.reserved), "used": int(info.used)}
    except nv.NVMLError as exc:
        if exc.value not in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
            raise
    info = nv.nvmlDeviceGetMemoryInfo(handle)
    return {"total": int(info.total), "reserved": None, "used": int(info.used)}


def _clock_reasons(nv: Any, handle: Any) -> int:
    try:
        return int(nv.nvmlDeviceGetCurrentClocksEventReasons(handle))
    except nv.NVMLError as exc:
        if exc.value != FUNCTION_NOT_FOUND:
            raise
    return int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def _processes(nv: Any, handle: Any) -> list[list[int | None]]:
    found = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    return [[int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory)] for p in found]


def _wait_events(nv: Any, handle: Callable[[int], Any], masks: dict[int, int], timeout_ms: int) -> list[list[int]]:
    """Register ``masks`` (GPU index -> event bits) on one event set and collect events for ``timeout_ms``.

    Raises NOT_SUPPORTED when no GPU accepts a registration (some virtual machines offer no events).
    """
    event_set = nv.nvmlEventSetCreate()
    try:
        registered = 0
        for index, mask in masks.items():
            if not mask:
                continue
            try:
                nv.nvmlDeviceRegisterEvents(handle(index), mask, event_set)
                registered += 1
            except nv.NVMLError as exc:
                if exc.value != NOT_SUPPORTED:
                    raise
        if not registered:
            raise nv.NVMLError(NOT_SUPPORTED)
        events: list[list[int]] = []
        deadline = time.monotonic() + timeout_ms / 1000
        while (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            try:
                data = nv.nvmlEventSetWait(event_set, left_ms)
            except nv.NVMLError as exc:
                if exc.value == TIMEOUT:
                    break
                raise
            events.append([int(nv.nvmlDeviceGetIndex(data.device)), int(data.eventType), int(data.eventData)])
        return events
    finally:
        nv.nvmlEventSetFree(event_set)


def _device_call(call: str, i: int) -> Fetch:
    """A read of ``pynvml.<call>(handle)`` returning an int."""

    def fetch(nv: Any, handle: Callable[[int], Any]) -> int:
        return int(getattr(nv, call)(handle(i)))

    return fetch


class Nvml:
    """Typed reads of the NVML values the checks use; one instance per run."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.watch: Callable[[tuple[int | None, str] | None], None] | None = None
        """Told (GPU index or None, key) as each read begins and None as it ends: how a run learns which
        call never returned (slonk_infra/health/isolate.py)."""

    def _read(self, device: int | None, key: str, fetch: Fetch) -> Any:
        if self.watch is None:
            return self._backend.read(device, key, fetch)
        self.watch((device, key))
        try:
            return self._backend.read(device, key, fetch)
        finally:
            self.watch(None)

    def close(self) -> None:
        """Release NVML."""
        self._backend.close()

    def driver_version(self) -> str:
        """The kernel driver's version, e.g. 580.159.04."""
        return str(self._read(None, "driverVersion", lambda nv, h: _text(nv.nvmlSystemGetDriverVersion())))

    def device_count(self) -> int:
        """GPUs NVML sees."""
        return int(self._read(None, "deviceCount", lambda nv, h: int(nv.nvmlDeviceGetCount())))

    def name(self, i: int) -> str:
        """Product name, e.g. NVIDIA H100 80GB HBM3."""
        return str(self._read(i, "name", lambda nv, h: _text(nv.nvmlDeviceGetName(h(i)))))

    def uuid(self, i: int) -> str:
        """The GPU's UUID (GPU-...), stable for the physical board."""
        return str(self._read(i, "uuid", lambda nv, h: _text(nv.nvmlDeviceGetUUID(h(i)))))

    def minor_number(self, i: int) -> int:
        """The device's minor number: N of /dev/nvidiaN, the file gres.conf names (Slurm's GPU index)."""
        return int(self._read(i, "minorNumber", lambda nv, h: int(nv.nvmlDeviceGetMinorNumber(h(i)))))

    def pci_bus_id(self, i: int) -> str:
        """PCI address, e.g. 00000000:00:05.0."""
        return str(self._read(i, "pciBusId", lambda nv, h: _text(nv.nvmlDeviceGetPciInfo(h(i)).busId)))

    def ecc_mode(self, i: int) -> tuple[bool, bool]:
        """ECC (current, pending) mode."""
        cur, pend = self._read(i, "eccMode", lambda nv, h: [int(v) for v in nv.nvmlDeviceGetEccMode(h(i))])
        return bool(cur), bool(pend)

    def ecc_errors(self, i: int, uncorrected: bool, volatile: bool) -> int:
        """ECC error count: uncorrected or corrected, since driver load (volatile) or lifetime (aggregate)."""
        key = f"eccErrors.{'uncorrected' if uncorrected else 'corrected'}.{'volatile' if volatile else 'aggregate'}"
        err_type, counter = int(uncorrected), 0 if volatile else 1
        return int(self._read(i, key, lambda nv, h: int(nv.nvmlDeviceGetTotalEccErrors(h(i), err_type, counter))))

    def remapped_rows(self, i: int) -> tuple[int, int, bool, bool]:
        """Rows remapped for (correctable, uncorrectable) errors, and the (pending, failure) flags."""
        corr, unc, pending, failure = self._read(
            i, "remappedRows", lambda nv, h: [int(v) for v in nv.nvmlDeviceGetRemappedRows(h(i))]
        )
        return int(corr), int(unc), bool(pending), bool(failure)

    def pcie(self, i: int) -> dict[str, int]:
        """PCIe link: currentGen, maxGen (GPU and slot together), gpuMaxGen (the GPU alone), currentWidth, maxWidth."""
        calls = {
            "currentGen": "nvmlDeviceGetCurrPcieLinkGeneration",
            "maxGen": "nvmlDeviceGetMaxPcieLinkGeneration",
            "gpuMaxGen": "nvmlDeviceGetGpuMaxPcieLinkGeneration",
            "currentWidth": "nvmlDeviceGetCurrPcieLinkWidth",
            "maxWidth": "nvmlDeviceGetMaxPcieLinkWidth",
        }
        out: dict[str, int] = {}
        for field, call in calls.items():
            out[field] = int(self._read(i, f"pcie.{field}", _device_call(call, i)))
        return out

    def clock_event_reasons(self, i: int) -> int:
        """Bitmask of why clocks are held down (CLOCK_EVENT_BITS)."""
        return int(self._read(i, "clockEventReasons", lambda nv, h: _clock_reasons(nv, h(i))))

    def temperature(self, i: int) -> int:
        """GPU die temperature in degrees C."""
        return int(self._read(i, "temperature", lambda nv, h: int(nv.nvmlDeviceGetTemperature(h(i), 0))))

    def performance_state(self, i: int) -> int:
        """P-state: 0 is full performance, higher is lower power."""
        return int(self._read(i, "performanceState", lambda nv, h: int(nv.nvmlDeviceGetPerformanceState(h(i)))))

    def memory(self, i: int) -> dict[str, int | None]:
        """GPU memory in bytes: total, reserved (by the driver; None before NVML's v2 query) and used."""
        value: dict[str, int | None] = self._read(i, "memory", lambda nv, h: _memory(nv, h(i)))
        return value

    def compute_processes(self, i: int) -> list[tuple[int, int | None]]:
        """(pid, bytes used or None) of each compute process on the GPU."""
        rows = self._read(i, "computeProcesses", lambda nv, h: _processes(nv, h(i)))
        return [(int(pid), None if used is None else int(used)) for pid, used in rows]

    def supported_event_types(self, i: int) -> int:
        """Bitmask of the event types NVML can deliver for the GPU."""
        return int(self._read(i, "supportedEventTypes", lambda nv, h: int(nv.nvmlDeviceGetSupportedEventTypes(h(i)))))

    def wait_events(self, masks: dict[int, int], timeout_ms: int) -> list[GpuEvent]:
        """Listen ``timeout_ms`` for events of the given types per GPU; NVML delivers only new events."""
        rows = self._read(None, "events", lambda nv, h: _wait_events(nv, h, masks, timeout_ms))
        return [GpuEvent(int(d), int(t), int(x)) for d, t, x in rows]
