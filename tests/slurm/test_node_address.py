"""A replaced worker pod is reached at its new IP: slurm.conf per version, the pod's IP in its env, and
slurmd.sh setting NodeAddr before slurmd registers (run with ``sh`` against stub commands).

The container tier (testing/e2e, scenario 3) proves the same on real pods: a worker lost without its
preStop comes back on a new IP and runs the next job sent to it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from slonk_infra.clouds import build_plan
from slonk_infra.kube import worker
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.slurm.conf import render_slurm_conf
from slonk_infra.slurm.scripts import SETTINGS, fill, source
from tests.support import declaration


def _conf(version: str) -> str:
    raw = declaration("local")
    raw["image"]["slurmVersion"] = version
    return render_slurm_conf(build_plan(raw))


def test_no_addr_cache_only_where_slurm_still_has_the_option() -> None:
    assert "CommunicationParameters=NoAddrCache" in _conf("22.05").splitlines()
    assert "CommunicationParameters=NoAddrCache" in _conf("23.02").splitlines()
    # 23.11 removed it and logs an error for it.
    assert "NoAddrCache" not in _conf("23.11")
    assert "NoAddrCache" not in _conf("26.05")


def test_worker_pod_knows_its_own_ip() -> None:
    plan = build_plan(declaration("local"))
    sts = worker.statefulset(plan, plan.groups[0], KubeInputs(pin_to_pools=False))
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SLONK_POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _entrypoint_tail(tmp_path: Path, calls: Path) -> str:
    """slurmd.sh from the address refresh on (before it: the munge socket), with the health check a stub
    that records its call and the task environment written under ``tmp_path``."""
    text = fill("slurmd.sh", source("slurmd.sh"), {**SETTINGS, "TASK_ENV_FILE": str(tmp_path / "task-env")})
    (tmp_path / "healthcheck.sh").write_text(f'echo "healthcheck $*" >> {calls}\n')
    head = f'set -eu\nhere={tmp_path}\nnode="$(hostname)"\n'
    head += 'export SLURM_CONF_SERVER="${SLONK_CONTROLLER}:' + SETTINGS["SLURMCTLD_PORT"] + '"\n'
    return head + text[text.index("tries=0") :]


def test_entrypoint_sets_the_address_before_slurmd_starts(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "hostname", "echo cpu-a-0\n")
    # The first two updates fail as with a controller that does not accept this pod's munge key yet.
    _stub(
        bin_dir,
        "scontrol",
        f'echo "scontrol $* conf=$SLURM_CONF_SERVER" >> {calls}\n'
        f'n=$(grep -c "^scontrol" {calls})\n'
        '[ "$n" -gt 2 ] || { echo "scontrol: error: Protocol authentication error" >&2; exit 1; }\n'
        # slurmctld still counts the node up: its previous pod was lost without the preStop
        '[ "$1" = show ] && echo "NodeName=cpu-a-0 Arch=x86_64 State=IDLE ThreadsPerCore=2"\n'
        "exit 0\n",
    )
    _stub(bin_dir, "catatonit", f'echo "catatonit $*" >> {calls}\n')
    # 2 s retries pass at once; the 30 s rejoin loop ends at once (nothing is left running).
    _stub(bin_dir, "sleep", '[ "$1" != 30 ]\n')
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLONK_CONTROLLER": "ctl.example", "SLONK_POD_IP": "10.9.8.7"}
    proc = subprocess.run(
        ["sh", "-c", _entrypoint_tail(tmp_path, calls)], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    update = "scontrol update NodeName=cpu-a-0 NodeAddr=10.9.8.7 NodeHostname=cpu-a-0 conf=ctl.example:6817"
    # The address first, the node DOWN while this pod boots (slurmctld counted it up), then the boot health
    # check (seconds with the GPU checks), then slurmd: no job is launched at the lost pod's IP meanwhile.
    down = "scontrol update NodeName=cpu-a-0 State=DOWN Reason=slonk: pod replaced, slurmd not registered yet"
    assert lines == [
        update,
        update,
        update,
        "scontrol show node -o cpu-a-0 conf=ctl.example:6817",
        f"{down} conf=ctl.example:6817",
        "healthcheck boot",
        "catatonit -- slurmd -D --conf-server ctl.example:6817 -N cpu-a-0",
    ]
    # The wait is explained once, and an authentication failure names the munge key.
    assert proc.stderr.count("cannot set cpu-a-0's address") == 1
    assert "munge key" in proc.stderr
