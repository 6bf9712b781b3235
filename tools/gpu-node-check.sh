#!/usr/bin/env bash
# The production health check as a GKE GPU node runs it, on a real NVIDIA GPU machine: the rendered
# healthcheck.sh / prolog.sh / epilog.sh, under slurmd's bare environment (env -i: no PATH, no
# LD_LIBRARY_PATH), with the driver's libraries only under /usr/local/nvidia/lib64 (where GKE's device
# plugin mounts them, outside the linker cache) and /home a mount, as on a worker.
#
# Usage: tools/gpu-node-check.sh OUTDIR RENDERDIR WHEELDIR
#   RENDERDIR  a render of a declaration with a 1-GPU worker group (`slonk-infra render
#              testing/e2e/Pulumi.gpu-shaped.yaml --out RENDERDIR`: its `l4` group has one GPU per node);
#              its slurm/scripts folder is what the ConfigMap slurm-scripts holds on the node.
#   WHEELDIR   the package's wheel and its pod-side dependencies, for a machine without network access.
# Needs root (a private mount namespace), unshare(1), python3 (with PyTorch, for the load).
#
# What it shows, each with its exit code in OUTDIR/log.txt:
#   1. control: a bare environment does not find libnvidia-ml.so.1 (so the steps below can fail);
#   2. healthcheck.sh (interval), prolog.sh and epilog.sh, as slurmd starts them, pass on the idle GPU
#      and publish the verdict in the node's Comment (scontrol is a stand-in that records its calls;
#      there is no slurmctld here); the prolog is timed five times;
#   3. under a CUDA load holding GPU memory, the prolog fails and drains the node with a
#      "slonk-health:" reason naming the process (a leftover of another job at job start);
#   4. slurmd.sh's linker-cache step: after it, a bare environment finds the driver by itself.
set -uo pipefail

out=${1:?usage: $0 OUTDIR RENDERDIR WHEELDIR}
render=${2:?usage: $0 OUTDIR RENDERDIR WHEELDIR}
wheels=${3:?usage: $0 OUTDIR RENDERDIR WHEELDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
render=$(cd "$render" && pwd)
wheels=$(cd "$wheels" && pwd)
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
DRIVER=/usr/local/nvidia/lib64
NODE=${NODE:-l4-0}

echo "== environment"
"$PY" -V
uname -r
grep PRETTY_NAME /etc/os-release
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "libnvidia-ml in the linker cache:"
ldconfig -p | grep 'libnvidia-ml\.so' || echo "  (none)"
echo "libnvidia-ml files:"
found=$(find /usr /lib /opt -name 'libnvidia-ml.so*' 2>/dev/null | sort)
echo "$found"
grep -q '' <<<"$found" || { echo "no libnvidia-ml here"; exit 1; }

# The pod's venv, as images/install.sh makes it (pip bootstrapped from its own wheel: no network).
echo "== install slonk-health into /opt/slonk/venv"
rm -rf /opt/slonk/venv
"$PY" -m venv --without-pip /opt/slonk/venv || exit 1
pipwhl=$(ls "$wheels"/pip-*.whl)
/opt/slonk/venv/bin/python "$pipwhl/pip" install -q --no-index --no-cache-dir --find-links "$wheels" \
  pydantic PyYAML click nvidia-ml-py || exit 1
/opt/slonk/venv/bin/python "$pipwhl/pip" install -q --no-index --no-cache-dir --no-deps "$wheels"/slonk_infra-*.whl || exit 1
ln -sf /opt/slonk/venv/bin/slonk-health /usr/local/bin/slonk-health

# scontrol stand-in: a node that is up, and a record of every update the check asks for.
cat >/usr/local/bin/scontrol <<'EOF'
#!/bin/sh
echo "scontrol $*" >> /run/slonk-scontrol.log
case "$1" in
  show) printf 'NodeName=%s State=IDLE\n   Reason=\n' "$3" ;;
esac
EOF
chmod +x /usr/local/bin/scontrol
: >/run/slonk-scontrol.log

scripts=$(mktemp -d)
cp "$render"/slurm/scripts/{healthcheck.sh,prolog.sh,epilog.sh,slurmd.sh,health.json,health-groups.txt} "$scripts/"
echo "worker group of $NODE: $(awk -v g="${NODE%-*}" '$1 == g' "$scripts/health-groups.txt")"

# The checks run in a private mount namespace: /home a tmpfs mount (the NFS home on a node), and the
# linker configuration of a node whose driver is under $DRIVER alone.
cat >"$scripts/node.sh" <<'EOF'
set -u
scripts=$1 out=$2 DRIVER=$3 NODE=$4 PY=$5
mount -t tmpfs tmpfs /home
# The linker cache as a node's: made from an empty ld.so.conf.d (no folder of the driver's in it).
mkdir -p /tmp/slonk-ld.so.conf.d
printf 'include /etc/ld.so.conf.d/*.conf\n' >/tmp/slonk-ld.so.conf
mount --bind /tmp/slonk-ld.so.conf.d /etc/ld.so.conf.d
mount --bind /tmp/slonk-ld.so.conf /etc/ld.so.conf
ldconfig
ls -l "$DRIVER"/libnvidia-ml*
bare() { env -i SLURMD_NODENAME="$NODE" "$@"; }
nvml_probe='import pynvml; pynvml.nvmlInit(); print("NVML found:", pynvml.nvmlDeviceGetCount(), "GPU(s)")'
rc_all=0
expect() {  # expect 0|fail TITLE CMD...: run CMD, print its exit code, compare
  want=$1 title=$2; shift 2
  echo "== $title"
  start=$(date +%s%N)
  "$@"; rc=$?
  echo "exit code: $rc ($((($(date +%s%N) - start) / 1000000)) ms)"
  if { [ "$want" = 0 ] && [ $rc -ne 0 ]; } || { [ "$want" = fail ] && [ $rc -eq 0 ]; }; then
    echo "UNEXPECTED (wanted $want)"; rc_all=1
  fi
}
expect fail "1. control: a bare environment finds no NVML" bare /opt/slonk/venv/bin/python3 -c "$nvml_probe"
expect 0 "2a. healthcheck.sh (interval) as slurmd runs it" bare sh "$scripts/healthcheck.sh"
cp /tmp/slonk-health-interval.json "$out/report-interval.json"
expect 0 "2b. prolog.sh as slurmd runs it" bare SLURM_JOB_ID=101 SLURM_JOB_UID=0 SLURM_JOB_GPUS=0 sh "$scripts/prolog.sh"
for i in 1 2 3 4 5; do
  expect 0 "2c. prolog.sh, timing run $i" bare SLURM_JOB_ID=10$i SLURM_JOB_UID=0 SLURM_JOB_GPUS=0 sh "$scripts/prolog.sh"
done
cp /tmp/slonk-health-prolog.json "$out/report-prolog.json"
expect 0 "2d. epilog.sh as slurmd runs it" bare SLURM_JOB_ID=101 SLURM_JOB_UID=0 SLURM_JOB_GPUS=0 sh "$scripts/epilog.sh"
echo "scontrol calls so far:"; cat /run/slonk-scontrol.log; : >/run/slonk-scontrol.log

# 3. A CUDA process holding 4 GiB while the next job's prolog runs.
# The job's container names the driver in its environment, as GKE's GPU containers do.
LD_LIBRARY_PATH="$DRIVER${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$PY" - /tmp/slonk-load-ready /tmp/slonk-load-stop <<'PYEOF' &
import os, sys, time
import torch
ready, stop = sys.argv[1], sys.argv[2]
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(4 * 1024**3, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
open(ready, "w").close()
started = time.time()
while not os.path.exists(stop) and time.time() - started < 90:
    y = x @ x
    torch.cuda.synchronize()
    time.sleep(0.05)
PYEOF
load=$!
for _ in $(seq 120); do [ -e /tmp/slonk-load-ready ] && break; sleep 0.5; done
echo "load pid: $load"
expect fail "3. prolog.sh with another process on the GPU (must fail and drain)" \
  bare SLURM_JOB_ID=201 SLURM_JOB_UID=0 SLURM_JOB_GPUS=0 sh "$scripts/prolog.sh"
cp /tmp/slonk-health-prolog.json "$out/report-prolog-busy.json"
echo "scontrol calls:"; cat /run/slonk-scontrol.log
grep -q "state=drain reason=slonk-health:" /run/slonk-scontrol.log || { echo "UNEXPECTED: no drain"; rc_all=1; }
touch /tmp/slonk-load-stop
wait "$load"

# 4. slurmd.sh's step: the driver's folders into the linker cache (its lines, run as they are rendered).
echo "== 4. slurmd.sh's linker-cache lines"
sed -n '/^driver_dirs=""/,/^fi$/p' "$scripts/slurmd.sh" | tee /tmp/slonk-ldconfig.sh
sh /tmp/slonk-ldconfig.sh
expect 0 "4. a bare environment finds NVML after the linker-cache step" \
  bare /opt/slonk/venv/bin/python3 -c "$nvml_probe"
exit $rc_all
EOF

# A node has the driver under $DRIVER alone: every other copy of libnvidia-ml (a machine's own install,
# links to it, CUDA's stub) is moved aside for the run and put back, with the linker cache, on exit.
hidden=/var/tmp/slonk-hidden-nvml
mkdir -p "$hidden"
: >"$hidden/list"
# shellcheck disable=SC2317  # called by the EXIT trap
restore() {
  while read -r path; do mv -f "$hidden/$(echo "$path" | tr / _)" "$path"; done <"$hidden/list"
  ldconfig
}
trap restore EXIT
find /usr /lib /opt -name 'libnvidia-ml.so*' ! -path "$DRIVER/*" \( -type f -o -type l \) 2>/dev/null |
  while read -r path; do
    mv "$path" "$hidden/$(echo "$path" | tr / _)" && echo "$path" >>"$hidden/list"
  done
echo "moved aside for the run: $(tr '\n' ' ' <"$hidden/list")"
[ -e "$DRIVER/libnvidia-ml.so.1" ] || { echo "no libnvidia-ml.so.1 under $DRIVER"; exit 1; }

echo "== in a private mount namespace"
unshare -m --propagation private bash "$scripts/node.sh" "$scripts" "$out" "$DRIVER" "$NODE" "$PY"
rc=$?
echo "node checks: exit code $rc"
rm -rf "$scripts"
exit $rc
