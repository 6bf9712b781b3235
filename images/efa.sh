#!/bin/sh
# Installs the user-space half of AWS EFA into the image: libfabric (under /opt/amazon/efa) and the
# aws-ofi-nccl plugin (under /opt/amazon/ofi-nccl), so NCCL in jobs on p4d/p5/p5e/p5en/p6 nodes uses
# every EFA interface instead of falling back to TCP sockets. The kernel driver is the node's (the
# EKS accelerated AMI ships it); the pod gets the devices by requesting vpc.amazonaws.com/efa.
#
# Follows https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-installer-containers.html:
# --skip-kmod (a container cannot load kernel modules), --skip-limit-conf (ulimits belong to the
# container runtime), --no-verify (device detection uses lspci, which a build cannot see). The
# tarball's signature is checked against AWS's published key fingerprint before anything runs.
#
# Called by the image's install step when the image is meant for EFA nodes; harmless elsewhere
# (libfabric without EFA devices selects another provider). Needs curl and gpg; Debian/Ubuntu base.
#
# Environment:
#   EFA_INSTALLER_VERSION  installer release (EC2 "Elastic Fabric Adapter release notes"); 1.51.0
#                          ships libfabric 2.7.0amzn2.0 and aws-ofi-nccl 1.22.0
set -eu

EFA_INSTALLER_VERSION="${EFA_INSTALLER_VERSION:-1.51.0}"
# AWS's EFA installer signing key, as the EFA documentation states it.
EFA_KEY_FINGERPRINT="4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"
BASE="https://efa-installer.amazonaws.com"

log() { echo "efa.sh: $*" >&2; }
die() { echo "efa.sh: ERROR: $*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends ca-certificates curl gnupg

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
tarball="aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz"
curl -fsSLO "$BASE/aws-efa-installer.key"
curl -fsSLO "$BASE/$tarball"
curl -fsSLO "$BASE/$tarball.sig"

export GNUPGHOME="$work/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --import aws-efa-installer.key
got="$(gpg --batch --with-colons --fingerprint | awk -F: '$1 == "fpr" {print $10; exit}')"
[ "$got" = "$EFA_KEY_FINGERPRINT" ] || die "installer key fingerprint is $got, expected $EFA_KEY_FINGERPRINT"
gpg --batch --verify "$tarball.sig" "$tarball" || die "signature of $tarball does not verify"

tar -xf "$tarball"
cd aws-efa-installer
./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify

# The worker pod's environment (fabrics.yaml efa.workload) puts these on LD_LIBRARY_PATH; fail the
# build if the installer laid them out differently.
[ -e /opt/amazon/efa/lib/libfabric.so ] || die "libfabric not found under /opt/amazon/efa/lib"
plugin="$(find /opt/amazon/ofi-nccl -name 'libnccl-net*.so' 2>/dev/null | head -n 1)"
[ -n "$plugin" ] || die "aws-ofi-nccl plugin not found under /opt/amazon/ofi-nccl"
log "installed EFA installer $EFA_INSTALLER_VERSION: $(basename "$plugin") in $(dirname "$plugin")"
