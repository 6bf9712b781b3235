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
  # Before 25.11 (no SlurmctldParameters=reconfig_on_restart) configless slurmd keep the files they
  # fetched at their start, and a config change rolls only the controller: once this one answers, ask
  # the controller in control to read its files again and push them to every slurmd (a backup answers in
  # standby too; asking twice does no harm). Gives up after ten minutes without an answer.
  (
    tries=0
    until scontrol ping 2>/dev/null | grep -q "at $(hostname) is UP" || [ "$tries" -ge 600 ]; do
      tries=$((tries + 1))
      sleep 1
    done
    [ "$tries" -lt 600 ] && scontrol reconfigure
  ) >/dev/null 2>&1 &
fi
exec slurmctld -D -f @CONF_DIR@/slurm.conf
