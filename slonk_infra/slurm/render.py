"""All Slurm files of a cluster in one call."""

from __future__ import annotations

from dataclasses import dataclass

from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm.cgroup import render_cgroup_conf
from slonk_infra.slurm.conf import render_slurm_conf
from slonk_infra.slurm.gres import render_gres_conf
from slonk_infra.slurm.scripts import render_scripts
from slonk_infra.slurm.topology import render_topology_conf, render_topology_yaml


@dataclass(frozen=True)
class SlurmFiles:
    """Rendered Slurm files: ``config`` goes to /etc/slurm, ``scripts`` to /etc/slurm/scripts."""

    config: dict[str, str]
    scripts: dict[str, str]

    def all(self) -> dict[str, str]:
        """Every file keyed by its path relative to /etc/slurm."""
        return {**self.config, **{f"scripts/{k}": v for k, v in self.scripts.items()}}


def render_slurm_files(plan: ClusterPlan) -> SlurmFiles:
    """Render slurm.conf, gres.conf, cgroup.conf, the topology file and the scripts."""
    config = {
        "slurm.conf": render_slurm_conf(plan),
        "gres.conf": render_gres_conf(plan),
        "cgroup.conf": render_cgroup_conf(plan),
    }
    if plan.declaration.slurm.topology == "yaml":
        config["topology.yaml"] = render_topology_yaml(plan)
    else:
        config["topology.conf"] = render_topology_conf(plan)
    return SlurmFiles(config=config, scripts=render_scripts(plan))
