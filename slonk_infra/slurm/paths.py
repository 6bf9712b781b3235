"""Where the Slurm files and daemons' state live inside the pods (the image and manifests agree on these)."""

CONF_DIR = "/etc/slurm"
SCRIPTS_DIR = "/opt/slonk/scripts"
STATE_DIR = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
JWT_KEY = "/etc/slurm/jwt/jwt_hs256.key"  # projected into /etc/slurm on the controller
MUNGE_KEY = "/etc/munge/munge.key"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMRESTD_PORT = 6820
