#!/usr/bin/env bash
# The container tier: builds the image (images/Dockerfile + images/install.sh on a debootstrap'd Debian
# base), runs the rendered pods of the local, GPU (GKE, EKS) and TPU declarations as podman pods on their
# cloud's node profile and drives the
# scenarios of docs/containers.md. Prints one line per scenario and `e2e: N passed, N failed`.
# Run as root on Debian bookworm; installs what it needs. Arguments go to `python3 -m testing.e2e`
# (e.g. --declaration local --only 3). The base root filesystem is cached in ~/.cache/slonk-infra/e2e.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "e2e: ERROR: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (podman networks, privileged worker pods)"

# netavark: the pod network (made without its DNS server, aardvark-dns, which is not installed: the
# harness serves the cluster's DNS itself, testing/e2e/dns.py); iptables: netavark's bridge rules;
# catatonit: podman's pod pause process; runc: crun fails on this kind of machine (see
# docs/containers.md); gcc: the NVML stand-in the GPU nodes load (testing/nvml).
PKGS=(podman buildah runc iptables catatonit uidmap netavark debootstrap gcc libc6-dev)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "e2e: installing ${missing[*]}" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The harness runs in the project's virtual environment with the test tools (tools/venv.sh test: ./.venv
# at the pinned versions; dnslib serves the cluster DNS; reused when tools/test.sh made it already).
bash tools/venv.sh test >/dev/null
# The harness removes what it created on SIGTERM; the limit keeps a hung run from holding CI. A whole run
# (five declarations, accounting in two of them) took about 33 minutes on a 2-vCPU machine: 50 leaves room.
exec timeout --signal=TERM --kill-after=120 "${SLONK_E2E_TIMEOUT:-3000}" "${SLONK_VENV:-.venv}/bin/python" -m testing.e2e "$@"
