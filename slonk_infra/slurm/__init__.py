"""Slurm configuration rendering: pure functions from a :class:`~slonk_infra.plan.ClusterPlan` to file text.

The Slurm layer does not know which cloud it runs on: it reads only the plan's worker groups,
partitions and Slurm settings.
"""

from slonk_infra.slurm.render import SlurmFiles, render_slurm_files

__all__ = ["SlurmFiles", "render_slurm_files"]
