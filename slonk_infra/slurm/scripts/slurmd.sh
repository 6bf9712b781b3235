#!/bin/sh
# Worker entrypoint. slurmd fetches its config from slurmctld (configless) and registers; its node
# record, kept in FUTURE until now, becomes IDLE. A failing health check keeps the node out.
set -eu
# Until slurmd is exec'd this shell is PID 1, which ignores signals it has no handler for: without
# this a pod still waiting below would take its whole grace period to stop.
trap 'exit 143' TERM INT
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
here="$(dirname "$0")"
node="$(hostname)"
# Client commands in this pod (scontrol below, slonk-health's verdict) fetch the config from slurmctld
# until slurmd has cached it under /run/slurm/conf. SLONK_CONTROLLER lists every controller (primary
# first); both slurmd's --conf-server and SLURM_CONF_SERVER take "host:port,host:port".
SLURM_CONF_SERVER="$(echo "$SLONK_CONTROLLER" | sed 's/,/:@SLURMCTLD_PORT@,/g'):@SLURMCTLD_PORT@"
export SLURM_CONF_SERVER
# Address refresh, first: before the boot health check (seconds with the GPU checks) and before slurmd
# registers. slurmctld keeps the address it last reached a node at; a pod replaced without its preStop
# (node lost, OOM kill, eviction past the grace period) comes back on a new IP, and slurmctld would send
# it jobs at the old one until the node went DOWN; a job launched there meanwhile is requeued and waits
# out the requeue delay (cred_expire, 120 s). (A preStop drain returns the node to FUTURE, which clears
# the address too.)
tries=0
until err="$(scontrol update NodeName="$node" NodeAddr="${SLONK_POD_IP:-$node}" NodeHostname="$node" 2>&1)"; do
  case "$err" in
    *uthentication*) why=" (this pod's munge key is not slurmctld's: check the munge-key Secret)" ;;
    *) why="" ;;
  esac
  [ $((tries % 30)) -eq 0 ] && echo "slurmd.sh: cannot set $node's address at $SLURM_CONF_SERVER yet: $err$why" >&2
  tries=$((tries + 1))
  sleep 2
done
# A node slurmctld still counts as up had its previous pod lost without the preStop (node lost, OOM
# kill): set it DOWN until this pod's slurmd registers (ReturnToService=2 brings it back then), so no job
# is launched at a slurmd that is not there yet (a failed launch waits out the requeue delay, 120 s),
# and the jobs that died with the old pod are requeued now instead of after SlurmdTimeout. A node a
# person drained keeps its state and reason.
state="$(scontrol show node -o "$node" 2>/dev/null | sed -n 's/.* State=\([^ ]*\).*/\1/p')"
case "$state" in
  IDLE | ALLOCATED | MIXED | COMPLETING | IDLE+* | ALLOCATED+* | MIXED+* | COMPLETING+*)
    case "$state" in
      *DRAIN* | *FUTURE* | *DOWN*) ;;
      *) scontrol update NodeName="$node" State=DOWN Reason="slonk: pod replaced, slurmd not registered yet" || true ;;
    esac
    ;;
esac
# GPU driver libraries into the linker cache. GKE's device plugin mounts the driver under
# @GPU_DRIVER_DIR@ (lib64, bin), which only this container's own LD_LIBRARY_PATH names, while slurmd
# starts HealthCheckProgram, Prolog and Epilog with a bare environment (Slurm's prolog/epilog guide:
# "no search path set"): without this, libnvidia-ml.so.1 is not found there, nor by a job that sets
# its own LD_LIBRARY_PATH. (EKS: the NVIDIA container toolkit puts the libraries in the standard path
# and runs ldconfig itself.) Slonk's compute-node setup does the same.
driver_dirs=""
for dir in "@GPU_DRIVER_DIR@/lib64" "@GPU_DRIVER_DIR@/lib"; do
  if [ -d "$dir" ]; then driver_dirs="$driver_dirs$dir
"; fi
done
if [ -n "$driver_dirs" ]; then
  # -X: the cache only, no links written: on fabric nodes the directory is the host's (a hostPath).
  if ! { printf '%s' "$driver_dirs" > /etc/ld.so.conf.d/slonk-gpu-driver.conf && ldconfig -X; }; then
    echo "slurmd.sh: could not add the GPU driver to the linker cache; the health check names it itself" >&2
  fi
fi
# The variables the manifests name in SLONK_TASK_ENV (fabric, TPU slice; NAME* stands for every
# variable with that prefix), for task-env.sh to hand to every task; the fabric's env script is
# recorded and read there. A search path (LD_LIBRARY_PATH, PATH, ...) is put before the task's own
# value, never instead of it: a job's conda or toolkit paths must survive (slurm.conf(5) TaskProlog).
# Other variables, single paths included (TPU_LIBRARY_PATH names one file), are handed over as they are.
: > "@TASK_ENV_FILE@.new"
if [ -n "${SLONK_TASK_ENV_SCRIPT:-}" ]; then
  printf '#script %s\n' "$SLONK_TASK_ENV_SCRIPT" >> "@TASK_ENV_FILE@.new"
fi
names=""
set -f  # TPU_* is a prefix, never a file pattern
for name in $(printf '%s' "${SLONK_TASK_ENV:-}" | tr ',' ' '); do
  case "$name" in
    *"*") names="$names $(env | sed -n "s/^\(${name%"*"}[A-Za-z0-9_]*\)=.*/\1/p" | sort | tr '\n' ' ')" ;;
    *) names="$names $name" ;;
  esac
done
for name in $(printf '%s' "$names" | tr ' ' '\n' | awk 'NF && !seen[$0]++'); do
  value="$(printenv "$name")" || continue  # not set on this node: the task keeps its own
  case "$name" in
    LD_LIBRARY_PATH | PATH | PYTHONPATH | LIBRARY_PATH | CPATH) printf 'prepend %s=%s\n' "$name" "$value" ;;
    *) printf 'export %s=%s\n' "$name" "$value" ;;
  esac >> "@TASK_ENV_FILE@.new"
done
set +f
chmod 644 "@TASK_ENV_FILE@.new"
mv "@TASK_ENV_FILE@.new" "@TASK_ENV_FILE@"
sh "$here/healthcheck.sh" boot
# Rejoin, beside slurmd for the pod's lifetime: Slurm 22.05 returns idle nodes to their configured
# FUTURE state when slurmctld restarts and then stops contacting them; slurmd registers again on SIGHUP.
(
  while sleep 30; do
    if [ "$(sh "$here/rejoin.sh" 2>/dev/null)" = "rejoin" ] && [ -r /run/slurm/slurmd.pid ]; then
      kill -HUP "$(cat /run/slurm/slurmd.pid)"
    fi
  done
) &
# slurmd is the container's main process: exec'd under catatonit (PID 1), which forwards SIGTERM to it
# at once and reaps the slurmstepd processes that outlive their parents; without catatonit in the
# image, slurmd itself is PID 1. Job cgroups: docs/containers.md.
if command -v catatonit >/dev/null 2>&1; then
  exec catatonit -- slurmd -D --conf-server "$SLURM_CONF_SERVER" -N "$node"
fi
exec slurmd -D --conf-server "$SLURM_CONF_SERVER" -N "$node"
