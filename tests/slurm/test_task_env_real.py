"""The TaskProlog on real Slurm: a task sees the node's recorded fabric / TPU variables and what the
fabric's env script sets, although the submitting shell had none of them.

Runs in the chroot flavor (its /run is a private tmpfs, where the worker's record file lives as in a
pod); the rendered slurm.conf names task-env.sh as TaskProlog, which the lab installs from the
rendered files.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slonk_infra import vocab
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import render_slurm_files
from testing.slurmlab import SlurmLab, require_flavor, stand_in_health_check


def small_cpu_cluster() -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("local"))
    raw["image"]["slurmVersion"] = "25.05"
    raw["pools"] = [{"name": "cpu", "kind": "cpu", "machineType": "local-2c4g", "nodes": 1}]
    raw.pop("tpuSlices", None)
    raw["slurm"] = {}
    return raw


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SlurmLab, ClusterPlan]]:
    require_flavor("chroot")
    plan = build_plan(small_cpu_cluster())
    files = stand_in_health_check(render_slurm_files(plan).all())
    with SlurmLab(files, "chroot", tmp_path_factory.mktemp("task-env"), initial_nodes=["cpu-0"]) as slurm:
        yield slurm, plan


def test_tasks_get_the_recorded_variables_and_the_env_scripts(
    lab: tuple[SlurmLab, ClusterPlan], tmp_path: Path
) -> None:
    slurm, _ = lab
    script = "/run/slurm/nccl-env-profile.sh"
    record = (
        f"#script {script}\n"
        "export TPU_WORKER_ID=0\n"
        "export TPU_WORKER_HOSTNAMES=cpu-0.slurm-workers.slurm.svc.cluster.local\n"
        "export FI_PROVIDER=efa\n"
    )
    setup = (
        f"mkdir -p /run/slurm && printf '%s' '{record}' > {vocab.TASK_ENV_FILE} && "
        f"printf 'export NCCL_CROSS_NIC=0\\n' > {script} && chmod 644 {vocab.TASK_ENV_FILE} {script}"
    )
    slurm.run(["sh", "-c", setup], check=True)
    out = slurm.run(
        ["srun", "-N", "1", "sh", "-c", 'echo "$TPU_WORKER_ID|$TPU_WORKER_HOSTNAMES|$FI_PROVIDER|$NCCL_CROSS_NIC"'],
        check=True,
        timeout=60,
        env={"FI_PROVIDER": "", "TPU_WORKER_ID": ""},
    ).stdout.strip()
    assert out == "0|cpu-0.slurm-workers.slurm.svc.cluster.local|efa|0"
