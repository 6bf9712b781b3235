"""Where the Slurm files and daemons' state live inside the pods (the image and manifests agree on these)."""

from slonk_infra.vocab import JWT_FILE

CONF_DIR = "/etc/slurm"
SCRIPTS_DIR = "/opt/slonk/scripts"
STATE_DIR = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
JWT_KEY = f"{CONF_DIR}/jwt/{JWT_FILE}"  # projected into /etc/slurm on the controller
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
