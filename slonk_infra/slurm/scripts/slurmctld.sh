#!/bin/sh
# Controller entrypoint. State lives on the controller's persistent volume (or, with a backup controller,
# on a shared filesystem); a restart (the pod is rolled when the config changes) recovers queued and
# running jobs from it. With controller.backup, an archive an operator asked for (state.sh
# request-restore) is restored first.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
if [ -n "${SLONK_BACKUPS:-}" ]; then
  "$(dirname "$0")/state.sh" restore-requested "$SLONK_BACKUPS" @STATE_DIR@
fi
case "$(hostname)" in
*-0)
  if [ -n "${SLONK_BACKUPS:-}" ]; then
    "$(dirname "$0")/state.sh" await-state "$SLONK_BACKUPS" @STATE_DIR@
  fi
  ;;
*)
  # A backup controller on a new cluster: until the primary has written its first heartbeat into the
  # shared state, a 26.05 backup only waits for that file and answers no RPC, so the primary's own
  # start (it first asks every backup to stand down) stalls for its 30 s timeout. Start after the
  # primary, or after two minutes without one (a primary that cannot be scheduled).
  tries=0
  while [ ! -e @STATE_DIR@/heartbeat ] && [ "$tries" -lt 120 ]; do
    tries=$((tries + 1))
    sleep 1
  done
  ;;
esac
if [ -n "${SLONK_PUSH_CONFIG:-}" ]; then
  case "$(hostname)" in
  # Before 23.11 configless slurmd keep the files they fetched until told: push them once settled. It
  # stays a zombie under slurmctld (PID 1) when done.
  *-0) "$(dirname "$0")/push-config.sh" & ;;
  esac
fi
exec slurmctld -D -f @CONF_DIR@/slurm.conf
