"""Rendered Slurm files, started in real slurmctld / slurmd (22.05 on the host, 26.05 in a chroot).

What runs is exactly what ``render_slurm_files`` produces, plus the harness's documented localhost
overrides (testing/slurmlab/README.md). Each flavor gets one lab for the whole scenario.
"""

from __future__ import annotations

import copy
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import render_slurm_files
from testing.slurmlab import HEALTHCHECK_STANDIN, SlurmLab, check_config, require_flavor, stand_in_health_check

# flavor -> (image Slurm version, topology style) the scenario declares
FLAVORS = {"host": ("22.05", "tree"), "chroot": ("25.05", "yaml")}


def small_declaration(slurm_version: str, topology: str) -> dict[str, Any]:
    """Two GPU pools (2 L4 and 8 H100 per node), one 2-host TPU slice, a spare FUTURE record."""
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["image"]["slurmVersion"] = slurm_version
    raw["pools"] = [
        {"name": "l4", "kind": "gpu", "accelerator": {"type": "l4", "count": 2}, "nodes": 2, "maxNodes": 3},
        {"name": "h100", "kind": "gpu", "accelerator": {"type": "h100", "count": 8}, "nodes": 2},
    ]
    raw["tpuSlices"] = [{"name": "v6e", "generation": "v6e", "topology": "2x4"}]
    raw["slurm"] = {"topology": topology}
    raw.pop("operations", None)  # the controller needs slurmrestd, which this lab does not start
    return raw


def conf_files(plan: ClusterPlan) -> dict[str, str]:
    return stand_in_health_check(render_slurm_files(plan).all())


@pytest.fixture(scope="module", params=sorted(FLAVORS))
def lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SlurmLab, ClusterPlan]]:
    flavor = request.param
    require_flavor(flavor)
    plan = build_plan(small_declaration(*FLAVORS[flavor]))
    started = [n for g in plan.groups for n in g.node_names[: g.replicas]]
    with SlurmLab(conf_files(plan), flavor, tmp_path_factory.mktemp(f"lab-{flavor}"), initial_nodes=started) as lab:
        yield lab, plan


def show(lab: SlurmLab, *args: str) -> str:
    return lab.run(["scontrol", "show", *args], check=True).stdout


# Per-GPU defaults of the small declaration's partitions, from its NodeName lines: g2-standard-24 keeps 11
# cores (5 whole cores = 10 CPUs per L4, 85859 // 2 = 42929 MiB), a3-megagpu-8g 100 (12 cores = 24 CPUs per
# H100, 1812703 // 8 = 226587 MiB); the partitions that hold both take the L4's. The TPU one has none.
GPU_DEFAULTS = {
    "l4": (10, 42929),
    "h100": (24, 226587),
    "general": (10, 42929),
    "low": (10, 42929),
    "high": (10, 42929),
}


def field(record: str, key: str) -> str:
    m = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", record)
    assert m, f"no {key}= in {record}"
    return m.group(1)


def alloc_tres(record: str) -> dict[str, str]:
    """A job's allocated TRES: 22.05 calls them TRES=, 26.05 AllocTRES=."""
    m = re.search(r"(?:^|\s)(?:Alloc)?TRES=(\S+)", record)
    assert m, record
    return dict(item.split("=", 1) for item in m.group(1).split(","))


def test_nodes_partitions_gres_and_features_match_the_declaration(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, plan = lab
    visible = set(slurm.run(["sinfo", "-h", "-N", "-o", "%N"], check=True).stdout.split())
    running = {n for g in plan.groups for n in g.node_names[: g.replicas]}
    # The spare record l4-2 exists (maxNodes 3) but stays FUTURE: hidden, never contacted.
    assert visible == running
    assert "l4-2" not in visible
    parts = set(slurm.run(["sinfo", "-h", "-o", "%R"], check=True).stdout.split())
    assert parts == {p.name for p in plan.partitions}
    assert "general*" in slurm.run(["sinfo", "-h", "-o", "%P"], check=True).stdout.split()
    for g in plan.groups:
        node = show(slurm, "node", g.node_names[0])
        assert f"Gres={g.gres}" in node, node
        features = re.search(r"AvailableFeatures=(\S+)", node)
        assert features and set(features.group(1).split(",")) == set(g.features)
        assert f"RealMemory={g.shape.real_memory_mib}" in node


def test_topology_matches_the_groups(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, plan = lab
    topo = show(slurm, "topology")
    for g in plan.groups:
        assert re.search(rf"SwitchName=sw-{g.name} .*Nodes={re.escape(g.hostlist)}", topo), topo
    assert "SwitchName=root" in topo
    if plan.declaration.slurm.topology == "yaml":
        blocks = show(slurm, "topology", "blocks")
        assert "BlockName=bl-v6e-0" in blocks and "Nodes=v6e-0-[0-1]" in blocks, blocks
        assert "Topology=blocks" in show(slurm, "partition", "tpu-v6e")


def test_gpu_batch_job_gets_its_gpus(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, _ = lab
    job = slurm.sbatch(
        'echo "cvd=$CUDA_VISIBLE_DEVICES node=$(hostname)" > gpujob.out\n', "--gres=gpu:l4:2", "-p", "l4"
    )
    slurm.wait_job(job, timeout=60)
    out = slurm.run(["cat", "gpujob.out"], check=True).stdout
    assert "cvd=0,1" in out


def test_prolog_and_slurmd_run_the_health_check_without_the_pod_environment(
    lab: tuple[SlurmLab, ClusterPlan],
) -> None:
    """The rendered prolog calls healthcheck.sh in prolog mode and slurmd names the node for it."""
    slurm, _ = lab
    job = slurm.sbatch("true\n", "-p", "l4")
    slurm.wait_job(job, timeout=60)
    calls = slurm.run(["cat", "healthcheck.log"], check=True).stdout.splitlines()
    assert any(c.startswith("prolog l4-") for c in calls), calls


def test_prolog_failures_requeue_and_gpu_partitions_allocate_whole_nodes(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, plan = lab
    config = show(slurm, "config")
    assert re.search(
        r"^SchedulerParameters\s*=\s*nohold_on_prolog_fail,batch_sched_delay=0,bf_interval=1$", config, re.M
    ), config
    flags = "Alloc,ForceRequeueOnFail" if slurm.flavor == "chroot" else "Alloc"
    assert re.search(rf"^PrologFlags\s*=\s*{flags}$", config, re.M), config
    # A prolog that never ends drains its node and requeues the job instead of holding it for ever.
    assert re.search(r"^PrologEpilogTimeout\s*=\s*120$", config, re.M), config
    for p in plan.partitions:
        record = show(slurm, "partition", p.name)
        if p.name in GPU_DEFAULTS:
            cpus, mem = GPU_DEFAULTS[p.name]
            assert re.search(rf"\sJobDefaults=DefCpuPerGPU={cpus},DefMemPerGPU={mem}\s", record), record
        if p.name in ("l4", "h100"):  # GPU groups alone: whole nodes; 26.05 shows its new Exclusive=NODE
            assert "OverSubscribe=EXCLUSIVE" in record or "Exclusive=NODE" in record, record
        elif p.name in GPU_DEFAULTS:  # the default partitions also hold the TPU slice: shared
            assert "OverSubscribe=NO" in record and "Exclusive=NODE" not in record, record
        else:
            assert "JobDefaults=(null)" in record and "OverSubscribe=NO" in record, record
            assert "Exclusive=NODE" not in record, record
        assert "DefMemPerCPU=" in record, record


def test_gpu_jobs_get_memory_and_cpus_per_gpu_and_whole_nodes(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, _ = lab
    show_own_job = ["sh", "-c", 'scontrol show job -o "$SLURM_JOB_ID"']

    def job(*args: str) -> str:
        return slurm.run(["srun", "-N", "1", *args, *show_own_job], check=True, timeout=60).stdout

    # One task on eight H100s: 8 x 226587 MiB, not one core's DefMemPerCPU; every CPU of the node.
    eight = job("-p", "h100", "--gpus=8")
    assert field(eight, "MemPerTres") == "gpu:226587"
    assert alloc_tres(eight)["mem"] == f"{8 * 226587}M" and alloc_tres(eight)["cpu"] == "204", eight
    # One L4 in the exclusive l4 partition: the whole node, so both GPUs and their memory.
    one = job("-p", "l4", "--gpus=1")
    assert alloc_tres(one)["mem"] == f"{2 * 42929}M" and alloc_tres(one)["cpu"] == "22", one
    # No GPU asked: DefMemPerCPU applies (its own partition's, the L4 node's 85859 // 22).
    plain = job("-p", "l4")
    assert field(plain, "MinMemoryCPU") == "3902M", plain


def test_srun_across_nodes_and_switch_constraint(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, _ = lab
    hosts = slurm.run(
        ["srun", "-N", "4", "-p", "general", "printenv", "SLURMD_NODENAME"], check=True, timeout=60
    ).stdout.split()
    assert len(set(hosts)) == 4
    for _ in range(3):
        pair = slurm.run(
            ["srun", "-N", "2", "--switches=1", "-p", "general", "printenv", "SLURMD_NODENAME"], check=True, timeout=60
        ).stdout.split()
        assert len(set(pair)) == 2
        groups = {n.rsplit("-", 1)[0] for n in pair}
        assert len(groups) == 1, f"--switches=1 spread over {pair}"


def test_tpu_count_only_gres(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, _ = lab
    out = slurm.run(
        ["srun", "-N", "2", "--gres=tpu:v6e:4", "-p", "tpu-v6e", "printenv", "SLURMD_NODENAME"], check=True, timeout=60
    ).stdout.split()
    assert sorted(out) == ["v6e-0-0", "v6e-0-1"]


def test_scale_down_and_up_changes_no_config(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, _ = lab
    before = slurm.slurm_conf
    # What the worker's preStop hook does (drain.sh), then the pod is gone.
    slurm.run(["scontrol", "update", "NodeName=h100-1", "State=DRAIN", "Reason=pod terminating"], check=True)
    slurm.stop_slurmd("h100-1")
    slurm.run(["scontrol", "update", "NodeName=h100-1", "State=FUTURE"], check=True)
    visible = slurm.run(["sinfo", "-h", "-N", "-o", "%N"], check=True).stdout.split()
    assert "h100-1" not in visible, "a scaled-down node must leave no record in sinfo"
    # Scale up: a new pod's slurmd registers and the FUTURE record becomes usable, spare records too.
    slurm.start_slurmd("h100-1")
    slurm.start_slurmd("l4-2")
    states = slurm.node_states()
    assert SlurmLab.is_idle(states["h100-1"][0]) and SlurmLab.is_idle(states["l4-2"][0]), states
    assert slurm.slurm_conf == before


def test_jobs_survive_a_controller_restart(lab: tuple[SlurmLab, ClusterPlan]) -> None:
    slurm, _ = lab
    running = slurm.sbatch("sleep 30\n", "-p", "h100", "-N", "2", "--exclusive")
    deadline = time.monotonic() + 30
    while "JobState=RUNNING" not in show(slurm, "job", str(running)):
        assert time.monotonic() < deadline, show(slurm, "job", str(running))
        time.sleep(0.5)
    queued = slurm.sbatch("true\n", "-p", "h100", "-N", "2", "--exclusive")
    assert "JobState=PENDING" in show(slurm, "job", str(queued))
    slurm.restart_controller(wait=False)
    # What each worker's entrypoint does every 30 s (rejoin.sh): a node slurmctld no longer lists
    # gets its slurmd re-registered with SIGHUP. 22.05 needs this for idle nodes; 26.05 does not.
    rejoin = str(slurm.conf_dir / "scripts" / "rejoin.sh")
    for name in slurm._running_nodes():
        if slurm.run(["sh", rejoin, name]).stdout.strip() == "rejoin":
            slurm.signal_slurmd(name, signal.SIGHUP)
    slurm.wait_nodes(busy_ok=True)
    assert "JobState=RUNNING" in show(slurm, "job", str(running))
    assert re.search(r"JobState=(PENDING|RUNNING|COMPLETED)", show(slurm, "job", str(queued)))
    slurm.run(["scancel", str(running)], check=True)
    slurm.wait_job(queued, timeout=60)


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
@pytest.mark.parametrize("stack", ["local", "gcp", "aws"])
def test_shipped_stacks_are_accepted_by_slurmctld(flavor: str, stack: str, tmp_path: Path) -> None:
    require_flavor(flavor)  # type: ignore[arg-type]
    raw: dict[str, Any] = copy.deepcopy(load_declaration(stack))
    # Without a slurmdbd to answer, slurmctld 22.05 stops at start and 26.05 waits: the accounting keys are
    # read by real slurmctld with a slurmdbd in tests/slurm/test_accounting_conf.py and tests/accounting.
    raw.get("slurm", {}).pop("accounting", None)
    version, topology = FLAVORS[flavor]
    if flavor == "host":
        raw["image"]["slurmVersion"], raw.setdefault("slurm", {})["topology"] = version, topology
    verdict = check_config(conf_files(build_plan(raw)), flavor, tmp_path / "ctld")  # type: ignore[arg-type]
    assert verdict.accepted, f"slurmctld rejected the {stack} config (rc {verdict.exit_code}):\n{verdict.output}"


# The release each flavor runs, for the keys rendered by release (the chroot's declarations say 25.05).
RUNS = {"host": "22.05", "chroot": "26.05"}


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_a_one_minute_health_interval_leaves_no_error_in_the_log(flavor: str, tmp_path: Path) -> None:
    """26.05's HealthCheckTimeout (60 s, left unset) must be below HealthCheckInterval, else every daemon logs an
    error at each start: the shortest interval a declaration may have, 61 s, passes on both releases."""
    require_flavor(flavor)  # type: ignore[arg-type]
    raw = small_declaration(RUNS[flavor], FLAVORS[flavor][1])
    raw["health"] = {"intervalSeconds": 61}
    verdict = check_config(conf_files(build_plan(raw)), flavor, tmp_path / "ctld")  # type: ignore[arg-type]
    assert verdict.accepted and verdict.answered, verdict.output
    assert "HealthCheck" not in verdict.output, verdict.output


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_a_broken_file_is_rejected(flavor: str, tmp_path: Path) -> None:
    require_flavor(flavor)  # type: ignore[arg-type]
    files = conf_files(build_plan(small_declaration(*FLAVORS[flavor])))
    files["slurm.conf"] = files["slurm.conf"].replace("SelectType=", "SelectTyp=")
    verdict = check_config(files, flavor, tmp_path / "bad")  # type: ignore[arg-type]
    assert not verdict.accepted and verdict.exit_code != 0
    assert "SelectTyp" in verdict.output


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_partition_time_limits_as_slurmctld_reads_them(flavor: str, tmp_path: Path) -> None:
    """Every form the declaration accepts starts slurmctld; the form it refuses ("48h") stops slurmctld."""
    require_flavor(flavor)  # type: ignore[arg-type]
    raw = small_declaration(*FLAVORS[flavor])
    forms = ["90", "30:00", "12:00:00", "2-00", "2-06:30", "1-00:00:00", "UNLIMITED", "infinite"]
    raw.setdefault("slurm", {})["partitions"] = [
        {"name": f"t{i}", "pools": ["*"], "maxTime": form, "default": i == 0} for i, form in enumerate(forms)
    ]
    files = conf_files(build_plan(raw))
    verdict = check_config(files, flavor, tmp_path / "good")  # type: ignore[arg-type]
    assert verdict.accepted, f"slurmctld rejected the time limits {forms}:\n{verdict.output}"
    files["slurm.conf"] = files["slurm.conf"].replace("MaxTime=90", "MaxTime=48h")
    verdict = check_config(files, flavor, tmp_path / "bad")  # type: ignore[arg-type]
    assert not verdict.accepted, "slurmctld accepted MaxTime=48h, which the declaration refuses"


# The health check fails the next prolog once the test arms it, on whichever node runs it, and says where.
FAIL_NEXT_PROLOG = (
    HEALTHCHECK_STANDIN
    + """home="$(dirname "$0")/../../home"
if [ "${1:-}" = prolog ] && rm "$home/fail-next-prolog" 2>/dev/null; then
  echo "$SLURMD_NODENAME" > "$home/prolog-failed-on"
  exit 3
fi
"""
)


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_a_job_whose_prolog_fails_runs_elsewhere(flavor: str, tmp_path: Path) -> None:
    """A failing prolog drains the node and requeues the job, not held, so it starts on another node."""
    require_flavor(flavor)  # type: ignore[arg-type]
    plan = build_plan(small_declaration(*FLAVORS[flavor]))
    files = conf_files(plan)
    files["scripts/healthcheck.sh"] = FAIL_NEXT_PROLOG
    started = [n for g in plan.groups for n in g.node_names[: g.replicas]]
    with SlurmLab(files, flavor, tmp_path / "lab", initial_nodes=started) as slurm:  # type: ignore[arg-type]
        home = slurm.workdir / "home"

        def requeued(job: int) -> str:
            deadline = time.monotonic() + 30
            while not re.search(r" JobState=PENDING .* Restarts=1 ", record := show(slurm, "job", "-o", str(job))):
                assert time.monotonic() < deadline, record
                time.sleep(0.2)
            return record

        (home / "fail-next-prolog").touch()
        job = slurm.sbatch("true\n", "-p", "l4")
        record = requeued(job)
        bad = (home / "prolog-failed-on").read_text().strip()
        # Without nohold_on_prolog_fail: Reason=launch_failed_requeued_held Priority=0.
        assert field(record, "JobState") == "PENDING" and field(record, "Reason") == "BeginTime", record
        assert field(record, "Priority") != "0", record
        state, reason = slurm.node_states()[bad]
        assert "DRAIN" in state and "Prolog error" in reason, (state, reason)
        # The requeue delay (cred_expire, 120 s) is all that keeps it from starting at once.
        slurm.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
        slurm.wait_job(job, timeout=60)
        ran_on = field(show(slurm, "job", "-o", str(job)), "NodeList")
        assert ran_on.startswith("l4-") and ran_on != bad

        # A --no-requeue job: ForceRequeueOnFail (23.02+) requeues it; 22.05 has no such flag and cancels it.
        (home / "fail-next-prolog").touch()
        job = slurm.sbatch("true\n", "-p", "h100", "--no-requeue")
        if flavor == "chroot":
            record = requeued(job)
            assert field(record, "Reason") == "BeginTime" and field(record, "Priority") != "0", record
        else:
            assert slurm.wait_job(job, states={"CANCELLED"}) == "CANCELLED"


def test_block_topology_on_modern_slurm(tmp_path: Path) -> None:
    """topology/block from topology.conf: TPU slices and pools as blocks, a 2-node job inside one block."""
    require_flavor("chroot")
    plan = build_plan(small_declaration("25.05", "block"))
    started = [n for g in plan.groups for n in g.node_names[: g.replicas]]
    with SlurmLab(conf_files(plan), "chroot", tmp_path / "block", initial_nodes=started) as slurm:
        topo = show(slurm, "topology")
        for g in plan.groups:
            assert f"BlockName=bl-{g.name} " in topo, topo
        pair = slurm.run(["srun", "-N", "2", "-p", "h100", "printenv", "SLURMD_NODENAME"], check=True, timeout=60)
        assert sorted(pair.stdout.split()) == ["h100-0", "h100-1"]


def test_jwt_auth_for_the_rest_api_on_modern_slurm(tmp_path: Path) -> None:
    """With restApi, slurmctld loads auth/jwt from the rendered slurm.conf and issues tokens."""
    require_flavor("chroot")
    raw = small_declaration("25.05", "yaml")
    raw["slurm"]["restApi"] = True
    plan = build_plan(raw)
    started = [n for g in plan.groups for n in g.node_names[: g.replicas]]
    with SlurmLab(conf_files(plan), "chroot", tmp_path / "jwt", initial_nodes=started) as slurm:
        token = slurm.run(["scontrol", "token", "username=root"], check=True).stdout
        assert token.startswith("SLURM_JWT=") and len(token.strip()) > 40, token
