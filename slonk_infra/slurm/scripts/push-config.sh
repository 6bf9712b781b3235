#!/bin/sh
# Before Slurm 23.11 (reconfig_on_restart came in 25.11, and from 23.11 a reconfigure pushes to no idle
# node): gives every running configless slurmd the files the restarted controller now serves.
# slurmctld.sh runs it in the background on the primary only, where a config change restarts slurmctld;
# a backup's request would reach the old primary, which has the new files mounted but not loaded (22.05
# exits on a node count changed by reconfigure).
#
#   push-config.sh [SETTLE_SECONDS]
#
# 1. Waits until this host's slurmctld answers as the primary (in control), up to ten minutes.
# 2. Brings back the workers a restart left FUTURE. 22.05 returns every idle node that registered from
#    FUTURE to FUTURE when slurmctld restarts (src/slurmctld/node_mgr.c, load_all_node_state keeps the
#    state of dynamic future nodes only), contacts none of them, and refuses jobs that need them
#    ("Requested node configuration is not available") until each worker's rejoin loop (every 30 s)
#    registers it again. Each FUTURE node whose name resolves (its pod exists) and whose slurmd accepts
#    a connection is resumed at once: RESUME on a FUTURE node makes it IDLE and asks its slurmd to
#    register (update_node, _require_node_reg); it takes jobs once its slurmd has answered. A resumed
#    node whose slurmd then does not answer is marked down after SlurmdTimeout, as any other (its rejoin
#    loop no longer finds it missing); the loop still brings back every node not resumed here.
# 3. Waits until the node records have settled: the nodes sinfo lists stay the same for SETTLE_SECONDS
#    (default 45; five minutes at most).
# 4. Pushes nothing while any slurmd runs another release than this image's: files rendered for a newer
#    Slurm can hold keys an older slurmd refuses to start on (22.05 and PrologFlags=ForceRequeueOnFail);
#    those workers take the files when their pods are replaced for the upgrade.
# 5. `scontrol reconfigure`, tried three times (22.05 answers "in progress" to a second one).
# Its lines go to the controller's log, prefixed "slonk push-config:".
set -u
settle="${1:-45}"
host="$(hostname)"
say() { echo "slonk push-config: $*"; }
now() { date +%s; }

mine="$(slurmctld -V 2>/dev/null | awk '{print $2}' | cut -d. -f1-2)"
if [ -z "$mine" ]; then
  say "slurmctld -V printed no version; not pushing"
  exit 0
fi

deadline=$(($(now) + 600))
until scontrol ping 2>/dev/null | grep -q "(primary) at $host is UP"; do
  if [ "$(now)" -ge "$deadline" ]; then
    say "slurmctld at $host did not answer as the primary within 600 s; not pushing"
    exit 0
  fi
  sleep 2
done

# Step 2. Left alone: a FUTURE node with a reason (drain.sh's "pod terminating" on a pod going away; a
# drain by a person or the health check, whose DRAIN flag the restart dropped) and a node of a running
# job. Probes run 16 at a time, 5 s at most each (the name's lookup included), 120 s at most in all;
# each leaves one "Zero Bytes were transmitted" error line in the probed slurmd's log. The nodes are
# resumed 256 per call (one argument of a few KB; thousands would pass the kernel's 128 KiB limit). A
# node that registered meanwhile makes its call answer "Invalid node state transition" while the
# others of the call are resumed: reported, not retried.
port="$(scontrol show config 2>/dev/null | awk '$1 == "SlurmdPort" {print $3}')"
busy="$(squeue -h -t R,CG -o %N 2>/dev/null | grep -v '^$' | xargs -r -n 1 scontrol show hostnames 2>/dev/null | sort -u)"
future="$(scontrol --future show nodes -o 2>/dev/null | awk '/ State=FUTURE[ +]/ && !/ Reason=/ {sub(/^NodeName=/, "", $1); print $1}' | sort -u)"
if [ -n "$busy" ] && [ -n "$future" ]; then
  future="$(printf '%s\n' "$future" | grep -vxF "$busy" || true)"
fi
alive=""
if [ -n "$future" ]; then
  # shellcheck disable=SC2016  # expanded by the sh -c of each probe, not here
  probe='a="$({ getent ahostsv4 "$1" || getent hosts "$1"; } | awk "{print \$1; exit}")" && [ -n "$a" ] && timeout 2 bash -c "exec 3<>/dev/tcp/$a/$0" 2>/dev/null && echo "$1"'
  alive="$(printf '%s\n' "$future" | timeout 120 xargs -r -P 16 -I{} timeout 5 sh -c "$probe" "${port:-6818}" {} | sort)"
fi
if [ -n "$alive" ]; then
  count="$(printf '%s\n' "$alive" | wc -l)"
  # shellcheck disable=SC2016  # expanded by the sh -c of each call
  out="$(printf '%s\n' "$alive" | xargs -n 256 sh -c 'scontrol update NodeName="$(echo "$@" | tr " " ",")" State=RESUME' _ 2>&1)"
  shown="$(printf '%s\n' "$alive" | head -n 32 | paste -sd, -)"
  [ "$count" -gt 32 ] && shown="$shown,..."
  say "resume: $count FUTURE nodes whose slurmd answers: $shown${out:+ ($(printf '%s' "$out" | tr '\n' ' '))}"
else
  say "resume: no FUTURE node whose slurmd answers"
fi

# The settling gets its own five minutes from the moment this controller answers.
deadline=$(($(now) + 300))
last="" since=$(now)
while :; do
  if nodes="$(sinfo -h -N -o %N 2>/dev/null)" && [ -n "$nodes" ]; then  # a failed or empty answer proves nothing
    nodes="$(printf '%s\n' "$nodes" | sort -u | tr '\n' ' ')"
    if [ "$nodes" != "$last" ]; then
      last="$nodes" since=$(now)
    elif [ $(($(now) - since)) -ge "$settle" ]; then
      break
    fi
  fi
  if [ "$(now)" -ge "$deadline" ]; then
    say "node records still changing after 300 s; pushing anyway"
    break
  fi
  sleep 5
done

others="$(sinfo -h -N -o '%N %v' 2>/dev/null | awk -v v="$mine" '$2 ~ /^[0-9]+[.][0-9]+/ {split($2, p, "."); if (p[1] "." p[2] != v) print $1 "=" $2}' | sort -u | tr '\n' ' ')"
if [ -n "$others" ]; then
  say "not pushing: slurmd of another release than $mine on ${others% }; they take the files when replaced"
  exit 0
fi

for try in 1 2 3; do
  if out="$(scontrol reconfigure 2>&1)"; then
    say "reconfigure accepted (try $try); $(printf '%s' "$last" | wc -w) nodes listed"
    exit 0
  fi
  say "scontrol reconfigure: $out"
  if [ "$try" -lt 3 ]; then sleep 10; fi
done
say "not pushed after 3 tries"
