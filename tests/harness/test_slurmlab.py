"""Checks of the slurmlab harness itself, with a small hand-written config.

Each flavor (host: bookworm's Slurm 22.05, chroot: Slurm 26.05 from sid) runs
the same checks; a flavor that is not installed fails under CI=true.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.slurmlab import (
    FLAVORS,
    OVERRIDES,
    ConfigError,
    Flavor,
    LabContext,
    SlurmLab,
    SlurmLabError,
    check_config,
    flavor_version,
    leaked_mounts,
    leftover_pids,
    render_lab_config,
    require_flavor,
)

# Written the way a renderer for Kubernetes would: service DNS names, image
# paths, cgroup v2, real hardware sizes.  The harness must cope with all of it.
SLURM_CONF = """\
# slurm.conf for cluster "selfcheck"
ClusterName=selfcheck
SlurmctldHost=slurm-controller-0(slurm-controller-0.slurm-controller.slurm.svc.cluster.local)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/var/spool/slurm/statesave/jwt_hs256.key
SlurmUser=slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
TopologyPlugin=topology/tree
MailProg=/bin/true
ReturnToService=2
Prolog=/etc/slurm/prolog.sh
Epilog=/etc/slurm/epilog.sh
NodeName=gpu-a-[0-1] NodeAddr=gpu-a-[0-1].slurm-nodes.slurm.svc.cluster.local \\
    CPUs=16 RealMemory=64000 Gres=gpu:h100:2 Feature=pool-a State=UNKNOWN
NodeName=gpu-b-[0-1] CPUs=16 RealMemory=64000 Gres=gpu:h100:2 Feature=pool-b State=UNKNOWN
PartitionName=gpu Nodes=gpu-a-[0-1],gpu-b-[0-1] Default=YES MaxTime=INFINITE State=UP
"""

CONF_FILES = {
    "slurm.conf": SLURM_CONF,
    # Pool a lists its device files; pool b relies on AutoDetect and gets
    # fake files through gpu_files_per_node.
    "gres.conf": "AutoDetect=nvml\nNodeName=gpu-a-[0-1] Name=gpu Type=h100 File=/dev/nvidia[0-1]\n",
    "cgroup.conf": "CgroupPlugin=cgroup/v2\nConstrainCores=yes\nConstrainDevices=yes\nConstrainRAMSpace=yes\n",
    "topology.conf": (
        "SwitchName=leaf-a Nodes=gpu-a-[0-1]\n"
        "SwitchName=leaf-b Nodes=gpu-b-[0-1]\n"
        "SwitchName=spine Switches=leaf-a,leaf-b\n"
    ),
    # The prolog leaves a marker so the test can see it ran from the lab copy.
    "prolog.sh": '#!/bin/sh\ntouch "$(dirname "$0")/../home/prolog-ran-$SLURM_JOB_ID"\nexit 0\n',
    "epilog.sh": "#!/bin/sh\nexit 0\n",
}
GPU_FILES = {"gpu-b-[0-1]": 2}
NODES = ["gpu-a-0", "gpu-a-1", "gpu-b-0", "gpu-b-1"]
README = Path(__file__).resolve().parents[2] / "testing" / "slurmlab" / "README.md"


@pytest.fixture(scope="module", params=FLAVORS)
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmLab]:
    flavor: Flavor = request.param
    require_flavor(flavor)
    the_lab = SlurmLab(CONF_FILES, flavor, tmp_path_factory.mktemp(f"lab-{flavor}"), GPU_FILES)
    with the_lab:
        yield the_lab


def _assert_clean(lab: SlurmLab) -> None:
    assert leftover_pids([lab.workdir], lab.env_tag) == []
    assert leaked_mounts(lab.flavor) == []


# --- the running cluster ----------------------------------------------------


def test_nodes_idle_with_gpus(lab: SlurmLab) -> None:
    assert lab.node_names == NODES
    out = lab.run(["sinfo", "-h", "-N", "-o", "%N %T %G %P"], check=True).stdout
    rows = sorted(line.split() for line in out.splitlines())
    assert rows == [[n, "idle", "gpu:h100:2", "gpu*"] for n in NODES]


def test_version_matches_flavor(lab: SlurmLab) -> None:
    out = lab.run(["sinfo", "-V"], check=True).stdout.strip()
    assert out.split()[-1] == flavor_version(lab.flavor).split()[-1]


def test_topology_tree(lab: SlurmLab) -> None:
    out = lab.run(["scontrol", "show", "topology"], check=True).stdout
    spine = next(line for line in out.splitlines() if "SwitchName=spine" in line)
    assert "Switches=leaf-a,leaf-b" in spine
    assert re.search(r"SwitchName=leaf-a .*Nodes=gpu-a-\[0-1\]", out)
    assert re.search(r"SwitchName=leaf-b .*Nodes=gpu-b-\[0-1\]", out)


def test_only_listed_keys_change(lab: SlurmLab) -> None:
    rendered = (lab.conf_dir / "slurm.conf").read_text()
    for kept in (
        "ClusterName=selfcheck",
        "SelectTypeParameters=CR_Core_Memory",
        "TopologyPlugin=topology/tree",
        "PartitionName=gpu Nodes=gpu-a-[0-1],gpu-b-[0-1] Default=YES MaxTime=INFINITE State=UP",
    ):
        assert f"\n{kept}\n" in rendered
    assert "svc.cluster.local" not in rendered
    assert (lab.conf_dir / "topology.conf").read_text() == CONF_FILES["topology.conf"]
    config = lab.run(["scontrol", "show", "config"], check=True).stdout
    assert re.search(rf"SlurmctldPort\s+=\s+{lab.ctld_port}\b", config)
    assert re.search(r"ProctrackType\s+=\s+proctrack/linuxproc", config)
    node = lab.run(["scontrol", "show", "node", "gpu-b-1"], check=True).stdout
    assert f"Port={lab.node_ports['gpu-b-1']}" in node
    assert "CPUTot=16" in node and "RealMemory=64000" in node


def test_batch_jobs_get_fake_gpus(lab: SlurmLab) -> None:
    # gpu-a-0's files come from gres.conf, gpu-b-0's from gpu_files_per_node.
    jobs = {
        node: lab.sbatch('echo "CVD=$CUDA_VISIBLE_DEVICES"\n', "--gres=gpu:h100:2", "-w", node)
        for node in ("gpu-a-0", "gpu-b-0")
    }
    for node, job in jobs.items():
        assert lab.wait_job(job, timeout=30) == "COMPLETED"
        assert (lab.workdir / "home" / f"slurm-{job}.out").read_text().strip() == "CVD=0,1", node
        assert (lab.workdir / "home" / f"prolog-ran-{job}").exists()


def test_srun_on_every_node_and_switch_locality(lab: SlurmLab) -> None:
    res = lab.run(["srun", "-N4", "--gres=gpu:h100:1", "sh", "-c", "echo $SLURMD_NODENAME"], check=True)
    assert sorted(res.stdout.split()) == NODES
    res = lab.run(["srun", "-N2", "--switches=1", "sh", "-c", "echo $SLURMD_NODENAME"], check=True)
    pools = {name.rsplit("-", 1)[0] for name in res.stdout.split()}
    assert len(res.stdout.split()) == 2 and len(pools) == 1


def test_oversized_request_is_rejected(lab: SlurmLab) -> None:
    res = lab.run(["srun", "-N1", "--gres=gpu:h100:3", "true"], timeout=20)
    assert res.returncode != 0
    assert "Requested node configuration is not available" in res.stderr


def test_wait_job_reports_failure(lab: SlurmLab) -> None:
    first, second = (lab.sbatch("exit 3\n", "-w", "gpu-a-1") for _ in range(2))
    assert lab.wait_job(first, states={"FAILED"}, timeout=30) == "FAILED"
    with pytest.raises(SlurmLabError, match=r"is FAILED"):
        lab.wait_job(second, timeout=30)


def test_restart_controller(lab: SlurmLab) -> None:
    log = lab.workdir / "log" / "slurmctld.log"
    starts = log.read_text().count("slurmctld version")
    lab.restart_controller()
    assert log.read_text().count("slurmctld version") == starts + 1
    lab.run(["srun", "-N4", "true"], check=True)


def test_controller_stopped_then_spawned_under_a_wrapper(lab: SlurmLab) -> None:
    lab.stop_controller()
    assert not lab.ping()
    # The wrapper runs in the flavor's root, as benchmarks/controller_dbd.py's strace does; it leaves a file in
    # the config directory (its path as the flavor sees it, then as the host does) and, like strace, stays
    # slurmctld's parent instead of exec'ing it.
    inside = str(Path(lab.slurm_conf).parent / "wrapped")
    daemon = lab.spawn_controller(wrapper=["sh", "-c", 'touch "$0"; "$@"; exit 0', inside])
    lab.wait_controller()
    assert (lab.conf_dir / "wrapped").exists()
    assert Path(f"/proc/{daemon.pid}/comm").read_text().strip() == "slurmctld"
    assert daemon.pid != daemon.popen.pid
    # Stopping it stops slurmctld itself (SIGTERM to its own PID), not only the wrapper.
    lab.stop_controller()
    assert not Path(f"/proc/{daemon.pid}").exists()
    assert not lab.ping()
    lab.spawn_controller()
    lab.wait_controller()
    lab.wait_nodes(timeout=30, busy_ok=True)
    lab.run(["srun", "-N1", "true"], check=True)


def test_scale_down_and_up(lab: SlurmLab) -> None:
    lab.stop_slurmd("gpu-b-1")
    lab.run(["scontrol", "update", "NodeName=gpu-b-1", "State=DOWN", "Reason=scaled-down"], check=True)
    state = lab.node_states()["gpu-b-1"][0]
    assert state.startswith("DOWN"), state
    res = lab.run(["srun", "-N1", "-w", "gpu-b-1", "--immediate=1", "true"], timeout=20)
    assert res.returncode != 0
    # ReturnToService=2 lets the node back in when its slurmd registers.
    lab.start_slurmd("gpu-b-1", timeout=20)
    lab.run(["srun", "-N1", "-w", "gpu-b-1", "true"], check=True)


def test_jwt_key_is_generated(lab: SlurmLab) -> None:
    token = lab.run(["scontrol", "token", "lifespan=60"], check=True).stdout.strip().partition("=")[2]
    assert lab.run(["sinfo", "-h"], env={"SLURM_JWT": token}).returncode == 0
    bogus = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert lab.run(["sinfo", "-h"], env={"SLURM_JWT": bogus}).returncode != 0


def test_logs(lab: SlurmLab) -> None:
    assert "slurmctld version" in lab.log("slurmctld", lines=10_000)
    assert "slurmd version" in lab.log("gpu-a-0", lines=10_000)


# --- start-up failures, rejection and cleanup -------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_cleanup_after_escaped_job(flavor: Flavor, tmp_path: Path) -> None:
    require_flavor(flavor)
    conf = "ClusterName=mini\nNodeName=n-0 CPUs=1\nPartitionName=p Nodes=ALL Default=YES\nMailProg=/bin/true\n"
    files = {"slurm.conf": conf}
    with SlurmLab(files, flavor, tmp_path / "lab") as lab:
        # A process that leaves the job's process tree, as daemons in jobs do.
        lab.run(["srun", "-N1", "sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 &"], check=True)
        time.sleep(0.2)
        assert leftover_pids([lab.workdir], lab.env_tag), "the escaped sleep should be visible"
    _assert_clean(lab)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_start_failure_raises_with_log(flavor: Flavor, tmp_path: Path) -> None:
    require_flavor(flavor)
    files = {**CONF_FILES, "gres.conf": "NodeName=gpu-a-[0-1] Name=gpu Type=h100 Fiel=/dev/nvidia[0-1]\n"}
    lab = SlurmLab(files, flavor, tmp_path / "lab", {"gpu-b-[0-1]": 2}, start_timeout=15)
    t0 = time.monotonic()
    with pytest.raises(SlurmLabError, match=r"(?s)exited.*gres\.conf"), lab:
        pass
    assert time.monotonic() - t0 < 10
    _assert_clean(lab)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_check_config(flavor: Flavor, tmp_path: Path) -> None:
    require_flavor(flavor)
    good = check_config(CONF_FILES, flavor, tmp_path / "good")
    assert good.accepted and good.answered and good.exit_code is None, good.output
    bad = {**CONF_FILES, "slurm.conf": SLURM_CONF + "SlurmctldPortt=1\n"}
    typo = check_config(bad, flavor, tmp_path / "typo")
    assert not typo.accepted and typo.exit_code not in (None, 0)
    assert "SlurmctldPortt" in typo.output
    bad = {**CONF_FILES, "topology.conf": CONF_FILES["topology.conf"].replace("leaf-b\n", "leaf-c\n")}
    topo = check_config(bad, flavor, tmp_path / "topo")
    assert not topo.accepted and topo.exit_code not in (None, 0)
    assert "leaf-c" in topo.output
    assert leaked_mounts(flavor) == []


# --- the rewriting itself (no Slurm needed) ---------------------------------


def _ctx(nodes: list[str]) -> LabContext:
    return LabContext(
        root="/w",
        hostname="h",
        munge_socket="/m.sock",
        ctld_port=1,
        slurmd_port=2,
        node_ports={n: 10 + i for i, n in enumerate(nodes)},
        cgroup_plugin="autodetect",
    )


def test_rewrite_keeps_unlisted_lines_verbatim() -> None:
    files = {
        "slurm.conf": (
            "SlurmctldHost=a(a.svc)\nSlurmctldHost=b(b.svc)\nSlurmctldAddr=vip.svc\n"
            "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/var/secret/jwt.key,disable_token_creation\n"
            "SchedulerParameters=batch_sched_delay=0   # why not\n"
            "NodeName=DEFAULT CPUs=8\nNodeName=x-[0-1],y Port=9 Weight=3\n"
            "Include /etc/slurm/parts.conf\n"
        ),
        "parts.conf": "PartitionName=p Nodes=x-[0-1],y\n",
    }
    out = render_lab_config(files, _ctx(["x-0", "x-1", "y"]))
    conf = out.files["slurm.conf"]
    assert "SlurmctldHost=h(127.0.0.1)\n" in conf
    assert "a.svc" not in conf.replace("# slurmlab override dropped: SlurmctldHost=b(b.svc)", "")
    assert "SchedulerParameters=batch_sched_delay=0   # why not\n" in conf
    assert "NodeName=DEFAULT CPUs=8\n" in conf
    assert "NodeName=x-1 Weight=3 NodeAddr=127.0.0.1 NodeHostname=h Port=11\n" in conf
    assert "AuthAltParameters=jwt_key=/w/etc/jwt_hs256.key,disable_token_creation\n" in conf
    assert "Include /w/etc/parts.conf\n" in conf
    assert out.files["parts.conf"] == files["parts.conf"]
    assert out.secret_files == ["etc/jwt_hs256.key"]
    assert "CgroupPlugin=autodetect" in out.files["cgroup.conf"]


def test_rewrite_requires_prolog_contents() -> None:
    with pytest.raises(ConfigError, match="prolog"):
        render_lab_config({"slurm.conf": "Prolog=/etc/slurm/prolog.sh\nNodeName=n CPUs=1\n"}, _ctx(["n"]))


def test_readme_documents_every_override() -> None:
    text = README.read_text()
    for override in OVERRIDES:
        for key in override.key.split(", "):
            assert key.split(" ")[0] in text, key


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="only CI must have both flavors")
def test_ci_has_every_flavor() -> None:
    for flavor in FLAVORS:
        require_flavor(flavor)
