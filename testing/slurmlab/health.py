"""The lab's stand-in for the node health check.

The lab's nodes have no GPUs and the daemons do not see the test's virtual environment, so the real
``healthcheck.sh`` (which runs slonk-health) would rightly fail them in every prolog and epilog. The
stand-in records how slurmd called it instead, in ``home/healthcheck.log``; slonk-health itself is
tested on recorded and real NVML answers, and against real slurmd, in ``tests/health/``.
"""

from __future__ import annotations

from collections.abc import Mapping

HEALTHCHECK = "scripts/healthcheck.sh"
HEALTHCHECK_STANDIN = """#!/bin/sh
printf '%s %s\\n' "${1:-interval}" "${SLURMD_NODENAME:-?}" >> "$(dirname "$0")/../../home/healthcheck.log"
"""


def stand_in_health_check(files: Mapping[str, str]) -> dict[str, str]:
    """``files`` (rendered Slurm files by path) with the health check replaced by the recording stand-in."""
    out = dict(files)
    out[HEALTHCHECK] = HEALTHCHECK_STANDIN
    return out
