"""gres.conf: GPUs with their device files, TPU chips as count-only GRES."""

from __future__ import annotations

from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm.lines import header, kv_line


def gpu_files(count: int) -> str:
    """Device files of ``count`` NVIDIA GPUs: 8 -> ``/dev/nvidia[0-7]``."""
    return "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"


def render_gres_conf(plan: ClusterPlan) -> str:
    """Render gres.conf. GPUs need ``File=`` (slurmd drops file-less GPUs); TPUs are counted only."""
    autodetect = plan.declaration.slurm.gres_autodetect
    lines = [f"AutoDetect={autodetect}"]
    for g in plan.groups:
        if g.kind == "gpu":
            lines.append(
                kv_line(
                    [
                        ("NodeName", g.hostlist),
                        ("Name", "gpu"),
                        ("Type", g.gres_type),
                        ("File", gpu_files(g.gres_count)),
                    ]
                )
            )
        elif g.kind == "tpu":
            lines.append(
                kv_line([("NodeName", g.hostlist), ("Name", "tpu"), ("Type", g.gres_type), ("Count", g.gres_count)])
            )
    return header("gres.conf", plan.name) + "\n".join(lines) + "\n"
