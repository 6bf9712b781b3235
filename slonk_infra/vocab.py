"""The names and labels vocabulary shared by the Kubernetes builders, the render and the policy pack.

Every label key, component name, annotation key, object name, mount path and user id that more than
one module relies on is spelled here once. Names derived from a pool or slice (StatefulSets, pods,
Slurm nodes) live in :mod:`slonk_infra.plan.naming`; this module holds the fixed ones. It imports nothing
from the package, so the plan, the renderers and the policy pack can all read it.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------- labels
APP = "slurm"  # value of NAME_LABEL on every object of the Slurm layer
NAME_LABEL = "app.kubernetes.io/name"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "slonk-infra"
COMPONENT = "app.kubernetes.io/component"
GROUP_LABEL = "slonk.dev/group"  # worker group of a worker StatefulSet and its pods
POOL_LABEL = "slonk.dev/pool"  # put on a group's nodes by every cloud; worker pods select it
VOLUME_LABEL = "slonk.dev/volume"  # shared filesystem an in-cluster NFS server exports
# Put on the cloud's system nodes (value SYSTEM_ROLE); controller and login pods select it.
SYSTEM_ROLE_LABEL = "slonk.dev/role"
SYSTEM_ROLE = "system"
# "primary" or "standby" on a controller pod: the standby StatefulSet's selector has it, so that StatefulSet
# never counts the primary's pod (slonk_infra.kube.controller.statefulsets).
CONTROLLER_ROLE_LABEL = "slonk.dev/controller-role"

# Cloud-defined node labels and extended resources the layer selects or requests.
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
GPU_RESOURCE = "nvidia.com/gpu"
TPU_RESOURCE = "google.com/tpu"

# ------------------------------------------------------------------------------------ components
CONTROLLER_COMPONENT = "controller"
LOGIN_COMPONENT = "login"
WORKER_COMPONENT = "worker"
RESTAPI_COMPONENT = "restapi"
NFS_COMPONENT = "nfs"
STATE_BACKUP_COMPONENT = "state-backup"  # the controller state archive CronJob
STORAGE_COMPONENT = "storage"
CONFIG_COMPONENT = "config"
AUTH_COMPONENT = "auth"
RBAC_COMPONENT = "rbac"
NETWORK_COMPONENT = "network"
SCHEDULING_COMPONENT = "scheduling"
NAMESPACE_COMPONENT = "namespace"
OPERATIONS_COMPONENT = "operations"  # the operations controller (slonk_infra.ops), whose NAME_LABEL is its own
SLURMDBD_COMPONENT = "slurmdbd"  # slurmdbd and the accounting reconciler beside it
# The in-cluster accounting database (MariaDB); the policy pack finds its StatefulSet by this label. Its pods
# carry ACCOUNTING_DATABASE_NAME as NAME_LABEL, not APP, so the namespace-wide "slurm-internal" policy does not
# select them and only the database's own policy admits traffic to them.
ACCOUNTING_DATABASE_COMPONENT = "accounting-database"
ACCOUNTING_DATABASE_NAME = "slurm-accounting-database"

# ----------------------------------------------------------------------------------- annotations
CONFIG_HASH = "slonk.dev/config-hash"  # rolls controller, login and slurmrestd pods when the Slurm config changes
TOPOLOGY_LABELS = "slonk.dev/node-topology-labels"  # on the topology ConfigMap: the cloud's topology labels
# On a claim that names no StorageClass (local clusters only): says the cluster's default serves it.
STORAGE_CLASS_NOTE = "slonk.dev/storage-class"
DEFAULT_CLASS_NOTE = "the cluster's default StorageClass"
# On a worker pod whose machine's GPU NICs are not wired (NCCL then uses the primary NIC only).
FABRIC_NOTE = "slonk.dev/fabric"
# Read and written by the operations controller and the health checker on worker pods and their
# Kubernetes nodes; slonk_infra.ops.model says what each holds.
SLURM_STATE = "slonk.dev/slurm-state"
SLURM_REASON = "slonk.dev/slurm-reason"
CORDONED_BY = "slonk.dev/cordoned-by"
CORDON_REASON = "slonk.dev/cordon-reason"
REPLACE_MACHINE = "slonk.dev/replace-machine"
HEALTH = "slonk.dev/health"

# ---------------------------------------------------------------------------------- object names
SERVICE_ACCOUNT = "slurm"
VIEWER_ROLE = "slurm-viewer"
CONFIG_MAP = "slurm-config"  # slurm.conf, gres.conf, cgroup.conf
TOPOLOGY_MAP = "slurm-topology"  # topology.conf or topology.yaml
SCRIPTS_MAP = "slurm-scripts"  # the pods' scripts
# Files beside the scripts in SCRIPTS_MAP that healthcheck.sh hands slonk-health.
HEALTH_SPEC_FILE = "health.json"  # the declaration's health thresholds
HEALTH_GROUPS_FILE = "health-groups.txt"  # "<group> <gpus> <tpu chips>" per worker group
# What one slonk-health run leaves for the next in a worker container (a stuck NVML call, the GPUs'
# fingerprint): the container's own /run, gone with it.
HEALTH_STATE_DIR = "/run/slonk-health"
MUNGE_SECRET = "munge-key"
MUNGE_KEY_FILE = "munge.key"  # key of the munge Secret, and the file munged reads
JWT_SECRET = "slurm-jwt"
USERS_SECRET = "slurm-users"  # the declared users, mounted in every Slurm pod (slonk_infra.declaration.users)
LOGIN_HOST_KEYS_SECRET = "login-host-keys"  # the login pods' SSH host key, created once
LOGIN_HOST_KEY_FILE = "ssh_host_ed25519_key"
JWT_FILE = "jwt_hs256.key"  # key of the JWT Secret, and the file slurm.conf names
CONTROLLER_STATE_CLAIM = "slurmctld-state"
RESTAPI = "slurmrestd"
CONTROLLER_BUDGET = "slurmctld"
# Accounting (slurm.accounting.database kind in-cluster or cloud): slurmdbd's Deployment and Service (the
# AccountingStorageHost of slurm.conf), the in-cluster database's StatefulSet and Service.
SLURMDBD = "slurmdbd"
ACCOUNTING_DATABASE = "accounting-database"
# How slurmdbd reaches its database: keys host, port, user, database, password. The only object holding the
# password; slurmdbd.conf (SLURMDBD_CONF_SECRET) has none, the pod joins it in at start.
DATABASE_SECRET = "slurmdbd-database"
SLURMDBD_CONF_SECRET = "slurmdbd-conf"
ACCOUNTING_MAP = "slurm-accounting"  # desired.json: the accounting state the reconciler keeps slurmdbd at
ACCOUNTING_DESIRED_FILE = "desired.json"
ACCOUNTING_SCRIPTS_MAP = "slurm-accounting-scripts"  # the database's and slurmdbd's start scripts, my.cnf
# Characters a generated database password may hold beyond letters and digits: none of them needs quoting
# in slurmdbd.conf (where '#' starts a comment and blanks end a value) or between quotes in SQL. The pods'
# scripts refuse a password with any other character.
DATABASE_PASSWORD_SPECIALS = "_-.:+"
# The accounting database password's length, whoever makes it (in-cluster, Cloud SQL, RDS: 8 to 41 there).
DATABASE_PASSWORD_LENGTH = 32


def worker_priority(namespace: str) -> str:
    """PriorityClass of worker pods (below production workloads)."""
    return f"{namespace}-slurm-worker"


def control_priority(namespace: str) -> str:
    """PriorityClass of controller, login and slurmrestd pods."""
    return f"{namespace}-slurm-control"


def production_priority(namespace: str) -> str:
    """PriorityClass for production workloads that may preempt workers."""
    return f"{namespace}-production"


def claim_name(volume: str) -> str:
    """PersistentVolumeClaim of a shared filesystem."""
    return f"shared-{volume}"


def nfs_server(volume: str) -> str:
    """StatefulSet and Service of an in-cluster NFS server exporting ``volume``."""
    return f"nfs-{volume}"


# ------------------------------------------------------------------------ Slurm files and ports in the pods
# Where the Slurm files and daemons' state live inside the pods (the image and the manifests agree on these).
CONF_DIR = "/etc/slurm"
SCRIPTS_DIR = "/opt/slonk/scripts"
STATE_DIR = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
JWT_KEY = f"{CONF_DIR}/jwt/{JWT_FILE}"  # projected into /etc/slurm on the controller
# Where GKE's NVIDIA device plugin mounts the driver into a GPU container: libraries under lib64, binaries
# (nvidia-smi) under bin; outside the image's linker cache and PATH (docs/containers.md, GKE profile).
GPU_DRIVER_DIR = "/usr/local/nvidia"
# Written by slurmd.sh on a worker, read by the TaskProlog: the node's fabric / TPU variables for tasks.
TASK_ENV_FILE = "/run/slurm/task-env"
# The declared users (passwd, group, shadow, sudoers, authorized_keys/<name>), from the slurm-users
# Secret in every pod; the image's NSS (libnss-extrausers) reads them here.
USERS_DIR = "/etc/slonk/users"
# The login pods' SSH host key, from the login-host-keys Secret (stable across restarts).
LOGIN_HOST_KEY = "/etc/slonk/ssh-host-keys/ssh_host_ed25519_key"
SUDOERS_FILE = "/etc/sudoers.d/slonk-users"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMRESTD_PORT = 6820
MARIADB_PORT = 3306  # MySQL's port, the in-cluster database's and a cloud database's

# ------------------------------------------------------------------------------ paths in the pods
MUNGE_SOCKET_DIR = "/run/munge"  # shared by munged and the Slurm daemons
MUNGE_SECRET_DIR = "/etc/munge-secret"  # the Secret, root-owned, as Kubernetes mounts it
MUNGE_PRIVATE_DIR = "/run/munge-key"  # munged's own copy, owned by munge
RUN_SLURM_DIR = "/run/slurm"  # per-pod flags (a leaving worker's "terminating" mark)
# In a controller pod: slurm.conf with this pod's own SlurmctldHost at the loopback address and no other
# (slurmctld.sh writes it), for the commands that ask this pod's slurmctld (its probes, push-config.sh).
SELF_CONF = f"{RUN_SLURM_DIR}/self.conf"
# In a controller pod: the Slurm config files as the pod was made with them, which its slurmctld runs
# (slurmctld.sh copies them once per pod; the mounted ConfigMap changes under a running pod).
PINNED_CONF_DIR = f"{RUN_SLURM_DIR}/etc"
NFS_EXPORT_DIR = "/exports"
ACCOUNTING_DIR = "/etc/slurm-accounting"  # ACCOUNTING_MAP in the slurmdbd pod, read by the reconciler
MARIADB_VOLUME_DIR = "/var/lib/mysql"  # the database's volume; the datadir is its data/ subdirectory
MARIADB_SOCKET_DIR = "/run/mysqld"  # where Debian's mariadb clients look for the server's socket
# The pods' Python with the project's package (images/install.sh); the system python3 does not have it.
POD_PYTHON = "/opt/slonk/venv/bin/python3"

# ---------------------------------------------------------------------------------------- users
SLURM_UID = 401
# slurmrestd refuses to run as root or as SlurmUser; the image has a user of its own for it.
SLURMRESTD_UID = 402
# mariadbd's user in the image (images/install.sh), fixed so the database volume can be handed to it.
MYSQL_UID = 403


def labels(component: str, **extra: str) -> dict[str, str]:
    """Standard labels of every Slurm object."""
    return {NAME_LABEL: APP, PART_OF_LABEL: PART_OF, COMPONENT: component, **extra}


def selector(component: str, **extra: str) -> dict[str, str]:
    """Labels selecting the pods of one component of the Slurm layer."""
    return {COMPONENT: component, NAME_LABEL: APP, **extra}


def meta(name: str, namespace: str | None, component: str, **extra: str) -> dict[str, object]:
    """ObjectMeta with the standard labels; namespace None for cluster-scoped objects."""
    out: dict[str, object] = {"name": name, "labels": labels(component, **extra)}
    if namespace is not None:
        out["namespace"] = namespace
    return out
