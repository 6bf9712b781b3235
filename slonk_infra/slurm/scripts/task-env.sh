#!/bin/sh
# Slurm TaskProlog: give every task the node's environment for its fabric and TPU slice. A task
# inherits the submitter's environment, not slurmd's, so NCCL's plugin settings, libfabric's and the
# TPU device plugin's variables (TPU_WORKER_ID, TPU_ACCELERATOR_TYPE, ...) would never reach it. Slurm
# sets each "export NAME=value" line this prints in the task (slurm.conf(5) TaskProlog), verbatim, so
# a path list is joined here: the node's paths first, then the task's own (this runs in the task's
# environment), each once. slurmd.sh wrote the variables; the fabric's own env script (the NCCL plugin
# release's settings) is read here, per task, because its installer may finish after slurmd starts.
set -u
file="@TASK_ENV_FILE@"
[ -r "$file" ] || exit 0
# "a:b" then "c:a" -> "a:b:c": first occurrence kept, empty entries dropped.
join_paths() {
  printf '%s:%s' "$1" "$2" | tr ':' '\n' | awk 'NF && !seen[$0]++' | paste -sd: -
}
script=""
while IFS= read -r line; do
  case "$line" in
    "#script "*) script="${line#"#script "}" ;;
    export\ *=* | prepend\ *=*)
      kind="${line%% *}"
      assignment="${line#* }"
      name="${assignment%%=*}"
      value="${assignment#*=}"
      if [ "$kind" = prepend ]; then
        value="$(join_paths "$value" "$(printenv "$name" || true)")"
      fi
      # Also here, so the fabric's env script below builds on what the task will have.
      export "$name=$value"
      printf 'export %s=%s\n' "$name" "$value"
      ;;
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
