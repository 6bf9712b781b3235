#!/bin/sh
# Installs everything a Slurm pod runs onto a Debian or Ubuntu base image: Slurm at the declared
# version (with slurmdbd and its MySQL plugin), munge, sshd, the NFS client (and server, for the
# in-cluster NFS pod), MariaDB (the in-cluster accounting database), catatonit as the workers' init,
# sudo, python3 with the project's pod-side Python pieces, and the fixed users the manifests rely on.
# The production image (a CUDA base) and the test image (a plain Debian base) run this same script;
# see images/Dockerfile and docs/containers.md.
#
# Environment:
#   SLURM_VERSION  the declaration's image.slurmVersion (25.05 or 25.05.3). When the base's package
#                  registry carries that major.minor, Slurm comes from packages; otherwise it is built
#                  from SchedMD's release tarball, which then needs the full x.y.z version.
#   SLONK_SRC      a copy of the project's source (pyproject.toml + slonk_infra/); optional. When it is
#                  there, the package is installed without its deployment dependencies (Pulumi) into
#                  /opt/slonk/venv, with the pod-side libraries pinned in pyproject.toml.
set -eu

: "${SLURM_VERSION:?set SLURM_VERSION to image.slurmVersion of the declaration}"
SLONK_SRC="${SLONK_SRC:-/tmp/slonk-src}"
export DEBIAN_FRONTEND=noninteractive

log() { echo "install.sh: $*" >&2; }
die() { echo "install.sh: ERROR: $*" >&2; exit 1; }

want="$(echo "$SLURM_VERSION" | cut -d. -f1-2)"

# Fixed UIDs before any package creates these users: files on the shared filesystems, the controller's
# state volume (fsGroup 401) and the pods' securityContext (runAsUser 401) depend on them.
add_user() {  # name uid home
    getent group "$1" >/dev/null || groupadd -g "$2" "$1"
    getent passwd "$1" >/dev/null || useradd -u "$2" -g "$1" -d "$3" -M -s /usr/sbin/nologin "$1"
    [ "$(id -u "$1")" = "$2" ] || die "user $1 exists with uid $(id -u "$1"), not $2"
}
add_user munge 400 /run/munge
add_user slurm 401 /var/spool/slurmctld
add_user slurmrestd 402 /nonexistent
# MariaDB's own user, fixed before mariadb-server's postinst would make one with a free system uid: the
# database pod runs as it and its volume is handed to it (fsGroup 403).
add_user mysql 403 /nonexistent

# No package may start a daemon during the build.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d

apt-get update --error-on=any
# catatonit: PID 1 of the worker container, so slurmd is its direct child and orphaned slurmstepd
# processes are reaped. nfs-kernel-server + rpcbind: the in-cluster NFS server pod (local stacks).
# mariadb-server + mariadb-client: the in-cluster accounting database pod (mariadbd, mariadb-install-db,
# and the mariadb / mariadb-admin / mariadb-dump clients its init, probes and backups use).
apt-get install -y --no-install-recommends \
    ca-certificates munge openssh-server openssh-client nfs-common nfs-kernel-server rpcbind \
    util-linux procps iproute2 sudo catatonit python3 python3-venv libnss-extrausers \
    mariadb-server mariadb-client

candidate="$(apt-cache policy slurmctld 2>/dev/null | sed -n 's/^ *Candidate: *//p' | sed 's/^[0-9]*://')"
have="$(echo "$candidate" | cut -d. -f1-2)"
if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && [ "$have" = "$want" ]; then
    log "Slurm $want from packages ($candidate)"
    apt-get install -y --no-install-recommends \
        slurmctld slurmd slurm-client slurmrestd slurm-wlm-basic-plugins slurm-wlm-jwt-plugin slurmdbd
else
    log "the package registry has Slurm '${candidate:-none}', not $want: building $SLURM_VERSION from source"
    case "$SLURM_VERSION" in *.*.*) ;; *) die "a source build needs the full version (e.g. 25.05.3), got $SLURM_VERSION" ;; esac
    apt-get install -y --no-install-recommends \
        build-essential curl bzip2 pkg-config libmunge-dev libhwloc-dev libjson-c-dev libyaml-dev \
        libjwt-dev libpmix-dev libdbus-1-dev libhttp-parser-dev default-libmysqlclient-dev
    nvml=""
    [ -d /usr/local/cuda ] && nvml="--with-nvml=/usr/local/cuda"
    curl -fsSL "https://download.schedmd.com/slurm/slurm-${SLURM_VERSION}.tar.bz2" -o /tmp/slurm.tar.bz2
    tar -xjf /tmp/slurm.tar.bz2 -C /tmp
    (
        cd "/tmp/slurm-${SLURM_VERSION}"
        # shellcheck disable=SC2086  # $nvml is one optional flag or nothing
        ./configure --prefix=/usr --sysconfdir=/etc/slurm --with-yaml --with-jwt --with-pmix $nvml
        make -j"$(nproc)"
        make install
    )
    rm -rf /tmp/slurm*
fi
got="$(slurmctld -V | awk '{print $2}' | cut -d. -f1-2)"
[ "$got" = "$want" ] || die "slurmctld -V reports $got, the declaration says $want"
# slurmdbd keeps its records through this plugin; a source build without the MySQL headers silently
# leaves it out, and slurmdbd would then refuse StorageType=accounting_storage/mysql at start.
command -v slurmdbd >/dev/null || die "slurmdbd is not installed"
find /usr/lib /usr/lib64 -name accounting_storage_mysql.so 2>/dev/null | grep -q . ||
    die "accounting_storage_mysql.so is missing: slurmdbd cannot reach its database"
command -v mariadbd >/dev/null || die "mariadbd is not installed"

install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm /etc/slurm
install -d /var/spool/slurmd /run/slurm /opt/slonk/scripts /etc/slonk
# The database pod mounts its own volume at /var/lib/mysql and makes the system tables there at first
# start; the ones mariadb-server's postinst made in the image would only hide under that mount.
rm -rf /var/lib/mysql
install -d -o mysql -g mysql -m 0750 /var/lib/mysql /run/mysqld

# The declared users (the slurm-users Secret, mounted at /etc/slonk/users in every pod) through NSS:
# libnss-extrausers reads passwd and group from /var/lib/extrausers, which points there. Nothing is
# written into /etc at run time, so the non-root controller resolves users exactly as the login does.
rm -rf /var/lib/extrausers
ln -s /etc/slonk/users /var/lib/extrausers
sed -i -E 's/^(passwd|group):([[:space:]]+)files( |$)/\1:\2files extrausers\3/' /etc/nsswitch.conf
grep -q '^passwd:.*extrausers' /etc/nsswitch.conf || die "nsswitch.conf: could not add extrausers"
install -d /etc/slonk/users

# sshd in a pod: the login pod cannot write /proc/self/loginuid (no CAP_AUDIT_CONTROL), and a
# required pam_loginuid would end every session at login. Host keys are not baked into the image
# (every cluster would share them); the login pod gets its own from a Secret.
# A user declared after the login pod started appears through NSS at once (the users Secret is updated
# in place) and gets a home at first login: pam_mkhomedir(8) in sshd's session stack (UsePAM yes).
if [ -f /etc/pam.d/sshd ]; then
    sed -i 's/^\(session[[:space:]]\+\)required\([[:space:]]\+pam_loginuid.so\)/\1optional\2/' /etc/pam.d/sshd
    grep -q pam_mkhomedir /etc/pam.d/sshd ||
        echo "session optional pam_mkhomedir.so skel=/etc/skel umask=0077" >> /etc/pam.d/sshd
fi
rm -f /etc/ssh/ssh_host_*

# The project's pod-side Python pieces (health checks and the like), isolated from the system Python.
if [ -f "$SLONK_SRC/pyproject.toml" ]; then
    python3 -m venv /opt/slonk/venv
    # Pins come from pyproject.toml, the one place they are kept; only the libraries pods import.
    pins="$(python3 - "$SLONK_SRC/pyproject.toml" <<'EOF'
import re, sys, tomllib
pod_side = {"pydantic", "pyyaml", "click", "python-hostlist", "nvidia-ml-py", "prometheus-client", "kubernetes", "pyjwt", "msgspec", "xxhash", "urllib3",
            "google-auth", "boto3", "botocore"}
# The operations controller's cloud clients are the "ops" extra (the deployment CLI does not need them).
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
deps = project["dependencies"] + project["optional-dependencies"]["ops"]
print(" ".join(d for d in deps if re.split(r"[<>=!~ \[]", d, maxsplit=1)[0].lower() in pod_side))
EOF
)"
    # Their own dependencies at the versions the project was tested with.
    [ -f "$SLONK_SRC/constraints.txt" ] || die "constraints.txt is not staged beside pyproject.toml (images/Dockerfile says how)"
    # shellcheck disable=SC2086  # one argument per pin
    /opt/slonk/venv/bin/pip install --quiet --no-cache-dir -c "$SLONK_SRC/constraints.txt" $pins
    /opt/slonk/venv/bin/pip install --quiet --no-cache-dir --no-deps "$SLONK_SRC"
    # Only the pod-side commands go on PATH (the deployment CLI needs Pulumi, which pods do not carry):
    # slonk-health (entrypoints, prolog, health check) and slonk-ops (the operations Deployment).
    for cmd in slonk-health slonk-ops; do
        ln -sf "/opt/slonk/venv/bin/$cmd" /usr/local/bin/
    done
    rm -rf "$SLONK_SRC"
fi

apt-get clean
rm -rf /var/lib/apt/lists/*
log "done: $(slurmctld -V), $(munged -V 2>&1 | head -n1), $(ssh -V 2>&1), $(mariadbd --version)"
