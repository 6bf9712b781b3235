#!/bin/sh
# Node health check (slonk-health). Run as slurm.conf's HealthCheckProgram (no argument: interval
# mode), by the prolog and epilog (prolog / epilog) and by the worker entrypoint (boot).
# Its settings come from files beside this script, never from the container's environment, which
# slurmd does not pass to the programs it runs: health.json (the declaration's thresholds) and
# health-groups.txt ("<group> <gpus> <tpu chips>" per worker group, from the machine catalog).
# A failure drains the node with a "slonk-health:" reason (not at boot: the node is not registered
# yet, and the non-zero exit keeps slurmd from starting) and publishes the verdict in the node's
# Comment for the operations controller. Pods of no worker group (controller, login) skip it.
# The checks run in a child slonk-health can abandon: an NVML call unanswered for 15 s (a GPU or driver
# that has stopped answering) fails its check, and a run still going @HEALTH_DEADLINE_S@ s in concludes with
# what it has, so the node is drained before slurmd's 60 s are up (a run slurmd stops drains nothing)
# and this program ends even when the stuck call never does. @HEALTH_STATE_DIR@ keeps what the next run
# needs: a call still stuck, the GPUs' fingerprint.
set -eu
# slurmd gives this no search path (HealthCheckProgram: SLURMD_NODENAME only; prolog/epilog: the job's
# SLURM_* variables). The GPU driver's libraries and nvidia-smi may live under @GPU_DRIVER_DIR@ (GKE's
# device plugin), which the container's environment names but this one does not; slurmd.sh puts them
# in the linker cache too, and this keeps the check working where that could not be written.
export PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}:@GPU_DRIVER_DIR@/bin"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}@GPU_DRIVER_DIR@/lib64:@GPU_DRIVER_DIR@/lib"
mode="${1:-interval}"
here="$(dirname "$0")"
node="${SLURMD_NODENAME:-$(hostname)}"
group="${node%-*}"
counts=$(awk -v g="$group" '$1 == g { print $2, $3 }' "$here/health-groups.txt")
[ -n "$counts" ] || exit 0
gpus="${counts% *}"
chips="${counts#* }"
if ! command -v slonk-health >/dev/null 2>&1; then
  echo "healthcheck: slonk-health is not installed in this image" >&2
  exit 1
fi
drain="--drain"
[ "$mode" = boot ] && drain="--no-drain"
exec slonk-health --mode "$mode" --spec "$here/health.json" --gpus "$gpus" --tpu-chips "$chips" \
  --node-name "$node" "$drain" --publish --deadline @HEALTH_DEADLINE_S@ --state-dir @HEALTH_STATE_DIR@ \
  --report-file "/tmp/slonk-health-$mode.json" >/dev/null
