"""slonk-health as a real slurmd's HealthCheckProgram: it drains a bad node itself and keeps a person's drain.

Slurm ignores HealthCheckProgram's exit code and runs it without arguments, with only SLURMD_NODENAME
in its environment; so the program runs through a one-line wrapper and must find its node and drain
it alone. The GPU answers are recordings from a real H100, swapped per node while the lab runs.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from slonk_infra.health import DRAIN_REASON_PREFIX
from testing.nvml import PROFILE_ENV, build, write_profile
from testing.slurmlab import SlurmLab, require_flavor

ROOT = Path(__file__).resolve().parents[2]
IDLE = ROOT / "tests" / "data" / "nvml" / "h100-idle.json"


def _pending_remap(path: Path) -> None:
    rec = json.loads(IDLE.read_text())
    rec["devices"]["0"]["remappedRows"] = {"value": [0, 1, 1, 0]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec))
    tmp.replace(path)


def _wait(
    what: str, lab: SlurmLab, node: str, predicate: Callable[[tuple[str, str]], bool], timeout: float = 30.0
) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    state = ("", "")
    while time.monotonic() < deadline:
        state = lab.node_states().get(node, ("MISSING", ""))
        if predicate(state):
            return state
        time.sleep(0.3)
    raise AssertionError(f"{what}: {node} is {state}\n{lab.log(f'{node}', 40)}")


def test_health_check_program_drains_its_node_with_the_prefixed_reason(tmp_path: Path) -> None:
    require_flavor("host")
    scontrol = shutil.which("scontrol")
    assert scontrol is not None
    work = tmp_path / "health"
    work.mkdir()
    for node in ("n-0", "n-1", "n-2"):
        shutil.copy(IDLE, work / f"{node}.json")
    spec = work / "health.json"
    spec.write_text('{"gpu": {"count": 1}, "disk": {"scratchPath": "/", "homePath": "/"}}')
    wrapper = (
        "#!/bin/sh\n"
        "# HealthCheckProgram takes no arguments: the image installs a wrapper like this one.\n"
        f'SLURM_CONF="${{0%/*}}/slurm.conf" PYTHONPATH={ROOT} exec {sys.executable} -m slonk_infra.health \\\n'
        f"  --mode interval --drain --spec {spec} --scontrol {scontrol} \\\n"
        f'  --nvml-replay {work}/"$SLURMD_NODENAME".json --report-file {work}/"$SLURMD_NODENAME".report.json\n'
    )
    conf = (
        "ClusterName=health\nNodeName=n-[0-2] CPUs=1\nPartitionName=p Nodes=ALL Default=YES\nMailProg=/bin/true\n"
        "HealthCheckProgram=/usr/local/sbin/slonk-health-check\nHealthCheckInterval=1\nHealthCheckNodeState=ANY\n"
    )
    files = {"slurm.conf": conf, "slonk-health-check": wrapper}
    with SlurmLab(files, "host", tmp_path / "lab") as lab:
        # The program ran on each node (healthy so far) and named the node slurmd gave it.
        for node in ("n-0", "n-1", "n-2"):
            report = work / f"{node}.report.json"
            deadline = time.monotonic() + 20
            while not report.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert report.exists(), lab.log(node, 40)
            assert json.loads(report.read_text())["node"] == node

        lab.run([scontrol, "update", "nodename=n-2", "state=drain", "reason=fan swap, ticket 42"], check=True)
        _pending_remap(work / "n-1.json")
        _pending_remap(work / "n-2.json")

        _, reason = _wait(
            "the failing node is drained", lab, "n-1", lambda s: DRAIN_REASON_PREFIX in s[1] and "DRAIN" in s[0]
        )
        assert reason.startswith("slonk-health: gpu-remapped-rows: GPU 0: remapped rows pending a GPU reset"), reason

        # n-2 fails too, but a person drained it first: their reason stays.
        deadline = time.monotonic() + 20
        outcome: dict[str, object] = {}
        while time.monotonic() < deadline:
            report = json.loads((work / "n-2.report.json").read_text())
            outcome = report.get("drain") or {}
            if report["action"] == "replace-machine":
                break
            time.sleep(0.3)
        assert outcome.get("note") == "already drained by someone else: fan swap, ticket 42", outcome
        assert lab.node_states()["n-2"][1].startswith("fan swap, ticket 42")

        # The healthy node stays in service.
        assert lab.is_idle(lab.node_states()["n-0"][0])


def test_a_gpu_whose_nvml_never_answers_is_drained_before_slurmd_stops_the_check(tmp_path: Path) -> None:
    """slurmd stops a HealthCheckProgram run after 60 s and a stopped run drains nothing: the run must give up
    on a call that never returns and drain first. Here NVML (the stand-in, loaded as on a GPU node) never
    answers for n-1's GPU 0."""
    require_flavor("host")
    scontrol = shutil.which("scontrol")
    assert scontrol is not None
    work = tmp_path / "health"
    lib_dir = build(work / "lib").parent
    for node in ("n-0", "n-1"):
        write_profile(work / f"{node}.profile", gpus=1)
    spec = work / "health.json"
    spec.write_text('{"gpu": {"count": 1, "xidWaitMs": 100}, "disk": {"scratchPath": null, "homePath": null}}')
    wrapper = (
        "#!/bin/sh\n"
        f'export LD_LIBRARY_PATH={lib_dir} {PROFILE_ENV}={work}/"$SLURMD_NODENAME".profile\n'
        f'SLURM_CONF="${{0%/*}}/slurm.conf" PYTHONPATH={ROOT} exec {sys.executable} -m slonk_infra.health \\\n'
        f"  --mode interval --drain --publish --deadline 28 --nvml-call-limit 2 --state-dir {work}/state \\\n"
        f"  --spec {spec} --scontrol {scontrol} \\\n"
        f'  --report-file {work}/"$SLURMD_NODENAME".report.json\n'
    )
    conf = (
        "ClusterName=health\nNodeName=n-[0-1] CPUs=1\nPartitionName=p Nodes=ALL Default=YES\nMailProg=/bin/true\n"
        "HealthCheckProgram=/usr/local/sbin/slonk-health-check\nHealthCheckInterval=1\nHealthCheckNodeState=ANY\n"
    )
    with SlurmLab({"slurm.conf": conf, "slonk-health-check": wrapper}, "host", tmp_path / "lab") as lab:
        hung = work / "hung.profile"  # written whole, then moved: a run never reads half a profile
        write_profile(hung, gpus=1, faults={0: ["hang-nvmlDeviceGetTotalEccErrors"]})
        hung.replace(work / "n-1.profile")
        _, reason = _wait(
            "the node whose NVML never answers is drained",
            lab,
            "n-1",
            lambda s: DRAIN_REASON_PREFIX in s[1] and "DRAIN" in s[0],
            timeout=40,
        )
        assert reason.startswith(
            "slonk-health: gpu-ecc: GPU 0: NVML eccErrors.uncorrected.volatile did not answer within 2 s"
        ), reason
        report = json.loads((work / "n-1.report.json").read_text())
        assert report["action"] == "replace-machine" and report["drain"]["done"] is True
        assert report["durationMs"] < 28_000  # concluded before the run's deadline, inside slurmd's 60 s
        comment = lab.run([scontrol, "show", "node", "n-1"], check=True).stdout
        assert '"action":"replace-machine"' in comment  # the verdict published for the controller
        assert lab.is_idle(lab.node_states()["n-0"][0])
