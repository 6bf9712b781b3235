"""Job accounting in the namespace: slurmdbd, the reconciler beside it and, for ``kind: in-cluster``, its MariaDB.

``slurm.accounting.database.kind``:

- ``in-cluster``: a MariaDB StatefulSet (one replica, its volume from a claim template, kept when the
  StatefulSet goes), its headless Service and a NetworkPolicy admitting MySQL's port from the slurmdbd pod
  only; slurmdbd logs in with the generated password (:attr:`KubeInputs.database_password`).
- ``cloud``: no database objects; slurmdbd logs in to the cloud's managed MySQL
  (:attr:`KubeInputs.cloud_database`, handed over by the cloud layer).
- ``external``: nothing here; slurm.conf names the existing slurmdbd.

For both of the first two: the ``slurmdbd`` Deployment (one replica, ``Recreate``: two slurmdbd on one
database must never run, so the old pod is gone before the new one starts), the ``slurmdbd`` Service
slurm.conf's AccountingStorageHost names (:func:`slonk_infra.slurm.conf.slurmdbd_host`), slurmdbd.conf in a
Secret without the password, the connection (host, port, user, database, password) in the
``slurmdbd-database`` Secret, and the reconciler's desired state in the ``slurm-accounting`` ConfigMap.

The password is in the ``slurmdbd-database`` Secret only. slurmdbd.conf must hold it, so an init container
joins it in at start (:data:`SLURMDBD_CONF_SH`) into an in-memory emptyDir file, mode 0600 and owned by
SlurmUser, which every release accepts (``read_slurmdbd_conf`` in Slurm's src/slurmdbd/read_config.c; measured
with the real daemons): 22.05 is fatal on any mode but exactly 0600 ("slurmdbd.conf file %s should be 600 is
%o accessible for group or others", 0400 included) and on an owner other than SlurmUser; 26.05 on a mode other
than 0600 or 0640 and an owner other than SlurmUser or root.

The pods' scripts are shell, in the ``slurm-accounting-scripts`` ConfigMap rather than in the image: they
change with this module, not with the image, like the other pods' scripts (``slurm-scripts``).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from slonk_infra import vocab
from slonk_infra.accounting.desired import desired_state
from slonk_infra.accounting.wire import dump_state
from slonk_infra.declaration.accounting import DATABASE_SERVER_MIB, DEFAULT_DATABASE_MEMORY_MIB, AccountingSpec
from slonk_infra.kube.inputs import DatabaseConnection, KubeInputs
from slonk_infra.kube.pod import (
    Obj,
    common_mounts,
    common_volumes,
    config_mount,
    config_volume,
    meta,
    restricted,
    slurm_pod_spec,
)
from slonk_infra.plan import ClusterPlan

DB_COMPONENT = vocab.ACCOUNTING_DATABASE_COMPONENT
DBD_COMPONENT = vocab.SLURMDBD_COMPONENT

# Where the pods mount what this module renders.
SCRIPTS_DIR = "/opt/slonk/accounting"
DATABASE_SECRET_DIR = "/etc/slonk/database"  # the slurmdbd-database Secret, one file per key
CONF_SECRET_DIR = "/etc/slonk/slurmdbd-conf"  # slurmdbd.conf without the password
SLURMDBD_RUN_DIR = "/run/slurmdbd"  # in memory: the assembled slurmdbd.conf and slurmdbd's pid file
SLURMDBD_CONF = "slurmdbd.conf"
MY_CNF = "my.cnf"
MARIADB_DATADIR = f"{vocab.MARIADB_VOLUME_DIR}/data"
MARIADB_SOCKET = f"{vocab.MARIADB_SOCKET_DIR}/mysqld.sock"

# mysqld settings for slurmdbd. Slurm's accounting guide (https://slurm.schedmd.com/accounting.html, "Slurm
# Accounting Configuration Before Build") recommends raising the first three; slurmdbd itself checks them at
# start and logs "Database settings not recommended values: <names>" when one is below half its
# recommendation (_check_database_variables in src/plugins/accounting_storage/mysql/accounting_storage_mysql.c;
# 22.05 recommends 1 GiB of buffer pool, 64 MiB of log file, 900 s of lock wait). slurmdbd 26.05 still
# names innodb_buffer_pool_size at 1024M and is content at 2048M (measured against MariaDB 11.8), so 2048M.
# The buffer pool is most of the database's memory: the container's memory is sized around it.
# The buffer pool's size comes from the declaration (database.memoryMib; 2048M by default).
MYSQLD_SETTINGS: tuple[tuple[str, str], ...] = (
    ("innodb_log_file_size", "64M"),
    ("innodb_lock_wait_timeout", "900"),
    # Slurm's guide also raises max_allowed_packet (large job scripts and environments are stored).
    ("max_allowed_packet", "16M"),
    # MariaDB 11.6.2 turned snapshot isolation on by default; slurmdbd 26.05 logs "innodb_snapshot_isolation is
    # enabled, which is not supported by Slurm and will cause slurmdbd to fatal when a write conflicts" (measured).
    # loose-: MariaDB 10.11 (bookworm) has no such variable and ignores the line instead of refusing to start.
    ("loose-innodb_snapshot_isolation", "OFF"),
)

# kind cloud rendered without the cloud layer's database.
CLOUD_PLACEHOLDER = DatabaseConnection(host="<known after deploy: the cloud database's address>")

# The Secret's keys (files under DATABASE_SECRET_DIR).
CONNECTION_KEYS = ("host", "port", "user", "database", "password")


def my_cnf(
    datadir: str = MARIADB_DATADIR,
    socket_dir: str = vocab.MARIADB_SOCKET_DIR,
    port: int = vocab.MARIADB_PORT,
    bind: str = "0.0.0.0",
    buffer_pool_mib: int = DEFAULT_DATABASE_MEMORY_MIB - DATABASE_SERVER_MIB,
) -> str:
    """mariadbd's whole configuration (read with --defaults-file, so the image's Debian defaults, which
    bind to 127.0.0.1, do not apply). The arguments are the pod's paths and port unless a test moves them."""
    lines = [
        "# The in-cluster accounting database (slonk_infra/kube/accounting.py).",
        "[mysqld]",
        f"datadir = {datadir}",
        f"socket = {socket_dir}/mysqld.sock",
        f"pid-file = {socket_dir}/mysqld.pid",
        f"port = {port}",
        f"bind-address = {bind}",
        # Clients are pods with changing addresses: grants are by user, not by host name.
        "skip-name-resolve",
        # No binary log: one server, no replica to feed; backups are logical dumps (docs/accounting.md).
        "skip-log-bin",
        f"innodb_buffer_pool_size = {buffer_pool_mib}M",
        *(f"{key} = {value}" for key, value in MYSQLD_SETTINGS),
        "",
        "[client]",
        f"socket = {socket_dir}/mysqld.sock",
        "",
    ]
    return "\n".join(lines)


# The database's first-start init and its idempotent provisioning, run by an init container as the mysql user
# before every start of mariadbd:
# - no datadir yet: make the system tables in a scratch directory, then rename it into place, so an
#   interrupted first start leaves no half-made datadir behind;
# - every start: a server on the socket alone (no network), the database and user from the Secret
#   (IF NOT EXISTS, so an existing datadir keeps everything; ALTER USER applies a changed password), stopped.
# The SQL goes through stdin: the password never appears in a process's arguments.
MARIADB_INIT_SH = r"""#!/bin/sh
# mariadb-init.sh MY_CNF DATADIR SECRET_DIR: prepares the accounting database before mariadbd starts.
set -eu
cnf="$1"; datadir="$2"; secret="$3"
die() { echo "mariadb-init: ERROR: $*" >&2; exit 1; }
key() {
    [ -s "$secret/$1" ] || die "the database Secret has no '$1'"
    cat "$secret/$1"
}
user="$(key user)"; database="$(key database)"; password="$(key password)"
case "$user$database" in *[!A-Za-z0-9_]*) die "user '$user' / database '$database': only letters, digits and _" ;; esac
case "$password" in
    *[!A-Za-z0-9_.:+-]*) die "the database password holds a character other than letters, digits and _ . : + -" ;;
esac

if [ ! -d "$datadir/mysql" ]; then
    [ ! -e "$datadir" ] || [ -z "$(ls -A "$datadir")" ] || die "$datadir holds files but no system tables: not touching it"
    echo "mariadb-init: no datadir: creating the system tables" >&2
    rm -rf "$datadir.new"
    # The second socket-authenticated administrator is this OS user (the init's SQL below logs in as it):
    # without the option mariadb-install-db names $USER, unset in a container, and so root a second time.
    mariadb-install-db --defaults-file="$cnf" --datadir="$datadir.new" --skip-test-db \
        --auth-root-authentication-method=socket --auth-root-socket-user="$(id -un)" \
        >"$datadir.install.log" 2>&1 ||
        { cat "$datadir.install.log" >&2; die "mariadb-install-db failed"; }
    rm -rf "$datadir"
    mv "$datadir.new" "$datadir"
fi

sock="$(mktemp -u /tmp/mariadb-init.XXXXXX)"
mariadbd --defaults-file="$cnf" --skip-networking --socket="$sock" --pid-file="$sock.pid" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
i=0
until mariadb-admin --no-defaults --socket="$sock" ping >/dev/null 2>&1; do
    kill -0 "$server" 2>/dev/null || die "mariadbd stopped during init (its log is above)"
    i=$((i + 1)); [ "$i" -le 600 ] || die "mariadbd did not answer within 300 s"
    sleep 0.5
done
# The init runs as the OS user that made the system tables, which mariadb-install-db lets in over the socket.
mariadb --no-defaults --socket="$sock" <<SQL
CREATE DATABASE IF NOT EXISTS \`$database\`;
CREATE USER IF NOT EXISTS '$user'@'%' IDENTIFIED BY '$password';
ALTER USER '$user'@'%' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON \`$database\`.* TO '$user'@'%';
SQL
mariadb-admin --no-defaults --socket="$sock" shutdown
wait "$server" || true
trap - EXIT
echo "mariadb-init: database '$database' and user '$user' ready" >&2
"""

# slurmdbd.conf as slurmdbd reads it: the Secret's part plus the connection, mode 0600, owned by whoever runs
# this (the pod runs it as SlurmUser). Written beside and renamed, so slurmdbd never reads half a file.
SLURMDBD_CONF_SH = r"""#!/bin/sh
# slurmdbd-conf.sh BASE_CONF SECRET_DIR OUT: BASE_CONF plus the database connection, as OUT (mode 0600).
set -eu
base="$1"; secret="$2"; out="$3"
die() { echo "slurmdbd-conf: ERROR: $*" >&2; exit 1; }
key() {
    [ -s "$secret/$1" ] || die "the database Secret has no '$1'"
    cat "$secret/$1"
}
host="$(key host)"; port="$(key port)"; user="$(key user)"; database="$(key database)"; password="$(key password)"
# slurmdbd.conf ends a value at a blank and starts a comment at '#': refuse what would be cut short.
case "$host" in *[!A-Za-z0-9.:-]*) die "host '$host': only letters, digits, '.', ':' and '-'" ;; esac
case "$port" in *[!0-9]*) die "port '$port' is not a number" ;; esac
case "$user$database" in *[!A-Za-z0-9_]*) die "user '$user' / database '$database': only letters, digits and _" ;; esac
case "$password" in
    *[!A-Za-z0-9_.:+-]*) die "the database password holds a character other than letters, digits and _ . : + -" ;;
esac
umask 077
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
{
    cat "$base"
    echo "StorageHost=$host"
    echo "StoragePort=$port"
    echo "StorageUser=$user"
    echo "StorageLoc=$database"
    echo "StoragePass=$password"
} >"$tmp"
chmod 0600 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
"""


def database_kind(plan: ClusterPlan) -> str | None:
    """``slurm.accounting.database.kind``; None without accounting."""
    accounting = plan.declaration.slurm.accounting
    return accounting.database.kind if accounting is not None else None


def _spec(plan: ClusterPlan) -> AccountingSpec:
    accounting = plan.declaration.slurm.accounting
    assert accounting is not None
    return accounting


def database_host(plan: ClusterPlan) -> str:
    """The in-cluster database's DNS name (its headless Service)."""
    return f"{vocab.ACCOUNTING_DATABASE}.{plan.namespace}.svc.cluster.local"


def connection(plan: ClusterPlan, inputs: KubeInputs) -> DatabaseConnection:
    """How slurmdbd reaches its database: the in-cluster MariaDB, or the cloud's (kind cloud)."""
    kind = database_kind(plan)
    if kind == "in-cluster":
        return DatabaseConnection(host=database_host(plan), password=inputs.database_password)
    if kind == "cloud":
        # Rendered without a cloud layer (tests, the container tier): a marked placeholder, which the pod's
        # script refuses as a host. The SlurmCluster component refuses a cloud layer that hands none over.
        return inputs.cloud_database or CLOUD_PLACEHOLDER
    raise ValueError(f"slurm.accounting.database.kind {kind!r} has no database of this layer")


def secret_value(value: Any) -> Any:
    """A Secret ``data`` value (base64) of plain text, or of a Pulumi Output of text (then an Output too,
    mapped through its ``apply``; None while unknown, as under the offline runner)."""
    if isinstance(value, str | int):
        return base64.b64encode(str(value).encode()).decode()
    return value.apply(lambda text: None if text is None else base64.b64encode(str(text).encode()).decode())


def slurmdbd_conf(plan: ClusterPlan) -> str:
    """slurmdbd.conf without the database connection: what the ``slurmdbd-conf`` Secret holds (no password).

    Keys from slurmdbd.conf(5). DbdHost is ``localhost`` because the pod's host name changes with every pod
    of the Deployment and slurmdbd refuses to start on a host that is neither DbdHost nor DbdBackupHost,
    except for ``localhost``. No LogFile: with ``-D`` slurmdbd logs to stderr, the container's log.
    """
    return "\n".join(
        [
            "# slurmdbd.conf(5); StorageHost, StoragePort, StorageUser, StorageLoc and StoragePass are added at",
            "# start from the slurmdbd-database Secret (slonk_infra/kube/accounting.py).",
            "AuthType=auth/munge",
            "DbdHost=localhost",
            f"DbdPort={_spec(plan).database.port}",
            "SlurmUser=slurm",
            f"PidFile={SLURMDBD_RUN_DIR}/slurmdbd.pid",
            "DebugLevel=info",
            "StorageType=accounting_storage/mysql",
            *purge_lines(_spec(plan).retain_months),
            "",
        ]
    )


def purge_lines(months: int | None) -> list[str]:
    """slurmdbd.conf's Purge*After for ``retainMonths`` (slurmdbd.conf(5): a number of months; the example
    there spells it "12month"). Nothing with null: every record kept."""
    if months is None:
        return []
    kinds = ("Event", "Job", "Resv", "Step", "Suspend", "TXN")
    return [*(f"Purge{kind}After={months}month" for kind in kinds), f"PurgeUsageAfter={2 * months}month"]


def _hash(*texts: str) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ shared
def database_secret(plan: ClusterPlan, inputs: KubeInputs) -> Obj:
    """The connection slurmdbd uses (and the in-cluster database is provisioned from), password included."""
    conn = connection(plan, inputs)
    values = {
        "host": conn.host,
        "port": conn.port,
        "user": conn.user,
        "database": conn.database,
        "password": conn.password,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(vocab.DATABASE_SECRET, plan.namespace, DBD_COMPONENT),
        "type": "Opaque",
        "data": {key: secret_value(values[key]) for key in CONNECTION_KEYS},
    }


def conf_secret(plan: ClusterPlan) -> Obj:
    """slurmdbd.conf without the connection: a Secret, as slurmdbd.conf is kept from everyone else."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(vocab.SLURMDBD_CONF_SECRET, plan.namespace, DBD_COMPONENT),
        "type": "Opaque",
        "data": {SLURMDBD_CONF: secret_value(slurmdbd_conf(plan))},
    }


def scripts_map(plan: ClusterPlan) -> Obj:
    """The database's and slurmdbd's start scripts and mariadbd's configuration (nothing secret)."""
    data = {"slurmdbd-conf.sh": SLURMDBD_CONF_SH}
    if database_kind(plan) == "in-cluster":
        data |= {"mariadb-init.sh": MARIADB_INIT_SH, MY_CNF: database_cnf(plan)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(vocab.ACCOUNTING_SCRIPTS_MAP, plan.namespace, vocab.CONFIG_COMPONENT),
        "data": data,
    }


def desired_map(plan: ClusterPlan) -> Obj:
    """The accounting state the reconciler keeps slurmdbd at. Not part of the pod's hash: the reconciler reads
    the file again on every pass, and the kubelet updates a mounted ConfigMap in place."""
    state = desired_state(_spec(plan), plan.name)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(vocab.ACCOUNTING_MAP, plan.namespace, vocab.CONFIG_COMPONENT),
        "data": {vocab.ACCOUNTING_DESIRED_FILE: dump_state(state)},
    }


# ------------------------------------------------------------------------------------------------ database
def database_labels() -> dict[str, str]:
    """Labels of the database's objects and pods: its own NAME_LABEL, so slurm-internal does not admit the
    namespace's pods to it (:data:`slonk_infra.vocab.ACCOUNTING_DATABASE_NAME`)."""
    return {
        vocab.NAME_LABEL: vocab.ACCOUNTING_DATABASE_NAME,
        vocab.PART_OF_LABEL: vocab.PART_OF,
        vocab.COMPONENT: DB_COMPONENT,
    }


def database_selector() -> dict[str, str]:
    """Labels selecting the database pod."""
    return {vocab.NAME_LABEL: vocab.ACCOUNTING_DATABASE_NAME, vocab.COMPONENT: DB_COMPONENT}


def slurmdbd_selector() -> dict[str, str]:
    """Labels selecting the slurmdbd pod."""
    return vocab.selector(DBD_COMPONENT)


def _db_meta(name: str, namespace: str) -> Obj:
    return {"name": name, "namespace": namespace, "labels": database_labels()}


def database_service(plan: ClusterPlan) -> Obj:
    """Headless Service of the database pod: its DNS name (slurmdbd's StorageHost), the StatefulSet's
    governing Service."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _db_meta(vocab.ACCOUNTING_DATABASE, plan.namespace),
        "spec": {
            "clusterIP": "None",
            "selector": database_selector(),
            "ports": [{"name": "mysql", "port": vocab.MARIADB_PORT, "targetPort": vocab.MARIADB_PORT}],
        },
    }


def database_policy(plan: ClusterPlan) -> Obj:
    """MySQL's port of the database pod, from the slurmdbd pod only (everything else stays denied by the
    namespace's default-deny-ingress)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(vocab.ACCOUNTING_DATABASE, plan.namespace, vocab.NETWORK_COMPONENT),
        "spec": {
            "podSelector": {"matchLabels": database_selector()},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": slurmdbd_selector()}}],
                    "ports": [{"protocol": "TCP", "port": vocab.MARIADB_PORT}],
                }
            ],
        },
    }


def database_cnf(plan: ClusterPlan) -> str:
    """mariadbd's configuration for the declared database: the buffer pool from ``database.memoryMib``."""
    pool, _, _ = _spec(plan).database.memory
    return my_cnf(buffer_pool_mib=pool)


def database_resources(plan: ClusterPlan, cpu: str) -> Obj:
    """The database containers' requests and limit (``database.memoryMib``)."""
    _, request, limit = _spec(plan).database.memory
    return {"requests": {"cpu": cpu, "memory": f"{request}Mi"}, "limits": {"memory": _mib(limit)}}


def _mib(value: int) -> str:
    # Whole GiB as Gi, the way the manifests spelled 3 GiB before the size was declared.
    return f"{value // 1024}Gi" if value % 1024 == 0 else f"{value}Mi"


def database_statefulset(plan: ClusterPlan, inputs: KubeInputs) -> Obj:
    """MariaDB: one replica, its volume from a claim template kept when the StatefulSet is deleted or scaled
    down (persistentVolumeClaimRetentionPolicy Retain), the cluster's image (Debian's mariadb-server)."""
    image = plan.declaration.image.reference
    cnf = f"{SCRIPTS_DIR}/{MY_CNF}"
    ping = ["mariadb-admin", f"--socket={MARIADB_SOCKET}", "ping"]
    mounts: list[Obj] = [
        {"name": "data", "mountPath": vocab.MARIADB_VOLUME_DIR},
        {"name": "socket", "mountPath": vocab.MARIADB_SOCKET_DIR},
        {"name": "accounting-scripts", "mountPath": SCRIPTS_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    init: Obj = {
        "name": "init",
        "image": image,
        "command": ["sh", f"{SCRIPTS_DIR}/mariadb-init.sh", cnf, MARIADB_DATADIR, DATABASE_SECRET_DIR],
        "securityContext": restricted(run_as=vocab.MYSQL_UID),
        "resources": database_resources(plan, "250m"),
        "volumeMounts": [*mounts, {"name": "database", "mountPath": DATABASE_SECRET_DIR, "readOnly": True}],
    }
    container: Obj = {
        "name": "mariadb",
        "image": image,
        "command": ["mariadbd", f"--defaults-file={cnf}"],
        "ports": [{"name": "mysql", "containerPort": vocab.MARIADB_PORT}],
        "securityContext": restricted(run_as=vocab.MYSQL_UID),
        # The buffer pool plus the server's own memory and connections (database.memoryMib).
        "resources": database_resources(plan, "500m"),
        # Crash recovery of a large redo log can take minutes before the server answers.
        "startupProbe": {"exec": {"command": ping}, "periodSeconds": 5, "failureThreshold": 120},
        "readinessProbe": {"exec": {"command": ping}, "periodSeconds": 10, "timeoutSeconds": 5},
        "livenessProbe": {
            "tcpSocket": {"port": vocab.MARIADB_PORT},
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
        "volumeMounts": mounts,
    }
    scripts_hash = _hash(MARIADB_INIT_SH, database_cnf(plan))
    pod_spec: Obj = {
        "serviceAccountName": vocab.SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "priorityClassName": vocab.control_priority(plan.namespace),
        # mariadbd flushes and closes its tables on SIGTERM; give it time on a busy database.
        "terminationGracePeriodSeconds": 120,
        "securityContext": {"fsGroup": vocab.MYSQL_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [init],
        "containers": [container],
        "volumes": [
            {"name": "socket", "emptyDir": {"medium": "Memory"}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "accounting-scripts", "configMap": {"name": vocab.ACCOUNTING_SCRIPTS_MAP}},
            {"name": "database", "secret": {"secretName": vocab.DATABASE_SECRET, "defaultMode": 0o440}},
        ],
    }
    if inputs.system_selector:
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    claim: Obj = {
        "metadata": {"name": "data", "labels": database_labels()},
        "spec": _claim_spec(plan),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _db_meta(vocab.ACCOUNTING_DATABASE, plan.namespace),
        "spec": {
            "serviceName": vocab.ACCOUNTING_DATABASE,
            "replicas": 1,
            "selector": {"matchLabels": database_selector()},
            "updateStrategy": {"type": "RollingUpdate"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "volumeClaimTemplates": [claim],
            "template": {
                "metadata": {"labels": database_labels(), "annotations": {vocab.CONFIG_HASH: scripts_hash}},
                "spec": pod_spec,
            },
        },
    }


def _claim_spec(plan: ClusterPlan) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{_spec(plan).database.volume_gib}Gi"}},
    }
    if plan.claim_storage_class is not None:
        spec["storageClassName"] = plan.claim_storage_class
    return spec


# ------------------------------------------------------------------------------------------------ slurmdbd
def slurmdbd_service(plan: ClusterPlan) -> Obj:
    """slurmdbd inside the cluster: slurm.conf's AccountingStorageHost (slurmctld, sacctmgr, sacct)."""
    port = _spec(plan).database.port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(vocab.SLURMDBD, plan.namespace, DBD_COMPONENT),
        "spec": {
            "selector": slurmdbd_selector(),
            "ports": [{"name": "slurmdbd", "port": port, "targetPort": port}],
        },
    }


def slurmdbd_deployment(plan: ClusterPlan, inputs: KubeInputs) -> Obj:
    """slurmdbd and the accounting reconciler in one pod, one replica, replaced with ``Recreate``."""
    image = plan.declaration.image.reference
    port = _spec(plan).database.port
    run = {"name": "slurmdbd-run", "mountPath": SLURMDBD_RUN_DIR}
    scripts = {"name": "accounting-scripts", "mountPath": SCRIPTS_DIR, "readOnly": True}
    conf_init: Obj = {
        "name": "slurmdbd-conf",
        "image": image,
        "command": [
            "sh",
            f"{SCRIPTS_DIR}/slurmdbd-conf.sh",
            f"{CONF_SECRET_DIR}/{SLURMDBD_CONF}",
            DATABASE_SECRET_DIR,
            f"{SLURMDBD_RUN_DIR}/{SLURMDBD_CONF}",
        ],
        # As SlurmUser, so the file it writes is SlurmUser's, as slurmdbd insists.
        "securityContext": restricted(run_as=vocab.SLURM_UID),
        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [
            run,
            scripts,
            {"name": "slurmdbd-conf", "mountPath": CONF_SECRET_DIR, "readOnly": True},
            {"name": "database", "mountPath": DATABASE_SECRET_DIR, "readOnly": True},
        ],
    }
    tcp = {"tcpSocket": {"port": port}}
    slurmdbd: Obj = {
        "name": "slurmdbd",
        "image": image,
        "command": ["slurmdbd", "-D"],
        # slurmdbd reads slurmdbd.conf from the directory of SLURM_CONF (slurmdbd.conf(5)); it needs no
        # slurm.conf, so the variable points at the assembled file's directory.
        "env": [{"name": "SLURM_CONF", "value": f"{SLURMDBD_RUN_DIR}/slurm.conf"}],
        "ports": [{"name": "slurmdbd", "containerPort": port}],
        "securityContext": restricted(run_as=vocab.SLURM_UID),
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        # slurmdbd listens once its database is reachable and its tables are converted to this release,
        # which after an upgrade of a large database can take hours (https://slurm.schedmd.com/upgrades.html):
        # a day before the first failure counts, so the probe never kills a conversion.
        "startupProbe": {**tcp, "periodSeconds": 10, "failureThreshold": 8640},
        "readinessProbe": {**tcp, "periodSeconds": 10},
        "livenessProbe": {**tcp, "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 4},
        "volumeMounts": [*common_mounts(), run],
    }
    reconciler: Obj = {
        "name": "reconciler",
        "image": image,
        "command": [
            vocab.POD_PYTHON,
            "-m",
            "slonk_infra.accounting",
            "--desired",
            f"{vocab.ACCOUNTING_DIR}/{vocab.ACCOUNTING_DESIRED_FILE}",
            "--interval",
            "30",
        ],
        # sacctmgr as SlurmUser, whom slurmdbd treats as an administrator; it reaches slurmdbd through
        # slurm.conf's AccountingStorageHost, like every client.
        "securityContext": restricted(run_as=vocab.SLURM_UID),
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "volumeMounts": [
            *common_mounts(),
            config_mount(),
            {"name": "accounting", "mountPath": vocab.ACCOUNTING_DIR, "readOnly": True},
        ],
    }
    pod_spec = slurm_pod_spec(
        plan,
        priority_class=vocab.control_priority(plan.namespace),
        fs_group=vocab.SLURM_UID,
        containers=[slurmdbd, reconciler],
        volumes=[
            *common_volumes(),
            config_volume(),
            {"name": "slurmdbd-run", "emptyDir": {"medium": "Memory"}},
            {"name": "accounting-scripts", "configMap": {"name": vocab.ACCOUNTING_SCRIPTS_MAP}},
            {"name": "accounting", "configMap": {"name": vocab.ACCOUNTING_MAP}},
            # Group-readable for the pod's fsGroup (SlurmUser's group), as the init runs as SlurmUser.
            {"name": "slurmdbd-conf", "secret": {"secretName": vocab.SLURMDBD_CONF_SECRET, "defaultMode": 0o440}},
            {"name": "database", "secret": {"secretName": vocab.DATABASE_SECRET, "defaultMode": 0o440}},
        ],
    )
    pod_spec["initContainers"] = [conf_init, *pod_spec.get("initContainers", [])]
    if inputs.system_selector:
        # On the system nodes, like the controller.
        pod_spec["nodeSelector"] = dict(inputs.system_selector)
    # Rolled when its configuration or scripts change (the password lives in the Secret, whose change needs a
    # restart of the pod: docs/accounting.md).
    conf_hash = _hash(slurmdbd_conf(plan), SLURMDBD_CONF_SH)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(vocab.SLURMDBD, plan.namespace, DBD_COMPONENT),
        "spec": {
            "replicas": 1,
            # Recreate: the old slurmdbd is gone before the new one starts; two on one database must never run.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": slurmdbd_selector()},
            "template": {
                "metadata": {"labels": vocab.labels(DBD_COMPONENT), "annotations": {vocab.CONFIG_HASH: conf_hash}},
                "spec": pod_spec,
            },
        },
    }


def accounting_objects(plan: ClusterPlan, inputs: KubeInputs) -> list[Obj]:
    """Every accounting object of the layer, in apply order; none for ``external`` or without accounting.

    Their number is fixed by the kind, never by the cluster's nodes.
    """
    kind = database_kind(plan)
    if kind not in ("in-cluster", "cloud"):
        return []
    out = [database_secret(plan, inputs), conf_secret(plan), scripts_map(plan), desired_map(plan)]
    if kind == "in-cluster":
        out += [database_service(plan), database_policy(plan), database_statefulset(plan, inputs)]
    return [*out, slurmdbd_service(plan), slurmdbd_deployment(plan, inputs)]
