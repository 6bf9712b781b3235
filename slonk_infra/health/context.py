"""What every check receives: the spec, the mode, NVML (or why it is missing) and the clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from slonk_infra.health.config import HealthSpec
from slonk_infra.health.nvml import Nvml, NvmlError

Mode = Literal["boot", "interval", "prolog", "epilog"]
MODES: tuple[Mode, ...] = ("boot", "interval", "prolog", "epilog")


@dataclass
class CheckContext:
    """Inputs shared by the checks of one run."""

    spec: HealthSpec
    mode: Mode
    nvml: Nvml | None = None
    nvml_error: NvmlError | None = None
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.monotonic)

    def gpus(self) -> range:
        """Indices of the GPUs NVML sees (empty without NVML)."""
        if self.nvml is None:
            return range(0)
        return range(self.nvml.device_count())
