#!/bin/sh
# Slurm TaskProlog: give every task the node's environment for its fabric and TPU slice. A task
# inherits the submitter's environment, not slurmd's, so NCCL's plugin settings, libfabric's and
# TPU_WORKER_ID / TPU_WORKER_HOSTNAMES would never reach it. Slurm sets each "export NAME=value"
# line this prints in the task. slurmd.sh wrote the variables; the fabric's own env script (the NCCL
# plugin release's settings) is read here, per task, because its installer may finish after slurmd
# starts.
set -u
file="@TASK_ENV_FILE@"
[ -r "$file" ] || exit 0
script=""
while IFS= read -r line; do
  case "$line" in
    "#script "*) script="${line#"#script "}" ;;
    export\ *) printf '%s\n' "$line" ;;
  esac
done < "$file"
if [ -n "$script" ] && [ -r "$script" ]; then
  before="$(mktemp)"
  after="$(mktemp)"
  env | sort > "$before"
  # shellcheck disable=SC1090 # the fabric's script, its path from the catalog
  (. "$script" > /dev/null 2>&1; env | sort) > "$after"
  comm -13 "$before" "$after" | grep -E '^[A-Za-z_][A-Za-z0-9_]*=' | sed 's/^/export /'
  rm -f "$before" "$after"
fi
exit 0
