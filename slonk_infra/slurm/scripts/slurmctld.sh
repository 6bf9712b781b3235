#!/bin/sh
# Controller entrypoint. State lives on the controller's persistent volume; a restart (the pod is
# rolled when the config changes) recovers queued and running jobs from it.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
exec slurmctld -D -f @CONF_DIR@/slurm.conf
