"""Scripts the Slurm pods run, rendered next to the config: entrypoints, prolog, epilog, health check.

They are the only glue between Kubernetes and Slurm. The node lifecycle they implement:

* Every worker's Slurm node record exists in slurm.conf from the start, in state FUTURE (hidden,
  never contacted). When the worker pod starts, its slurmd registers and Slurm moves the node to
  IDLE by itself: scaling up is a replica count change and nothing else.
* The preStop hook drains the node, waits for its jobs up to the grace period, requeues what is
  left and returns the node to FUTURE, so a scaled-down pool leaves no DOWN records behind.
"""

from __future__ import annotations

from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import paths

HEALTHCHECK = """#!/bin/sh
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
"""

PROLOG = """#!/bin/sh
# Slurm prolog: refuse the job on a node that fails its health check; Slurm then drains the node
# with this failure as the reason and requeues the job elsewhere.
exec sh "$(dirname "$0")/healthcheck.sh"
"""

EPILOG = """#!/bin/sh
# Slurm epilog: a node that fails its health check after a job is drained before it takes another.
exec sh "$(dirname "$0")/healthcheck.sh"
"""

MUNGED = """#!/bin/sh
# munged sidecar. The key arrives as a Secret file owned by root; munged refuses a key it does not
# own or that others can read, so it is copied with the right owner into a private tmpfs first.
set -eu
install -d -o munge -g munge -m 0700 /run/munge-key
install -o munge -g munge -m 0400 /etc/munge-secret/munge.key /run/munge-key/munge.key
chown munge:munge /run/munge
chmod 0755 /run/munge
exec runuser -u munge -- munged --foreground --key-file=/run/munge-key/munge.key
"""

SLURMCTLD = f"""#!/bin/sh
# Controller entrypoint. State lives on the controller's persistent volume; a restart (the pod is
# rolled when the config changes) recovers queued and running jobs from it.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
exec slurmctld -D -f {paths.CONF_DIR}/slurm.conf
"""

SLURMD = f"""#!/bin/sh
# Worker entrypoint. slurmd fetches its config from slurmctld (configless) and registers; its node
# record, kept in FUTURE until now, becomes IDLE. A failing health check keeps the node out.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
here="$(dirname "$0")"
sh "$here/healthcheck.sh"
slurmd -D --conf-server "${{SLONK_CONTROLLER}}:{paths.SLURMCTLD_PORT}" -N "$(hostname)" &
pid=$!
trap 'kill -TERM "$pid"' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  sleep 30 & wait $! || true
  if [ "$(sh "$here/rejoin.sh" 2>/dev/null)" = "rejoin" ]; then kill -HUP "$pid"; fi
done
wait "$pid"
"""

REJOIN = """#!/bin/sh
# Prints "rejoin" when this node's slurmd runs but slurmctld no longer lists the node. Slurm 22.05
# returns idle nodes to their configured FUTURE state when slurmctld restarts and then stops
# contacting them; slurmd registers again on SIGHUP, which the entrypoint sends.
node="${1:-$(hostname)}"
[ -f /run/slurm/terminating ] && exit 0
scontrol ping 2>/dev/null | grep -q 'is UP' || exit 0
sinfo -h -n "$node" -o %N 2>/dev/null | grep -q . || echo rejoin
"""

DRAIN = """#!/bin/sh
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
"""

LOGIN = """#!/bin/sh
# Login entrypoint: sshd in the foreground. Host keys are created on first start; users come from
# the image or a directory service configured in it.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
ssh-keygen -A
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e
"""

NFS_SERVER = """#!/bin/sh
# In-cluster NFS server for clusters without a managed filesystem (local stacks).
set -eu
mkdir -p /exports
echo "/exports *(rw,fsid=0,insecure,no_root_squash,no_subtree_check)" > /etc/exports
rpcbind || true
rpc.nfsd 8
exportfs -ra
exec rpc.mountd --foreground
"""


def render_scripts(plan: ClusterPlan) -> dict[str, str]:
    """Script name -> text (installed at /opt/slonk/scripts in every Slurm pod)."""
    del plan  # the scripts are the same for every cluster; what differs comes in through env vars
    return {
        "prolog.sh": PROLOG,
        "epilog.sh": EPILOG,
        "healthcheck.sh": HEALTHCHECK,
        "munged.sh": MUNGED,
        "slurmctld.sh": SLURMCTLD,
        "slurmd.sh": SLURMD,
        "rejoin.sh": REJOIN,
        "drain.sh": DRAIN,
        "login.sh": LOGIN,
        "nfs-server.sh": NFS_SERVER,
    }
