#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian bookworm machine (as root) and runs them all. Each
# phase prints a banner. What it installs on the host: real Slurm (host 22.05 + a sid chroot with 26.05,
# tools/install-slurm.sh), Debian's python3-venv, shellcheck and gcc (the NVML stand-in) when missing.
# Everything Python goes into virtual environments, never into the system interpreter: ./.venv (the
# package and its test tools at the pins of constraints.txt) and checkov in its own (its pins clash with
# Pulumi's). Then ruff, mypy and pytest.
# Arguments are passed to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

export PYTHON="${PYTHON:-python3}"
phase() { printf '\n==== tools/test.sh [%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

phase "real Slurm on the host and in a sid chroot (tools/install-slurm.sh)"
bash tools/install-slurm.sh

phase "Python environment: ./.venv with slonk-infra[test] at the constraints.txt pins (tools/venv.sh)"
bash tools/venv.sh test
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"

phase "checkov in its own virtual environment"
CHECKOV_VENV="${SLONK_CHECKOV_VENV:-$HOME/.cache/slonk-infra/checkov-venv}"
if ! "$CHECKOV_VENV/bin/checkov" --version >/dev/null 2>&1; then
  rm -rf "$CHECKOV_VENV"
  "$PYTHON" -m venv "$CHECKOV_VENV"
  "$CHECKOV_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c tools/checkov-constraints.txt "checkov==3.3.30"
fi
export SLONK_CHECKOV="$CHECKOV_VENV/bin/checkov"

phase "gcc: builds the NVML stand-in (testing/nvml) the GPU tests load; iptables: the tier's Service addresses"
cc_missing=()
for p in gcc libc6-dev iptables; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || cc_missing+=("$p")
done
if [ "${#cc_missing[@]}" -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${cc_missing[@]}" >/dev/null
fi

phase "shellcheck: the pods' scripts in the package and the tools' scripts"
command -v shellcheck >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; }
find slonk_infra tools -name '*.sh' -print0 | xargs -0 shellcheck

phase "ruff check and ruff format --check"
ruff check .
ruff format --check .

phase "mypy (strict)"
mypy

phase "pytest"
python -m pytest -q "$@"

phase "done"
