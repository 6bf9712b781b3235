"""A first `pulumi up` completes: what waits for capacity skips pulumi-kubernetes' await, and what is
awaited starts after the system nodes and shared filesystems it needs, with room to pull the image."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pytest

from slonk_infra import vocab
from slonk_infra.binding import CloudResult, VolumeSource
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.worker import SAFE_TO_EVICT, SKIP_AWAIT
from slonk_infra.offline.runner import Registration, run_offline
from slonk_infra.slurm_layer.slurm_cluster import AWAIT_TIMEOUT, SlurmCluster, awaited, mounted_config_maps
from tests.kube_support import objects, plan_for

# The documented annotation (pulumi/pulumi-kubernetes#417) and value.
SKIP = {"pulumi.com/skipAwait": "true"}


def _annotations(obj: dict[str, object]) -> dict[str, str]:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    found: dict[str, str] = meta.get("annotations") or {}
    return found


@pytest.mark.parametrize("stack", ["gcp", "aws", "local"])
def test_workers_and_their_service_skip_the_await_and_nothing_else_does(stack: str) -> None:
    plan = plan_for(stack)
    objs = objects(plan)
    skipped = {(o["kind"], o["metadata"]["name"]) for o in objs if _annotations(o).get(SKIP_AWAIT) == "true"}
    expected = {("StatefulSet", g.name) for g in plan.groups} | {("Service", "slurm-workers")}
    assert skipped == expected
    assert SKIP_AWAIT == "pulumi.com/skipAwait"
    for o in objs:
        if (o["kind"], o["metadata"]["name"]) in expected:
            assert SKIP.items() <= _annotations(o).items()
    # The controller, login and (on gcp/aws) slurmrestd are still awaited.
    kept = {o["metadata"]["name"] for o in objs if awaited(o)}
    assert {"slurmctld", "login"} <= kept and not kept & {g.name for g in plan.groups}


def test_worker_pods_are_never_evicted_by_an_autoscaler() -> None:
    plan = plan_for("gcp")
    workers = [
        o
        for o in objects(plan)
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] in {g.name for g in plan.groups}
    ]
    assert len(workers) == len(plan.groups)
    for sts in workers:
        assert sts["spec"]["template"]["metadata"]["annotations"][SAFE_TO_EVICT] == "false"
    assert SAFE_TO_EVICT == "cluster-autoscaler.kubernetes.io/safe-to-evict"
    others = [o for o in objects(plan) if o["kind"] in ("StatefulSet", "Deployment") and o not in workers]
    assert others and all(
        SAFE_TO_EVICT not in (o["spec"]["template"]["metadata"].get("annotations") or {}) for o in others
    )


@dataclass(frozen=True)
class WithSystemNodes(CloudResult):
    """A cloud result that hands over its system node pool, as GKE and EKS adapters do."""

    system_nodes: Sequence[pulumi.Resource] = ()


def _layer_with_system_pool(stack: str) -> list[Registration]:
    plan = build_plan(load_declaration(stack))

    def program() -> None:
        pool = pulumi.CustomResource("test:index:SystemPool", "system-pool", {})
        disk = pulumi.CustomResource("test:index:Filesystem", "home-fs", {})
        volumes = {"home": VolumeSource("home", {"nfs": {"server": "10.0.0.2", "path": "/"}}, depends_on=(disk,))}
        SlurmCluster(plan.name, plan, WithSystemNodes(provider=None, volumes=volumes, system_nodes=(pool,)))

    return run_offline(program).registrations


def test_awaited_objects_wait_for_the_system_pool_and_the_filesystems_with_a_longer_timeout() -> None:
    regs = _layer_with_system_pool("gcp")
    pool = next(r.urn for r in regs if r.type == "test:index:SystemPool")
    disk = next(r.urn for r in regs if r.type == "test:index:Filesystem")
    kube = [r for r in regs if r.type.startswith("kubernetes:")]
    by_name = {(r.type.rsplit(":", 1)[-1], r.inputs["metadata"]["name"]): r for r in kube}
    for key in [
        ("StatefulSet", "slurmctld"),
        ("StatefulSet", "login"),
        ("Service", "login"),
        ("Deployment", "slurmrestd"),
    ]:
        reg = by_name[key]
        assert {pool, disk} <= set(reg.dependencies), key
        assert reg.custom_timeouts == {"create": AWAIT_TIMEOUT, "update": AWAIT_TIMEOUT}, key
    plan = plan_for("gcp")
    for g in plan.groups:
        worker = by_name[("StatefulSet", g.name)]
        assert pool not in worker.dependencies and worker.custom_timeouts == {}
    # Objects without an await are not held back.
    for key in [("ConfigMap", vocab.CONFIG_MAP), ("PriorityClass", vocab.worker_priority(plan.namespace))]:
        assert pool not in by_name[key].dependencies


def test_without_a_system_pool_the_awaited_objects_still_get_the_longer_timeout() -> None:
    plan = plan_for("local")
    run = run_offline(lambda: SlurmCluster(plan.name, plan, CloudResult(provider=None)))
    ctld = next(r for r in run.of_type("kubernetes:apps/v1:StatefulSet") if r.inputs["metadata"]["name"] == "slurmctld")
    assert ctld.custom_timeouts["create"] == AWAIT_TIMEOUT


def test_slurmctld_starts_after_the_namespaces_slurmdbd_is_ready() -> None:
    # The shipped gcp stack runs its own slurmdbd (accounting kind cloud): Pulumi updates slurmctld only once
    # slurmdbd's Deployment is Ready (Slurm's upgrade order), and the controller's first start waits for it.
    regs = _layer_with_system_pool("gcp")
    by_name = {
        (r.type.rsplit(":", 1)[-1], r.inputs["metadata"]["name"]): r for r in regs if r.type.startswith("kubernetes:")
    }
    slurmdbd = by_name[("Deployment", vocab.SLURMDBD)]
    ctld = by_name[("StatefulSet", "slurmctld")]
    assert slurmdbd.urn in ctld.dependencies
    assert awaited(slurmdbd.inputs)
    env = {e["name"]: e["value"] for e in ctld.inputs["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    assert env.get("SLONK_AWAIT_SLURMDBD") == "1"


def test_without_its_own_slurmdbd_slurmctld_neither_depends_nor_waits() -> None:
    plan = plan_for("local", lambda raw: raw["slurm"].pop("accounting"))
    run = run_offline(lambda: SlurmCluster(plan.name, plan, CloudResult(provider=None)))
    assert not [r for r in run.of_type("kubernetes:apps/v1:Deployment") if r.inputs["metadata"]["name"] == "slurmdbd"]
    ctld = next(r for r in run.of_type("kubernetes:apps/v1:StatefulSet") if r.inputs["metadata"]["name"] == "slurmctld")
    env = {e["name"] for e in ctld.inputs["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    assert "SLONK_AWAIT_SLURMDBD" not in env


def test_the_standby_controller_is_updated_only_once_the_primary_is_ready() -> None:
    # A config change is served once the new primary answers: its StatefulSet is updated first, and the
    # standby's waits for it (a StatefulSet of two would roll the backup first).
    plan = plan_for("local", lambda raw: raw["controller"].update(replicas=2, stateStorage="home"))
    run = run_offline(lambda: SlurmCluster(plan.name, plan, CloudResult(provider=None)))
    stss = {r.inputs["metadata"]["name"]: r for r in run.of_type("kubernetes:apps/v1:StatefulSet")}
    primary, standby = stss["slurmctld"], stss["slurmctld-standby"]
    assert primary.urn in standby.dependencies and standby.urn not in primary.dependencies
    assert awaited(primary.inputs) and primary.custom_timeouts["update"] == AWAIT_TIMEOUT


@pytest.mark.parametrize("stack", ["gcp", "aws", "local"])
def test_a_workload_rolled_for_a_config_is_updated_after_the_config_maps_it_mounts(stack: str) -> None:
    # A pod made while its ConfigMap still holds the old files would run them until its next roll (the
    # controller copies its files once per pod).
    plan = plan_for(stack, lambda raw: raw.setdefault("controller", {}).update(replicas=2, stateStorage="home"))
    run = run_offline(lambda: SlurmCluster(plan.name, plan, CloudResult(provider=None)))
    maps = {r.inputs["metadata"]["name"]: r.urn for r in run.of_type("kubernetes:core/v1:ConfigMap")}
    checked = []
    for kind in ("StatefulSet", "Deployment"):
        for r in run.of_type(f"kubernetes:apps/v1:{kind}"):
            obj = {"kind": kind, **r.inputs}
            for name in mounted_config_maps(obj):
                assert maps[name] in r.dependencies, (r.inputs["metadata"]["name"], name)
                checked.append(r.inputs["metadata"]["name"])
    assert {"slurmctld", "slurmctld-standby", "login"} <= set(checked)
