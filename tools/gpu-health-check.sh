#!/usr/bin/env bash
# Runs the node health checks on a real NVIDIA GPU machine and keeps the evidence:
#   log.txt          environment facts, every run's human lines and exit code, nvidia-smi's view
#   nvidia-smi.txt   `nvidia-smi -q` at idle and under load, to compare with what NVML gave the checks
#   reports.json     the JSON report of each run, one after another
#   nvml-idle.json   every NVML answer a boot run read on the idle GPU (tests/data/nvml/ takes it)
#   nvml-busy.json   the same while a CUDA process holds memory and runs matrix products
#
# Runs: boot on the idle GPU (all checks must pass); prolog (the fast subset, timed); under load,
# interval (must pass: busy GPUs are not judged idle, and the PCIe generation is compared at load)
# and boot (gpu-idle must fail with restart-pod and name the load's pid); after the load ends,
# epilog (must pass once the process has let go).
#
# Usage: tools/gpu-health-check.sh OUTDIR [WHEELDIR]
#   WHEELDIR: wheels of the package's dependencies, for a machine without network access; they are
#   installed into a private directory, never into the system's Python.
# Needs python3 with PyTorch for the load (the CUDA images' python3 has it).
set -uo pipefail

out=${1:?usage: $0 OUTDIR [WHEELDIR]}
wheels=${2:-}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/log.txt") 2>&1
PY=${PYTHON:-python3}
work=$(mktemp -d)

HEALTH=("$PY" -m slonk_infra.health)
export PYTHONPATH="$PWD"
if [ -n "$wheels" ]; then
  "$PY" -m pip install -q --no-index --find-links "$wheels" --target "$work/site" \
    pydantic PyYAML click nvidia-ml-py || exit 1
  export PYTHONPATH="$work/site:$PWD"
  # The package itself, installed as an image installs it, to run its slonk-health entry point
  # (setuptools from WHEELDIR when there, since the build needs a newer one than some Pythons carry).
  "$PY" -m pip install -q --no-index --find-links "$wheels" --target "$work/build" setuptools
  if PYTHONPATH="$work/build" "$PY" -m pip install -q --no-index --no-deps --no-build-isolation \
    --target "$work/pkg" . && [ -x "$work/pkg/bin/slonk-health" ]; then
    export PYTHONPATH="$work/pkg:$work/site"
    HEALTH=("$work/pkg/bin/slonk-health")
  else
    echo "installing the package failed; running it from the source tree"
  fi
fi
echo "running: ${HEALTH[*]}"
export PYTHONUNBUFFERED=1

echo "== environment"
"$PY" -V
uname -r
grep PRETTY_NAME /etc/os-release
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,ecc.mode.current,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,temperature.gpu,memory.used,clocks_event_reasons.active --format=csv
"$PY" -c 'import importlib.metadata as m; print(*(f"{n} {m.version(n)}" for n in ("nvidia-ml-py", "pydantic", "click")))'
{ echo "### idle"; nvidia-smi -q; } >"$out/nvidia-smi.txt"

gpus=$(nvidia-smi -L | grep -c '^GPU ')
# Home is the root filesystem here (a mount point); on a cluster the rendered spec names the NFS home.
cat >"$work/health.json" <<EOF
{"gpu": {"count": $gpus}, "disk": {"scratchPath": "/tmp", "homePath": "/"}}
EOF

health() {
  local title=$1
  shift
  echo "== $title: slonk-health $*"
  "${HEALTH[@]}" --spec "$work/health.json" --report-file "$work/report.json" "$@" >/dev/null
  local rc=$?
  echo "exit code: $rc"
  { echo "### $title"; cat "$work/report.json"; } >>"$out/reports.json"
  return $rc
}

health "boot, idle" --mode boot --nvml-record "$out/nvml-idle.json"
start=$(date +%s%N)
health "prolog, idle" --mode prolog
echo "prolog took $((($(date +%s%N) - start) / 1000000)) ms (process start included)"

# A CUDA load: holds 4 GiB beside its operands and runs bf16 matrix products until told to stop.
"$PY" - "$work/ready" "$work/stop" <<'EOF' &
import os, sys, time
import torch
ready, stop = sys.argv[1], sys.argv[2]
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(4 * 1024**3, dtype=torch.uint8, device="cuda")
y = x @ x
torch.cuda.synchronize()
open(ready, "w").close()
started = time.time()
while not os.path.exists(stop) and time.time() - started < 120:
    for _ in range(50):
        y = x @ x
    torch.cuda.synchronize()
EOF
load=$!
for _ in $(seq 120); do [ -e "$work/ready" ] && break; sleep 0.5; done
[ -e "$work/ready" ] || echo "the CUDA load did not start"
echo "load pid: $load"
sleep 2
health "interval, under load" --mode interval
health "boot, under load (gpu-idle must fail)" --mode boot --nvml-record "$out/nvml-busy.json"
{ echo "### under load"; nvidia-smi -q -d PCIE,PERFORMANCE,TEMPERATURE,MEMORY,PIDS; } >>"$out/nvidia-smi.txt"
touch "$work/stop"
wait "$load"
health "epilog, after the load" --mode epilog
nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,memory.used --format=csv
rm -rf "$work"
