#!/bin/sh
# Prints "rejoin" when this node's slurmd runs but slurmctld no longer lists the node. Slurm 22.05
# returns idle nodes to their configured FUTURE state when slurmctld restarts and then stops
# contacting them; slurmd registers again on SIGHUP, which the entrypoint sends.
node="${1:-$(hostname)}"
[ -f /run/slurm/terminating ] && exit 0
scontrol ping 2>/dev/null | grep -q 'is UP' || exit 0
sinfo -h -n "$node" -o %N 2>/dev/null | grep -q . || echo rejoin
