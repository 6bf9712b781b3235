#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian bookworm machine (as root) and runs them all:
# real Slurm (host 22.05 + a sid chroot with 26.05), the package with its test extras, checkov in
# its own virtualenv (its pins clash with Pulumi's), then the linter, the type checker and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
bash tools/install-slurm.sh
"$PYTHON" -m pip install --quiet --upgrade pip
"$PYTHON" -m pip install --quiet -e ".[test]"

CHECKOV_VENV="${SLONK_CHECKOV_VENV:-$HOME/.cache/slonk-infra/checkov-venv}"
if ! "$CHECKOV_VENV/bin/checkov" --version >/dev/null 2>&1; then
  "$PYTHON" -m venv "$CHECKOV_VENV"
  "$CHECKOV_VENV/bin/pip" install --quiet "checkov==3.3.30"
fi
export SLONK_CHECKOV="$CHECKOV_VENV/bin/checkov"

ruff check .
ruff format --check .
mypy
"$PYTHON" -m pytest -q "$@"
