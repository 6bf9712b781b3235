"""The operations controller end to end: real slurmctld + slurmrestd, a fake Kubernetes API, real clients.

Each flavor gets one Slurm lab for the module, rendered from a declaration with ``restApi`` and a
256-record pool: 4 nodes run slurmd (pods ``h100-0`` .. ``h100-3`` on machines ``gke-h100-*`` in
the fake API); the other records stay FUTURE (hidden) except in the steady-state test, which shows
200 of them as DOWN "no pod" so its list calls carry hundreds of nodes. (Only there: slurmctld keeps
pinging unreachable DOWN nodes, and with 200 of them a resumed node waits ~20 s for its own ping.)
22.05 (host) reads through REST v0.0.38 and changes node states with the
scontrol fallback; 26.05 (chroot) uses REST for both. Each test starts from all four nodes idle and
a fresh fake API, controller memory and state directory.

The StatefulSet controller is played by :meth:`Env.recreate`: after the controller deletes a pod,
the node's slurmd is restarted and a new pod object appears (no preStop hook runs, so the Slurm
drain survives and the controller itself must lift it).
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.ops.config import OperationsSpec, RemediationSpec
from slonk_infra.ops.controller import Controller, TickReport
from slonk_infra.ops.main import main, serve
from slonk_infra.ops.metrics import Metrics
from slonk_infra.ops.model import SlurmNode
from slonk_infra.ops.records import JobRecord, StateStore
from slonk_infra.ops.slurm_rest import ScontrolWriter, SlurmError, SlurmRest, TokenSigner
from slonk_infra.slurm import render_slurm_files
from slonk_infra.vocab import (
    APP,
    COMPONENT,
    CORDONED_BY,
    GROUP_LABEL,
    HEALTH,
    NAME_LABEL,
    SLURM_REASON,
    SLURM_STATE,
    WORKER_COMPONENT,
)
from testing.fakekube import FakeKube
from testing.slurmlab import RestD, SlurmLab, SlurmLabError, free_ports, require_flavor, stand_in_health_check
from tests.ops.test_sync import verdict

NS = "slurm"
STARTED = [f"h100-{i}" for i in range(4)]
NO_POD = "h100-[10-209]"
FLAVORS = {"host": ("22.05", "tree"), "chroot": ("25.05", "yaml")}
WORKER_LABELS = {NAME_LABEL: APP, COMPONENT: WORKER_COMPONENT, GROUP_LABEL: "h100"}


def declaration(slurm_version: str, topology: str) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["image"]["slurmVersion"] = slurm_version
    raw["pools"] = [
        {"name": "h100", "kind": "gpu", "accelerator": {"type": "h100", "count": 8}, "nodes": 4, "maxNodes": 256}
    ]
    raw["tpuSlices"] = []
    raw["slurm"] = {"topology": topology, "restApi": True}
    return raw


@dataclass
class Cluster:
    lab: SlurmLab
    rest: RestD


@pytest.fixture(scope="module", params=sorted(FLAVORS))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    flavor = request.param
    require_flavor(flavor)
    plan = build_plan(declaration(*FLAVORS[flavor]))
    files = stand_in_health_check(render_slurm_files(plan).all())
    work = tmp_path_factory.mktemp(f"ops-{flavor}")
    with SlurmLab(files, flavor, work / "lab", initial_nodes=STARTED) as lab, RestD(lab) as rest:
        yield Cluster(lab, rest)


@dataclass
class Env:
    """One test's world: the lab, a fresh fake API with the four workers, a fresh controller."""

    lab: SlurmLab
    kube: FakeKube
    controller: Controller
    state_dir: Path
    deleted: list[str] = field(default_factory=list)
    reports: list[TickReport] = field(default_factory=list)

    def tick(self) -> TickReport:
        report = self.controller.tick()
        assert report.slurm_ok and report.kube_ok and not report.errors, report.errors
        self.reports.append(report)
        return report

    def until(self, what: str, check: Callable[[], bool], ticks: int = 20, pause: float = 0.2) -> int:
        """Ticks until ``check()`` holds; returns how many ticks it took."""
        for n in range(1, ticks + 1):
            self.tick()
            if check():
                return n
            time.sleep(pause)
        states = {n.name: (n.state_text, n.reason) for n in self.controller.slurm.list_nodes() if n.name in STARTED}
        raise AssertionError(f"{what}: not reached after {ticks} ticks; decisions {self.decisions()}; Slurm {states}")

    def decisions(self) -> list[str]:
        plan = self.reports[-1].plan if self.reports else None
        return [f"{d.what} {d.node}: {d.why}" for d in plan.decisions] if plan else []

    def slurm(self, name: str) -> SlurmNode:
        return next(n for n in self.controller.slurm.list_nodes() if n.name == name)

    def scontrol(self, *args: str) -> None:
        self.lab.run(["scontrol", *args], check=True)

    def node(self, name: str) -> dict[str, Any]:
        return self.kube.node(f"gke-{name}")

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.kube.pod(NS, name)

    def recreate(self, name: str, health: str | None = None) -> None:
        """The StatefulSet brings the deleted pod back on its machine: slurmd restarts, a new pod appears."""
        assert name in self.deleted, f"{name} was not deleted"
        self.lab.stop_slurmd(name)
        self.lab.start_slurmd(name, wait=False)
        self.kube.add_pod(name, NS, f"gke-{name}", labels=WORKER_LABELS, annotations={HEALTH: health} if health else {})


def reset_slurm(lab: SlurmLab) -> None:
    """All four started nodes idle and undrained, their slurmd running, no jobs."""
    ids = lab.run(["squeue", "-h", "-o", "%i"]).stdout.split()
    if ids:
        lab.run(["scancel", *ids])
    for name in STARTED:
        with contextlib.suppress(SlurmLabError):  # already running
            lab.start_slurmd(name, wait=False)
    drained = [n for n, (state, _) in lab.node_states().items() if n in STARTED and "DRAIN" in state]
    if drained:
        lab.run(["scontrol", "update", f"NodeName={','.join(drained)}", "State=RESUME"], check=True)
    lab.wait_nodes(STARTED, timeout=60)


@contextlib.contextmanager
def make_env(cluster: Cluster, tmp_path: Path, spec: OperationsSpec) -> Iterator[Env]:
    reset_slurm(cluster.lab)
    with FakeKube() as kube:
        for name in STARTED:
            kube.add_node(f"gke-{name}", labels={"cloud.google.com/gke-nodepool": "h100"})
            kube.add_pod(name, NS, f"gke-{name}", labels=WORKER_LABELS)
        flavor = cluster.lab.flavor
        scontrol = None
        if flavor == "host":
            scontrol = ScontrolWriter(env={"SLURM_CONF": str(cluster.lab.conf_dir / "slurm.conf")})
        slurm = SlurmRest(cluster.rest.url, TokenSigner(cluster.rest.jwt_key, "root"), scontrol=scontrol)
        state = tmp_path / "state"
        state.mkdir()
        controller = Controller(
            spec, slurm, kube.client(NS), StateStore(state), JobRecord(state / "jobs.jsonl"), Metrics()
        )
        env = Env(cluster.lab, kube, controller, state)
        kube.on_delete = lambda obj: env.deleted.append(obj["metadata"]["name"])
        yield env


@pytest.fixture
def env(cluster: Cluster, tmp_path: Path) -> Iterator[Env]:
    with make_env(cluster, tmp_path, OperationsSpec()) as e:
        yield e


def test_steady_state_costs_one_list_call_per_kind(env: Env) -> None:
    env.scontrol("update", f"NodeName={NO_POD}", "State=DOWN", "Reason=no pod")
    try:
        first = env.tick()
        report = env.tick()
        memo = env.controller.memo
        # Nothing the records read changed (the four slurmd's load and memory figures may have): no node
        # was looked at again, and the records of both sides were the last tick's very objects.
        assert (memo.visited, memo.reused) == (0, 4)
        assert env.controller.slurm.list_nodes() is env.controller.slurm.list_nodes()
    finally:
        env.scontrol("update", f"NodeName={NO_POD}", "State=FUTURE")
    assert report.nodes == 204 and report.pods == 4
    assert report.slurm_calls == {"list_nodes": 1, "list_jobs": 1}
    assert report.kube_calls == {"list_nodes": 1, "list_pods": 1}
    assert first.plan is not None and first.plan.empty and report.plan is not None and report.plan.empty
    assert all(env.node(n)["metadata"]["annotations"] == {} for n in STARTED)
    text = env.controller.metrics.render().decode()
    assert 'slonk_slurm_nodes{reason="no pod",state="DOWN"} 200.0' in text
    assert 'slonk_slurm_nodes{reason="none",state="IDLE"} 4.0' in text
    assert 'slonk_gpus{status="unhealthy"} 1600.0' in text


def test_a_slurm_drain_cordons_its_machine_and_the_resume_uncordons_it(env: Env) -> None:
    env.tick()
    env.scontrol("update", "NodeName=h100-1", "State=DRAIN", "Reason=swap DIMM 3")
    env.until("cordoned", lambda: env.node("h100-1")["spec"].get("unschedulable") is True)
    node = env.node("h100-1")
    assert node["metadata"]["annotations"][CORDONED_BY] == "slonk"
    assert node["metadata"]["annotations"][SLURM_STATE] == "h100-1=IDLE+DRAIN"
    pod = env.pod("h100-1")
    assert pod is not None and pod["metadata"]["annotations"][SLURM_REASON] == "swap DIMM 3"
    assert env.slurm("h100-1").reason == "swap DIMM 3"  # untouched
    env.scontrol("update", "NodeName=h100-1", "State=RESUME")
    env.until("uncordoned", lambda: not env.node("h100-1")["spec"].get("unschedulable"))
    assert CORDONED_BY not in env.node("h100-1")["metadata"]["annotations"]


def test_a_cordon_drains_and_the_uncordon_resumes(env: Env) -> None:
    env.tick()
    env.kube.set(env.kube.nodes["gke-h100-2"], "spec.unschedulable", True)
    env.until("drained", lambda: env.slurm("h100-2").drained)
    assert env.slurm("h100-2").reason == "slonk: kubernetes node cordoned"
    env.kube.set(env.kube.nodes["gke-h100-2"], "spec.unschedulable", None)
    env.until("resumed", lambda: not env.slurm("h100-2").drained)


def test_termination_taints_drain_with_their_name(env: Env) -> None:
    env.tick()
    taint = {"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}
    env.kube.set(env.kube.nodes["gke-h100-3"], "spec.taints", [taint])
    env.until("drained", lambda: env.slurm("h100-3").drained)
    assert env.slurm("h100-3").reason == "slonk: node terminating (aws-node-termination-handler/spot-itn)"


def test_a_drain_set_by_a_person_is_never_cleared(env: Env) -> None:
    env.tick()
    env.kube.set(env.kube.nodes["gke-h100-0"], "spec.unschedulable", True)
    env.until("drained", lambda: env.slurm("h100-0").drained)
    env.scontrol("update", "NodeName=h100-0", "State=DRAIN", "Reason=bob: do not touch")
    env.kube.set(env.kube.nodes["gke-h100-0"], "spec.unschedulable", None)
    for _ in range(4):
        env.tick()
    assert env.slurm("h100-0").drained and env.slurm("h100-0").reason == "bob: do not touch"


def test_failing_health_drains_restarts_the_pod_and_the_node_comes_back(env: Env) -> None:
    env.tick()
    pod = env.kube.pods[(NS, "h100-1")]
    env.kube.set(pod, "metadata.annotations", {HEALTH: verdict("restart-pod", "leftover process 4242")})
    env.until("pod deleted", lambda: env.deleted == ["h100-1"])
    assert env.slurm("h100-1").reason == "slonk: remediation restart-pod: gpu-ecc: leftover process 4242"
    env.recreate("h100-1", verdict())
    env.until("back in service", lambda: not env.slurm("h100-1").out and env.slurm("h100-1").responding)
    assert env.deleted == ["h100-1"]
    assert env.controller.state.active == {}
    saved = json.loads((env.state_dir / "state.json").read_text())
    assert list(saved["history"]) == [json.loads(verdict())["fingerprint"]["value"]]


def test_a_machine_that_fails_again_is_kept_out(env: Env) -> None:
    env.tick()
    pod = env.kube.pods[(NS, "h100-2")]
    env.kube.set(pod, "metadata.annotations", {HEALTH: verdict("restart-pod", "xid 13")})
    env.until("pod deleted", lambda: env.deleted == ["h100-2"])
    env.recreate("h100-2", verdict("restart-pod", "xid 13 again"))
    env.until("kept out", lambda: "repeat offender" in env.slurm("h100-2").reason)
    for _ in range(3):
        env.tick()
    assert env.deleted == ["h100-2"]  # no second restart
    assert env.slurm("h100-2").drained
    assert env.node("h100-2")["spec"].get("unschedulable") is True


def test_the_rate_limit_spaces_remediations(cluster: Cluster, tmp_path: Path) -> None:
    spec = OperationsSpec(
        remediation=RemediationSpec(max_actions_per_window=1, window_seconds=3600, max_pool_fraction=1)
    )
    with make_env(cluster, tmp_path, spec) as env:
        env.tick()
        for name in ("h100-0", "h100-1", "h100-3"):
            env.kube.set(
                env.kube.pods[(NS, name)],
                "metadata.annotations",
                {HEALTH: verdict("restart-pod", "x", fp=f"sha256:{name}")},
            )
        env.until("one deleted", lambda: len(env.deleted) == 1)
        for _ in range(3):
            env.tick()
        assert len(env.deleted) == 1
        waiting = [n for n in ("h100-0", "h100-1", "h100-3") if n not in env.deleted]
        assert all(env.slurm(n).reason.startswith("slonk: health restart-pod") for n in waiting)
        assert env.reports[-1].plan is not None and env.reports[-1].plan.deferred == {"rate": 2}


def test_jobs_are_recorded_with_their_machines_and_metrics_are_served(env: Env) -> None:
    pod = env.kube.pods[(NS, "h100-0")]
    env.kube.set(pod, "metadata.annotations", {HEALTH: verdict(fp="sha256:" + "0f" * 32)})
    job = env.lab.sbatch("sleep 20\n", "-N", "2", "-w", "h100-[0-1]", "-p", "h100", "--gres=gpu:h100:2")
    env.lab.wait_job(job, states={"RUNNING"})
    env.until("recorded", lambda: (env.state_dir / "jobs.jsonl").exists())
    (line,) = (env.state_dir / "jobs.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["job"] == job and entry["partition"] == "h100"
    assert entry["nodes"]["h100-0"] == {"fingerprint": "sha256:" + "0f" * 32, "kubeNode": "gke-h100-0"}
    assert entry["nodes"]["h100-1"]["fingerprint"].startswith("instance:gce://")
    env.tick()
    assert len((env.state_dir / "jobs.jsonl").read_text().splitlines()) == 1  # once per job
    (port,) = free_ports(1)
    server = serve(env.controller, port, stale_after=60)
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10).status
    finally:
        server.shutdown()
        server.server_close()
    assert health == 200
    # The h100 partition gives jobs whole nodes (exclusiveNodes): 2 GPUs asked on each of 2 nodes hold all 16.
    assert 'slonk_gpus{status="allocated"} 16.0' in text and 'slonk_gpus{status="idle"} 16.0' in text
    assert 'slonk_slurm_jobs{partition="h100",state="RUNNING"} 1.0' in text
    assert "slonk_slurm_reachable 1.0" in text and "slonk_kube_reachable 1.0" in text
    assert 'slonk_health_checks{check="gpu-ecc",result="pass"} 1.0' in text
    assert 'slonk_api_calls_total{api="slurm",kind="list_nodes"}' in text
    assert "slonk_slurm_job_queue_wait_seconds_count" in text


def test_the_client_probes_the_newest_api_and_batches_updates(env: Env) -> None:
    slurm = env.controller.slurm
    assert isinstance(slurm, SlurmRest)
    api = slurm.api()
    if env.lab.flavor == "host":
        assert api.version == 38 and api.batch_update is None and api.node_update is None
    else:
        assert api.version >= 42 and api.batch_update == api.nodes_path
    before = sum(slurm.calls.values())
    slurm.update_nodes(["h100-0", "h100-2"], "DRAIN", "slonk: batch test")
    assert sum(slurm.calls.values()) - before == 1  # one call for both nodes (REST or scontrol)
    states = {n.name: n for n in slurm.list_nodes()}
    assert states["h100-0"].reason == states["h100-2"].reason == "slonk: batch test"
    slurm.update_nodes(["h100-0", "h100-2"], "RESUME")
    assert not any(n.drained for n in slurm.list_nodes() if n.name in STARTED)


def test_a_token_slurmctld_did_not_sign_is_refused(cluster: Cluster) -> None:
    slurm = SlurmRest(cluster.rest.url, TokenSigner(b"not the key" * 4, "root"))
    with pytest.raises(SlurmError):
        slurm.list_nodes()
    report_ok = SlurmRest(cluster.rest.url, TokenSigner(cluster.rest.jwt_key, "root")).list_nodes()
    assert {n.name for n in report_ok} >= set(STARTED)


def test_the_command_runs_one_tick_from_its_config_file(cluster: Cluster, tmp_path: Path) -> None:
    reset_slurm(cluster.lab)
    key = tmp_path / "jwt.key"
    key.write_bytes(cluster.rest.jwt_key)
    state = tmp_path / "state"
    state.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(f"slurmrestdUrl: {cluster.rest.url}\njwtKeyFile: {key}\nslurmUser: root\nstateDir: {state}\n")
    token = tmp_path / "token"
    token.write_text("fake-token\n")
    with FakeKube() as kube:
        for name in STARTED:
            kube.add_node(f"gke-{name}")
            kube.add_pod(name, NS, f"gke-{name}", labels=WORKER_LABELS)
        kube.set(kube.nodes["gke-h100-3"], "spec.unschedulable", True)
        args = ["--config", str(config), "--namespace", NS, "--kube-host", kube.url, "--kube-token-file", str(token)]
        args += ["--slurm-conf", str(cluster.lab.conf_dir / "slurm.conf"), "--once"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["slurmOk"] and summary["kubeOk"] and summary["pods"] == 4
    assert summary["decisions"] == ["drain h100-3: slonk: kubernetes node cordoned"]
    assert "h100-3" in {
        n.name for n in SlurmRest(cluster.rest.url, TokenSigner(cluster.rest.jwt_key, "root")).list_nodes() if n.drained
    }
    bad = CliRunner().invoke(main, ["--config", str(tmp_path / "missing.yaml"), "--namespace", NS, "--once"])
    assert bad.exit_code == 1 and "missing.yaml" in bad.output and "Traceback" not in bad.output


def test_a_verdict_can_travel_in_the_slurm_node_comment(env: Env) -> None:
    """The health checker needs no Kubernetes access: ``scontrol update Comment=<report JSON>`` reaches us too."""
    env.tick()
    report = json.loads(verdict("needs-person", "row remapping failed on GPU 2", t=time.time() + 1))
    report["node"] = "h100-3"
    env.scontrol("update", "NodeName=h100-3", f"Comment={json.dumps(report)}")
    try:
        env.until("drained", lambda: env.slurm("h100-3").drained)
        assert env.slurm("h100-3").reason == "slonk: health needs-person: gpu-ecc: row remapping failed on GPU 2"
        env.until("cordoned", lambda: env.node("h100-3")["spec"].get("unschedulable") is True)
        assert env.deleted == []  # needs-person: nothing automatic
    finally:
        env.scontrol("update", "NodeName=h100-3", "Comment=")
