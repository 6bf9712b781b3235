#!/usr/bin/env bash
# Regenerates constraints.txt: resolves pyproject.toml's dependencies (and the test extras) once in a
# throwaway virtual environment and writes every installed distribution with its exact version.
# Run it after changing a dependency in pyproject.toml; tests/test_newcomer.py fails while the two disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]"
{
  echo "# Exact versions of everything slonk-infra and its test tools install, resolved together by tools/lock.sh."
  echo "# Installed with these as constraints by tools/venv.sh (pip -c constraints.txt). Do not edit by hand."
  "$tmp/venv/bin/python" -m pip freeze --disable-pip-version-check --exclude-editable --all \
    | grep -v -E '^(pip|setuptools|wheel)==' | LC_ALL=C sort -f
} >constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pinned distributions"
