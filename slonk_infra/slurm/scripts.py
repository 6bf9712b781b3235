"""Scripts the Slurm pods run, rendered next to the config: prolog, epilog, node health check."""

from __future__ import annotations

from slonk_infra.plan import ClusterPlan

HEALTHCHECK = """#!/bin/sh
# Node health check run by the prolog, the epilog and the worker entrypoint.
# Exit non-zero means: do not give this node jobs. GPU checks run only where GPUs are present.
set -eu
if [ -n "${SLONK_EXPECTED_GPUS:-}" ] && [ "${SLONK_EXPECTED_GPUS}" != "0" ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "healthcheck: nvidia-smi missing on a GPU node" >&2; exit 1
  fi
  seen=$(nvidia-smi -L | grep -c '^GPU ' || true)
  if [ "$seen" != "$SLONK_EXPECTED_GPUS" ]; then
    echo "healthcheck: expected $SLONK_EXPECTED_GPUS GPUs, nvidia-smi lists $seen" >&2; exit 1
  fi
fi
exit 0
"""

PROLOG = """#!/bin/sh
# Slurm prolog: refuse the job on a node that fails its health check; Slurm then drains the node
# with this script's failure as the reason and requeues the job elsewhere.
exec "$(dirname "$0")/healthcheck.sh"
"""

EPILOG = """#!/bin/sh
# Slurm epilog: a node that fails its health check after a job is drained before it takes another.
exec "$(dirname "$0")/healthcheck.sh"
"""


def render_scripts(plan: ClusterPlan) -> dict[str, str]:
    """Script name -> text."""
    del plan  # the scripts are the same for every cluster; the plan is here for symmetry of the renderers
    return {"prolog.sh": PROLOG, "epilog.sh": EPILOG, "healthcheck.sh": HEALTHCHECK}
