#!/usr/bin/env bash
# Installs the two Slurm flavors used by testing/slurmlab:
#   host:   Debian bookworm's slurm-wlm (22.05) + munge, from the host's apt sources
#   chroot: a Debian sid chroot (Slurm 26.05+) made with debootstrap
# Idempotent: an existing chroot whose slurmctld runs is reused.
# Run as root on Debian bookworm. Exits non-zero if anything is missing.
set -euo pipefail

CHROOT="${SLONK_SLURM_CHROOT:-$HOME/.cache/slonk-infra/slurm-sid}"
SUITE="${SLONK_SLURM_SUITE:-sid}"

die() { echo "install-slurm: ERROR: $*" >&2; exit 1; }
log() { echo "install-slurm: $*" >&2; }

[ "$(id -u)" -eq 0 ] || die "must run as root"

export DEBIAN_FRONTEND=noninteractive

# slurm-wlm-jwt-plugin carries auth_jwt.so: rendered configs may set
# AuthAltTypes=auth/jwt, which slurmctld cannot load without it.
# iproute2 provides `ip`, used to give the chroot flavor's private network an address.
# slurmrestd: the operations controller's tests talk to real slurmrestd (testing/slurmlab/restd.py).
# mariadb-server, mariadb-client, slurmdbd: the accounting tests start a private MariaDB and slurmdbd
# (testing/slurmlab/dbd.py); slurmdbd carries accounting_storage_mysql.so. Their services are never
# started (policy-rc.d below); the tests start their own daemons by PID.
HOST_PKGS=(slurm-wlm slurm-wlm-jwt-plugin munge debootstrap iproute2 slurmrestd mariadb-server mariadb-client slurmdbd)
CHROOT_PKGS=(slurmctld slurmd slurm-client slurm-wlm-jwt-plugin munge slurmrestd)

host_missing() {
    local c
    for c in slurmctld slurmd sinfo scontrol munged munge debootstrap slurmrestd \
        slurmdbd sacctmgr sacct mariadbd mariadb-install-db mariadb setpriv; do
        command -v "$c" >/dev/null 2>&1 || { echo "$c"; return 0; }
    done
    for c in "${HOST_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$c" 2>/dev/null | grep -q "ok installed" \
            || { echo "package $c"; return 0; }
    done
    return 1
}

if host_missing >/dev/null; then
    log "installing host packages (${HOST_PKGS[*]})"
    # Without systemd, maintainer scripts start services through invoke-rc.d, which asks policy-rc.d:
    # exit 101 forbids it (invoke-rc.d(8)). Docker's Debian images ship one; a host without one gets it
    # while this script runs, so no mariadb or slurmdbd service is ever started.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get update
    apt-get install -y --no-install-recommends "${HOST_PKGS[@]}"
fi
if missing="$(host_missing)"; then
    die "host command still missing after install: $missing"
fi

# Runs a command inside the chroot in throwaway mount/pid namespaces, so
# /proc and /dev mounts needed by apt and dpkg never leak into the host.
# The inner script is single-quoted on purpose: it expands its own arguments.
in_chroot() {
    # shellcheck disable=SC2016
    unshare --mount --pid --fork --kill-child -- /bin/sh -c '
        set -e
        root="$1"; shift
        mount --make-rprivate /
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/run"
        mkdir -p "$root/run/lock"
        exec chroot "$root" /usr/bin/env -i \
            PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
            DEBIAN_FRONTEND=noninteractive "$@"
    ' in_chroot "$CHROOT" "$@"
}

chroot_ok() {
    [ -x "$CHROOT/usr/sbin/slurmctld" ] && [ -x "$CHROOT/usr/sbin/slurmd" ] \
        && [ -x "$CHROOT/usr/bin/sinfo" ] && [ -x "$CHROOT/usr/sbin/munged" ] \
        && [ -x "$CHROOT/usr/sbin/slurmrestd" ] \
        && compgen -G "$CHROOT/usr/lib/*/slurm-wlm/auth_jwt.so" >/dev/null \
        && in_chroot slurmctld -V >/dev/null 2>&1
}

if chroot_ok; then
    log "reusing chroot $CHROOT"
else
    if [ ! -x "$CHROOT/bin/sh" ] || [ ! -f "$CHROOT/etc/debian_version" ]; then
        # A half-built directory from an interrupted run confuses debootstrap.
        if [ -e "$CHROOT" ]; then
            grep -q " $(realpath "$CHROOT")/" /proc/self/mountinfo \
                && die "mounts found under $CHROOT; refusing to delete it"
            log "removing incomplete chroot $CHROOT"
            rm -rf --one-file-system "$CHROOT"
        fi
        mkdir -p "$(dirname "$CHROOT")"
        log "debootstrap --variant=minbase $SUITE $CHROOT (default mirror)"
        debootstrap --variant=minbase "$SUITE" "$CHROOT" \
            || die "debootstrap failed (see $CHROOT/debootstrap/debootstrap.log)"
    fi
    # The package source may be a frozen snapshot whose Release file has
    # passed its Valid-Until date; apt refuses such files by default.
    mkdir -p "$CHROOT/etc/apt/apt.conf.d"
    echo 'Acquire::Check-Valid-Until "false";' > "$CHROOT/etc/apt/apt.conf.d/99slonk-no-valid-until"
    # Keep package maintainer scripts from starting daemons inside the chroot.
    printf '#!/bin/sh\nexit 101\n' > "$CHROOT/usr/sbin/policy-rc.d"
    chmod 755 "$CHROOT/usr/sbin/policy-rc.d"
    log "installing ${CHROOT_PKGS[*]} in the chroot"
    in_chroot apt-get update
    in_chroot apt-get install -y --no-install-recommends "${CHROOT_PKGS[@]}"
    in_chroot apt-get clean
    chroot_ok || die "slurmctld -V does not run inside $CHROOT"
fi

leak="$(grep -c " $(realpath "$CHROOT")/" /proc/self/mountinfo || true)"
[ "$leak" = "0" ] || die "$leak mount(s) under $CHROOT leaked into the host"

host_ver="$(slurmctld -V)" || die "host slurmctld -V failed"
chroot_ver="$(in_chroot slurmctld -V)" || die "chroot slurmctld -V failed"
munge_host="$(munged -V 2>&1 | head -n1)"
mariadb_ver="$(mariadbd --version | head -n1)" || die "mariadbd --version failed"
echo "host:   $host_ver ($munge_host)"
echo "host:   slurmdbd with $(dpkg-query -W -f='${Version}' slurmdbd), $mariadb_ver"
echo "chroot: $chroot_ver at $CHROOT"
