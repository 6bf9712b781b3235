#!/bin/sh
# preStop hook: take this node out of Slurm cleanly before the pod goes away.
# Drain, let running jobs finish within the grace period, requeue the rest, then return the node
# record to FUTURE so that a scaled-down pool leaves no DOWN node in sinfo.
node="$(hostname)"
touch /run/slurm/terminating  # the entrypoint must not bring a leaving node back
grace="${SLONK_DRAIN_SECONDS:-240}"
scontrol update NodeName="$node" State=DRAIN Reason="pod terminating" || true
waited=0
while [ "$waited" -lt "$grace" ]; do
  [ -z "$(squeue -h -w "$node" -o %i 2>/dev/null)" ] && break
  sleep 5; waited=$((waited + 5))
done
for job in $(squeue -h -w "$node" -o %i 2>/dev/null); do scontrol requeue "$job" || true; done
scontrol update NodeName="$node" State=FUTURE || true
