"""The worker's task environment: what slurmd.sh records and the TaskProlog hands every task.

A job's tasks inherit the submitter's environment, not slurmd's, so the fabric's and TPU slice's
variables reach them only through the TaskProlog's ``export NAME=value`` lines. These tests run the
shipped scripts (filled as the ConfigMap carries them) with ``sh``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from slonk_infra import vocab
from slonk_infra.clouds import build_plan
from slonk_infra.slurm.conf import render_slurm_conf
from slonk_infra.slurm.scripts import SETTINGS, fill, source
from tests.support import declaration


def _script(name: str, task_env_file: Path) -> str:
    return fill(name, source(name), {**SETTINGS, "TASK_ENV_FILE": str(task_env_file)})


def _writer(text: str) -> str:
    """The part of slurmd.sh that records the task environment (up to the health check)."""
    start = text.index(": >")
    return text[start : text.index('sh "$here/healthcheck.sh"')]


def test_slurmd_records_the_named_variables_and_the_env_script(tmp_path: Path) -> None:
    out = tmp_path / "task-env"
    env = {
        "PATH": os.environ["PATH"],
        "SLONK_TASK_ENV": "TPU_WORKER_ID,TPU_WORKER_HOSTNAMES,FI_PROVIDER",
        "SLONK_TASK_ENV_SCRIPT": "/usr/local/gib/scripts/set_nccl_env.sh",
        "TPU_WORKER_ID": "3",
        "TPU_WORKER_HOSTNAMES": "a-0.x,a-1.x,a-2.x,a-3.x",
        "FI_PROVIDER": "efa",
    }
    subprocess.run(["sh", "-c", _writer(_script("slurmd.sh", out))], env=env, check=True)
    assert out.read_text().splitlines() == [
        "#script /usr/local/gib/scripts/set_nccl_env.sh",
        "export TPU_WORKER_ID=3",
        "export TPU_WORKER_HOSTNAMES=a-0.x,a-1.x,a-2.x,a-3.x",
        "export FI_PROVIDER=efa",
    ]
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    # No variables named: an empty file, and the TaskProlog prints nothing.
    subprocess.run(["sh", "-c", _writer(_script("slurmd.sh", out))], env={"PATH": os.environ["PATH"]}, check=True)
    assert out.read_text() == ""


def test_slurmd_expands_prefixes_and_marks_path_lists(tmp_path: Path) -> None:
    (tmp_path / "TPU_decoy").write_text("")  # a file a glob of TPU_* would match
    out = tmp_path / "task-env"
    env = {
        "PATH": os.environ["PATH"],
        "SLONK_TASK_ENV": "TPU_WORKER_ID,LD_LIBRARY_PATH,TPU_*,VBAR_CONTROL_SERVICE_URL",
        "TPU_WORKER_ID": "1",
        "TPU_TOPOLOGY": "2x2x2",
        "TPU_SKIP_MDS_QUERY": "true",
        "VBAR_CONTROL_SERVICE_URL": "10.0.0.2:8353",
        "LD_LIBRARY_PATH": "/opt/amazon/efa/lib:/usr/local/nvidia/lib64",
        "NOT_TPU_X": "no",
    }
    script = _script("slurmd.sh", out)
    subprocess.run(["sh", "-c", _writer(script)], env=env, check=True, cwd=tmp_path)
    assert out.read_text().splitlines() == [
        "export TPU_WORKER_ID=1",
        "prepend LD_LIBRARY_PATH=/opt/amazon/efa/lib:/usr/local/nvidia/lib64",
        "export TPU_SKIP_MDS_QUERY=true",
        "export TPU_TOPOLOGY=2x2x2",
        "export VBAR_CONTROL_SERVICE_URL=10.0.0.2:8353",
    ]


def test_task_prolog_puts_the_nodes_paths_before_the_tasks_own(tmp_path: Path) -> None:
    nccl = tmp_path / "env.sh"
    nccl.write_text('export LD_LIBRARY_PATH="/usr/local/gib/lib64:$LD_LIBRARY_PATH"\n')
    record = tmp_path / "task-env"
    record.write_text(f"#script {nccl}\nprepend LD_LIBRARY_PATH=/opt/amazon/efa/lib:/usr/local/nvidia/lib64\n")
    prolog = tmp_path / "task-env.sh"
    prolog.write_text(_script("task-env.sh", record))
    user = "/home/alice/conda/lib:/usr/local/nvidia/lib64"
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": user}
    out = subprocess.run(["sh", str(prolog)], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "export LD_LIBRARY_PATH=/opt/amazon/efa/lib:/usr/local/nvidia/lib64:/home/alice/conda/lib",
        # the env script builds on that, so the task's own entries survive its line too
        "export LD_LIBRARY_PATH=/usr/local/gib/lib64:/opt/amazon/efa/lib:/usr/local/nvidia/lib64:/home/alice/conda/lib",
    ]
    bare = subprocess.run(["sh", str(prolog)], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert bare.stdout.splitlines()[0] == "export LD_LIBRARY_PATH=/opt/amazon/efa/lib:/usr/local/nvidia/lib64"


def test_task_prolog_exports_the_recorded_variables_and_what_the_env_script_sets(tmp_path: Path) -> None:
    nccl = tmp_path / "nccl-env-profile.sh"
    nccl.write_text("export NCCL_NET_GDR_LEVEL=PIX\nexport NCCL_CROSS_NIC=0\necho noise\n")
    record = tmp_path / "task-env"
    record.write_text(f"#script {nccl}\nexport FI_PROVIDER=efa\nnot an export\n")
    prolog = tmp_path / "task-env.sh"
    prolog.write_text(_script("task-env.sh", record))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    out = subprocess.run(["sh", str(prolog)], env=env, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "export FI_PROVIDER=efa"
    assert set(lines[1:]) == {"export NCCL_NET_GDR_LEVEL=PIX", "export NCCL_CROSS_NIC=0"}
    assert all(re.match(r"^export [A-Za-z_][A-Za-z0-9_]*=", line) for line in lines)
    # A node without a record (CPU pools) gives tasks nothing, and succeeds.
    record.unlink()
    assert subprocess.run(["sh", str(prolog)], env=env, capture_output=True, text=True, check=True).stdout == ""


def test_slurm_conf_runs_the_task_prolog_and_keeps_the_nodes_memlock() -> None:
    conf = render_slurm_conf(build_plan(declaration("aws")))
    assert f"TaskProlog={vocab.SCRIPTS_DIR}/task-env.sh" in conf.splitlines()
    assert "PropagateResourceLimitsExcept=MEMLOCK" in conf.splitlines()


def test_only_search_paths_are_joined_a_single_path_is_handed_over(tmp_path: Path) -> None:
    out = tmp_path / "task-env"
    env = {
        "PATH": os.environ["PATH"],
        "SLONK_TASK_ENV": "TPU_*,NCCL_NET_PLUGIN_PATH",
        "TPU_LIBRARY_PATH": "/opt/libtpu.so",
        "NCCL_NET_PLUGIN_PATH": "/usr/local/gib/lib64/libnccl-net.so",
    }
    subprocess.run(["sh", "-c", _writer(_script("slurmd.sh", out))], env=env, check=True)
    assert out.read_text().splitlines() == [
        "export TPU_LIBRARY_PATH=/opt/libtpu.so",
        "export NCCL_NET_PLUGIN_PATH=/usr/local/gib/lib64/libnccl-net.so",
    ]
