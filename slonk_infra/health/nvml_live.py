"""The live NVML backend: ``nvidia-ml-py`` (``import pynvml``) against the driver's libnvidia-ml.so.1."""

from __future__ import annotations

import contextlib
from typing import Any

from slonk_infra.health.nvml import FUNCTION_NOT_FOUND, LIBRARY_NOT_FOUND, Fetch, NvmlError


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
        except getattr(self._nv, "NVMLLibraryMismatchError", ()) as exc:
            # pynvml's versioned calls raise this (not an NVMLError) when the driver lacks the function
            # version: the same as a function the driver does not have.
            raise NvmlError(FUNCTION_NOT_FOUND, key, str(exc)) from None

    def close(self) -> None:
        # Shutting down a library that is already broken has nothing left to report.
        with contextlib.suppress(self._nv.NVMLError):
            self._nv.nvmlShutdown()
