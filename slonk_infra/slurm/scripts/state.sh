#!/bin/sh
# The controller state's directories, archives and restore (docs/node-lifecycle.md, "The controller").
#   state.sh prepare DIR...             make each directory slurm's own, mode 0700 (controller init container)
#   state.sh backup SRC DEST KEEP       archive SRC into DEST as state-<UTC time>.tar.gz, keep the newest KEEP
#   state.sh request-restore DEST NAME  ask the primary controller to restore DEST/NAME (or "latest") when
#                                        it next starts; run it, then restart every controller pod
#   state.sh restore-requested DEST DIR what slurmctld.sh runs before the daemon: the primary restores a
#                                        requested archive into DIR, a backup waits until it has
#   state.sh await-state DEST DIR       wait while DIR has no state but DEST has archives (a lost volume),
#                                        until a restore is requested (then restore) or DEST/start-empty exists
set -eu
slurm_uid=@SLURM_UID@
die() { echo "state.sh: $*" >&2; exit 1; }
# Archive names, newest first (their names sort by time).
archives() {
  for f in "$1"/state-*.tar.gz; do
    [ -f "$f" ] && basename "$f"
  done | sort -r
}

case "${1:-}" in
prepare)
  shift
  for dir in "$@"; do
    if ! mkdir -p "$dir" 2>/dev/null || ! chown "$slurm_uid:$slurm_uid" "$dir" 2>/dev/null; then
      # A filesystem that maps root to nobody (root_squash): the directory must be made by hand, once.
      if [ ! -d "$dir" ] || [ "$(stat -c %u "$dir")" != "$slurm_uid" ]; then
        die "cannot make $dir owned by uid $slurm_uid (a filesystem squashing root?); create it once by hand: mkdir -p $dir && chown $slurm_uid:$slurm_uid $dir && chmod 0700 $dir"
      fi
    fi
    chmod 0700 "$dir" 2>/dev/null || true
  done
  ;;
backup)
  src="$2" dest="$3" keep="$4"
  if [ ! -d "$dest" ] || [ ! -w "$dest" ]; then die "archive directory $dest is missing or not writable"; fi
  name="state-$(date -u +%Y%m%dT%H%M%SZ).tar.gz"
  start=$(date +%s)
  # Slurm replaces each state file by writing NAME.new and renaming it, so every file read here is
  # whole; the .new files are half-written ones and left out. Exit status 1 of GNU tar is "a file
  # changed while read" (slurmctld kept saving): the archive still holds a whole copy of every file.
  rc=0
  tar -C "$src" --exclude='*.new' -czf "$dest/.$name.part" . || rc=$?
  [ "$rc" -le 1 ] || { rm -f "$dest/.$name.part"; die "tar of $src failed ($rc)"; }
  mv "$dest/.$name.part" "$dest/$name"
  # Newest first; everything after the first KEEP goes.
  archives "$dest" | tail -n +"$((keep + 1))" | while read -r old; do rm -f "$dest/$old"; done
  echo "state.sh: $dest/$name $(stat -c %s "$dest/$name") bytes in $(($(date +%s) - start)) s"
  ;;
request-restore)
  dest="$2" want="$3"
  if [ "$want" = latest ]; then
    want="$(archives "$dest" | head -n 1)"
    [ -n "$want" ] || die "no archive in $dest"
  fi
  [ -f "$dest/$want" ] || die "no archive $dest/$want"
  tar -tzf "$dest/$want" >/dev/null || die "$dest/$want is not a readable archive"
  echo "$want" >"$dest/restore"
  [ "$(id -u)" != 0 ] || chown "$slurm_uid:$slurm_uid" "$dest/restore"
  echo "state.sh: $want will be restored when the primary controller starts (a primary waiting for its state" \
    "does it now); otherwise restart every controller pod (kubectl scale statefulset -l app.kubernetes.io/component=controller" \
    "--replicas=0, then --replicas=1)"
  ;;
await-state)
  # slurmctld.sh on the primary: a state directory without job or node state while archives exist is a
  # lost or newly mounted volume (a controller moved to shared storage); slurmctld would start afresh and
  # every queued and running job would be cancelled. So the controller waits, running but not ready,
  # until an operator requests a restore (kubectl exec ... state.sh request-restore DEST latest) or says
  # starting afresh is meant (touch DEST/start-empty).
  dest="$2" dir="$3" waited=0
  while ! [ -e "$dir/job_state" ] && ! [ -e "$dir/node_state" ] && ! [ -e "$dir/job_state.old" ] &&
    ! [ -f "$dest/start-empty" ] && [ -n "$(archives "$dest")" ]; do
    if [ -f "$dest/restore" ]; then
      "$0" restore-requested "$dest" "$dir"
      exit 0
    fi
    if [ $((waited % 60)) -eq 0 ]; then
      echo "state.sh: $dir holds no controller state but $dest has archives (newest: $(archives "$dest" | head -n 1));" \
        "starting would cancel every job. Waiting for: state.sh request-restore $dest latest (or NAME)," \
        "or touch $dest/start-empty to start afresh" >&2
    fi
    waited=$((waited + 2))
    sleep 2
  done
  ;;
restore-requested)
  dest="$2" dir="$3" request="$2/restore"
  [ -f "$request" ] || exit 0
  case "$(hostname)" in
  @PRIMARY_CONTROLLER@) ;;
  *)
    # A backup controller taking over mid-restore would load half the state, then save it over the
    # restored one when the primary asked for control back.
    echo "state.sh: a restore is requested; waiting for the primary controller to finish it" >&2
    while [ -f "$request" ]; do sleep 1; done
    exit 0
    ;;
  esac
  want="$(cat "$request")"
  stamp="$(date -u +%Y%m%dT%H%M%SZ)"
  work="$dest/.restore-$stamp"
  mkdir -p "$work/new" "$work/replaced"
  tar -C "$work/new" -xzf "$dest/$want" || die "cannot extract $dest/$want; the request stays in $request"
  # An archive taken between slurmctld's two renames (X -> X.old, X.new -> X) has X.old but no X, and
  # slurmctld does not fall back to X.old itself.
  for old in "$work/new"/*.old; do
    [ -e "$old" ] || continue
    [ -e "${old%.old}" ] || cp -p "$old" "${old%.old}"
  done
  # The state being replaced is kept beside the archives, never deleted.
  find "$dir" -mindepth 1 -maxdepth 1 -exec mv {} "$work/replaced/" \;
  find "$work/new" -mindepth 1 -maxdepth 1 -exec mv {} "$dir/" \;
  rmdir "$work/new"
  mv "$work/replaced" "$dest/replaced-$stamp"
  rmdir "$work"
  mv "$request" "$dest/restored-$stamp"
  echo "state.sh: restored $want into $dir; the state it replaced is in $dest/replaced-$stamp" >&2
  ;;
*)
  die "usage: state.sh prepare DIR... | backup SRC DEST KEEP | request-restore DEST NAME|latest | restore-requested DEST DIR | await-state DEST DIR"
  ;;
esac
