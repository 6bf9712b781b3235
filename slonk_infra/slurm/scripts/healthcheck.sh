#!/bin/sh
# Node health check run by the prolog, the epilog and the worker entrypoint.
# Exit non-zero means: do not give this node jobs. GPU checks run only where GPUs are expected.
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
