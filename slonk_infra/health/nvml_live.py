"""The live NVML backend: ``nvidia-ml-py`` (``import pynvml``) against the driver's libnvidia-ml.so.1."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from slonk_infra.health.nvml import LIBRARY_NOT_FOUND, NOT_SUPPORTED, TIMEOUT, Fetch, NvmlError


class LiveBackend:
    """Initialises NVML on construction; raises :class:`NvmlError` when it cannot."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise NvmlError(LIBRARY_NOT_FOUND, "import pynvml", "nvidia-ml-py is not installed") from None
        self._nv: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlError(int(exc.value), "nvmlInit", str(exc)) from None
        self._handles: dict[int, Any] = {}

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._nv.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def read(self, device: int | None, key: str, fetch: Fetch) -> Any:
        try:
            return fetch(self._nv, self._handle)
        except self._nv.NVMLError as exc:
            raise NvmlError(int(exc.value), key, str(exc)) from None

    def close(self) -> None:
        # Shutting down a library that is already broken has nothing left to report.
        with contextlib.suppress(self._nv.NVMLError):
            self._nv.nvmlShutdown()


def wait_events(nv: Any, handle: Callable[[int], Any], masks: dict[int, int], timeout_ms: int) -> list[list[int]]:
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
