#!/bin/sh
# Controller entrypoint. State lives on the controller's persistent volume (or, with a backup controller,
# on a shared filesystem); a restart (the pod is rolled when the config changes) recovers queued and
# running jobs from it. With controller.backup, an archive an operator asked for (state.sh
# request-restore) is restored first.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
# This pod runs the config it was made with, the one its template's config hash names: kubelet rewrites a
# mounted ConfigMap in a running pod within about a minute, and slurmctld reads its files again when a
# backup takes control and on `scontrol reconfigure`. So a change reaches a controller only when its pod
# is rolled, and a config the primary cannot start with leaves the backup on the one it was made with.
# Copied once per pod (the directory outlives a container restart). The files only: Slurm finds gres.conf,
# cgroup.conf and the topology beside SLURM_CONF, and reads the JWT key where slurm.conf names it.
if [ ! -f @PINNED_CONF_DIR@/slurm.conf ]; then
  rm -rf @PINNED_CONF_DIR@.new
  mkdir -p @PINNED_CONF_DIR@.new
  for f in @CONF_DIR@/*; do
    [ ! -f "$f" ] || cp -L "$f" @PINNED_CONF_DIR@.new/
  done
  rm -rf @PINNED_CONF_DIR@
  mv @PINNED_CONF_DIR@.new @PINNED_CONF_DIR@
fi
export SLURM_CONF=@PINNED_CONF_DIR@/slurm.conf
# What asks this pod's own slurmctld (its probes, push-config.sh) reads this copy of slurm.conf, naming
# this pod at the loopback address: slurm.conf names it by its ClusterIP Service, and a pod reaching
# itself through its own Service (hairpin) is left to each network plugin and its NetworkPolicy handling.
# slurmctld listens on every address. It names no other controller: `scontrol ping` asks each one in
# turn, and a peer that accepts but does not answer (or whose node is gone while its pod object stays an
# endpoint) would hold this pod's probe past its timeout. A config change rolls the pod, so the copy is
# made once.
sed "s/^SlurmctldHost=$(hostname)(.*)\$/SlurmctldHost=$(hostname)(127.0.0.1)/" "$SLURM_CONF" \
  >@SELF_CONF@.new
if grep -qx "SlurmctldHost=$(hostname)(127.0.0.1)" @SELF_CONF@.new; then
  sed -i "/^SlurmctldHost=/{/^SlurmctldHost=$(hostname)(127.0.0.1)\$/!d}" @SELF_CONF@.new
else
  echo "slurmctld.sh: warning: no SlurmctldHost line names $(hostname); its probes go through its Service" >&2
fi
mv -f @SELF_CONF@.new @SELF_CONF@
if [ -n "${SLONK_BACKUPS:-}" ]; then
  "$(dirname "$0")/state.sh" restore-requested "$SLONK_BACKUPS" @STATE_DIR@
fi
case "$(hostname)" in
@PRIMARY_CONTROLLER@)
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
  @PRIMARY_CONTROLLER@) SLURM_CONF=@SELF_CONF@ "$(dirname "$0")/push-config.sh" & ;;
  esac
fi
if [ -n "${SLONK_AWAIT_SLURMDBD:-}" ] && [ ! -e @STATE_DIR@/assoc_mgr_state ]; then
  # First start with the namespace's own slurmdbd (kind in-cluster or cloud), which may still be starting:
  # with no associations saved to recover, slurmctld 22.05 with AccountingStorageEnforce exits when slurmdbd
  # does not answer ("slurmdbd and/or database must be up at slurmctld start time"). Wait for it, at most 3
  # minutes (inside the startup probe's 5, which also covers this wait), then start anyway (26.05 waits by
  # itself; 22.05 exits and its pod restarts it). A later start recovers the saved associations and does not
  # wait: a controller must not stay down with the database.
  deadline=$(($(date +%s) + 180))
  until timeout 20 sacctmgr -n show cluster >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || break
    echo "slurmctld.sh: waiting for slurmdbd" >&2
    sleep 10
  done
fi
exec slurmctld -D -f "$SLURM_CONF"
