#!/bin/sh
# Worker entrypoint. slurmd fetches its config from slurmctld (configless) and registers; its node
# record, kept in FUTURE until now, becomes IDLE. A failing health check keeps the node out.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
here="$(dirname "$0")"
sh "$here/healthcheck.sh"
slurmd -D --conf-server "${SLONK_CONTROLLER}:@SLURMCTLD_PORT@" -N "$(hostname)" &
pid=$!
trap 'kill -TERM "$pid"' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  sleep 30 & wait $! || true
  if [ "$(sh "$here/rejoin.sh" 2>/dev/null)" = "rejoin" ]; then kill -HUP "$pid"; fi
done
wait "$pid"
