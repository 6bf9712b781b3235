#!/bin/sh
# Worker entrypoint. slurmd fetches its config from slurmctld (configless) and registers; its node
# record, kept in FUTURE until now, becomes IDLE. A failing health check keeps the node out.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
here="$(dirname "$0")"
# The variables the manifests name in SLONK_TASK_ENV (fabric, TPU slice), for task-env.sh to hand to
# every task; the fabric's env script is recorded and read there.
: > "@TASK_ENV_FILE@.new"
if [ -n "${SLONK_TASK_ENV_SCRIPT:-}" ]; then
  printf '#script %s\n' "$SLONK_TASK_ENV_SCRIPT" >> "@TASK_ENV_FILE@.new"
fi
for name in $(printf '%s' "${SLONK_TASK_ENV:-}" | tr ',' ' '); do
  printf 'export %s=%s\n' "$name" "$(printenv "$name" || true)" >> "@TASK_ENV_FILE@.new"
done
chmod 644 "@TASK_ENV_FILE@.new"
mv "@TASK_ENV_FILE@.new" "@TASK_ENV_FILE@"
sh "$here/healthcheck.sh" boot
slurmd -D --conf-server "${SLONK_CONTROLLER}:@SLURMCTLD_PORT@" -N "$(hostname)" &
pid=$!
trap 'kill -TERM "$pid"' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  sleep 30 & wait $! || true
  if [ "$(sh "$here/rejoin.sh" 2>/dev/null)" = "rejoin" ]; then kill -HUP "$pid"; fi
done
wait "$pid"
