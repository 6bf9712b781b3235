"""cgroup.conf for slurmd running in a Kubernetes pod on a cgroup v2 node."""

from __future__ import annotations

from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm.lines import header


def render_cgroup_conf(plan: ClusterPlan) -> str:
    """Render cgroup.conf.

    Kubernetes nodes run cgroup v2 and a pod has no systemd to delegate through, so slurmd manages
    its own subtree of the pod's cgroup (IgnoreSystemd). Cores, memory and devices are constrained so a
    job sees only the GPUs Slurm gave it; swap is left alone because Kubernetes nodes run without it.
    """
    lines = [
        "CgroupPlugin=cgroup/v2",
        "IgnoreSystemd=yes",
        "ConstrainCores=yes",
        "ConstrainDevices=yes",
        "ConstrainRAMSpace=yes",
        "ConstrainSwapSpace=no",
    ]
    return header("cgroup.conf", plan.name) + "\n".join(lines) + "\n"
