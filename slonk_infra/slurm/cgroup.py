"""cgroup.conf for slurmd running in a privileged Kubernetes pod."""

from __future__ import annotations

from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm.lines import header


def render_cgroup_conf(plan: ClusterPlan) -> str:
    """Render cgroup.conf.

    The cgroup version is the node's, not the cluster's: GKE and EKS (AL2023, Bottlerocket) nodes run
    cgroup v2, EKS on Amazon Linux 2 and some on-premises nodes still mount v1, and ``cgroup/v2`` is
    fatal to slurmd on a v1 or hybrid host. ``autodetect`` (Slurm 22.05+) picks the plugin from what
    /sys/fs/cgroup is, so one file serves every pool. A pod has no systemd to delegate through, so
    slurmd manages its own subtree of the pod's cgroup (IgnoreSystemd). Cores, memory and devices are
    constrained so a job sees only the GPUs Slurm gave it; swap is left alone because Kubernetes nodes
    run without it. docs/containers.md says what the container tier proves of this (v1 only).
    """
    lines = [
        "CgroupPlugin=autodetect",
        "IgnoreSystemd=yes",
        "ConstrainCores=yes",
        "ConstrainDevices=yes",
        "ConstrainRAMSpace=yes",
        "ConstrainSwapSpace=no",
    ]
    return header("cgroup.conf", plan.name) + "\n".join(lines) + "\n"
