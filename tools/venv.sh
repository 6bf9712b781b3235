#!/usr/bin/env bash
# Makes (or updates) the project's virtual environment and installs slonk-infra into it, editable, at the
# exact versions of constraints.txt, so pip never resolves or backtracks. Never touches the system Python
# (Debian's python3 refuses that anyway: PEP 668).
#   bash tools/venv.sh            # ./.venv with the package and both clouds' SDKs (the README's quick start)
#   bash tools/venv.sh test       # ... plus the test tools (what tools/test.sh runs)
#   bash tools/venv.sh gcp        # the package with one cloud's SDK (extras: gcp, aws, all, test)
# PYTHON picks the interpreter (default: python3); SLONK_VENV the folder (default: .venv, which Pulumi.yaml
# names too). On Debian the venv module's pip bootstrap is the separate python3-venv package: as root it is
# installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${SLONK_VENV:-.venv}"
EXTRAS="${1:-all}"

make_venv() { "$PYTHON" -m venv "$VENV"; }

if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  rm -rf "$VENV"
  if ! make_venv >/dev/null 2>&1; then
    rm -rf "$VENV"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "tools/venv.sh: $PYTHON cannot make a virtual environment; installing Debian's python3-venv"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      make_venv
    else
      echo "tools/venv.sh: $PYTHON cannot make a virtual environment; install python3-venv (apt-get install python3-venv) and rerun" >&2
      exit 1
    fi
  fi
fi

echo "tools/venv.sh: installing slonk-infra${EXTRAS:+[$EXTRAS]} into $VENV at the versions pinned in constraints.txt"
# A first install fetches hundreds of MiB for a minute or more: one line per package fetched shows it
# moving. pip's whole output is kept and shown only if it fails.
log="$(mktemp)"
start=$SECONDS
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -c constraints.txt \
  -e ".${EXTRAS:+[$EXTRAS]}" 2>&1 | tee "$log" |
  awk '/^(Collecting|Processing) /{n++; name = $2; sub(".*/", "", name); printf "tools/venv.sh:   %3d %s\n", n, name; fflush()}'; then
  cat "$log" >&2
  rm -f "$log"
  echo "tools/venv.sh: pip failed (its output above)" >&2
  exit 1
fi
rm -f "$log"
echo "tools/venv.sh: ready in $((SECONDS - start)) s"
