"""slurm.conf with slurm.accounting: the keys slurm.conf(5) documents, line by line, and both real slurmctld
releases reading them (22.05 on the host, 26.05 in the chroot) up to the point where they need a slurmdbd.

No slurmdbd runs here, so the real check stops where slurmctld, having read every key and loaded the
accounting plugin, registers with slurmdbd ("Registering slurmctld at port ... with slurmdbd"): 22.05 then
exits ("slurmdbd and/or database must be up at slurmctld start time"), 26.05 retries. A key or value either
release refuses ends it before that line, which the misspelt-key case shows.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.accounting import DatabaseSpec
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm.conf import render_slurm_conf
from testing.slurmlab import SlurmLab, require_flavor
from tests.slurm.test_real import FLAVORS, conf_files, small_declaration

ACCOUNTING: dict[str, Any] = {
    "database": {"kind": "external", "host": "127.0.0.1", "port": 6999},
    "priorityWeights": {"fairshare": 5000, "qos": 2000, "age": 100, "jobSize": 10, "partition": 1},
    "qos": [
        {"name": "high", "priority": 100, "preempt": ["low"], "maxGpusPerUser": 8},
        {"name": "low", "maxWall": "2-00:00:00"},
    ],
    "accounts": [{"name": "research", "users": ["alice"], "maxGpus": 16}],
}


def with_accounting(raw: dict[str, Any], spec: Any = None) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw["users"] = [{"name": "alice", "uid": 2001}]
    raw["slurm"]["accounting"] = copy.deepcopy(ACCOUNTING if spec is None else spec)
    raw["slurm"]["partitions"] = [
        {"name": "gpu", "pools": ["*"], "default": True, "allowQos": ["high", "normal"]},
        {"name": "any", "pools": ["*"]},
    ]
    return raw


def body(plan: ClusterPlan) -> dict[str, str]:
    lines = [ln for ln in render_slurm_conf(plan).splitlines() if ln and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines if " " not in ln)


def partitions(plan: ClusterPlan) -> dict[str, str]:
    lines = [ln for ln in render_slurm_conf(plan).splitlines() if ln.startswith("PartitionName=")]
    return {ln.split()[0].removeprefix("PartitionName="): ln for ln in lines}


def test_accounting_enforcement_tres_and_multifactor_priority() -> None:
    plan = build_plan(with_accounting(load_declaration("gcp")))
    conf = body(plan)
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStorageHost"] == "127.0.0.1"
    assert conf["AccountingStoragePort"] == "6999"
    assert conf["AccountingStorageEnforce"] == "associations,limits,qos,safe"
    # The gcp stack has GPU and TPU pools: both GRES are tracked, so limits on them bind.
    assert conf["AccountingStorageTRES"] == "gres/gpu,gres/tpu"
    assert conf["JobAcctGatherType"] == "jobacct_gather/cgroup"
    assert conf["PriorityType"] == "priority/multifactor"
    weights = {k: conf[k] for k in conf if k.startswith("PriorityWeight")}
    assert weights == {
        "PriorityWeightFairshare": "5000",
        "PriorityWeightQOS": "2000",
        "PriorityWeightAge": "100",
        "PriorityWeightJobSize": "10",
        "PriorityWeightPartition": "1",
    }
    # A QOS preempts another: preemption moves from partition tiers to QOS.
    assert conf["PreemptType"] == "preempt/qos"
    parts = partitions(plan)
    assert " AllowQos=high,normal " in parts["gpu"]
    assert "AllowQos" not in parts["any"]


def test_in_cluster_database_is_the_namespace_slurmdbd_service() -> None:
    """in-cluster is refused by the plan until its pods exist; the renderer is ready for it."""
    spec = {"database": {"kind": "external", "host": "x"}, "qos": [{"name": "high", "priority": 10}]}
    plan = build_plan(with_accounting(load_declaration("local"), spec))
    slurm = plan.declaration.slurm
    assert slurm.accounting is not None
    in_cluster = slurm.accounting.model_copy(update={"database": DatabaseSpec(kind="in-cluster")})
    declaration = plan.declaration.model_copy(update={"slurm": slurm.model_copy(update={"accounting": in_cluster})})
    conf = body(replace(plan, declaration=declaration))
    assert conf["AccountingStorageHost"] == "slurmdbd.slurm.svc.cluster.local."
    assert conf["AccountingStoragePort"] == "6819"
    # No GPU pool on local: gres/gpu is still tracked (the limits are on it), nothing else.
    assert conf["AccountingStorageTRES"] == "gres/gpu"
    # Without a preempting QOS, partitions keep preempting by tier.
    assert conf["PreemptType"] == "preempt/partition_prio"


def test_the_old_form_renders_as_before_records_only() -> None:
    raw = copy.deepcopy(load_declaration("gcp"))
    raw["slurm"].update(accounting=True, accountingHost="dbd.example.org")
    conf = body(build_plan(raw))
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStorageHost"] == "dbd.example.org"
    assert conf["JobAcctGatherType"] == "jobacct_gather/cgroup"
    # Nothing enforced and the priority plugin untouched: jobs schedule as they did.
    assert "AccountingStorageEnforce" not in conf and "PriorityType" not in conf
    assert conf["PreemptType"] == "preempt/partition_prio"


def test_no_accounting_no_keys() -> None:
    raw = copy.deepcopy(load_declaration("gcp"))
    raw["slurm"].pop("accounting")
    conf = body(build_plan(raw))
    assert not [k for k in conf if k.startswith(("Accounting", "Priority", "JobAcct"))]


REGISTERED = "Registering slurmctld at port"


def read_until_registration(files: dict[str, str], flavor: str, workdir: Path, timeout: float = 15.0) -> str:
    """slurmctld's stderr and log from its start until it registers with slurmdbd, or it exits, or ``timeout``."""
    lab = SlurmLab(files, flavor, workdir)  # type: ignore[arg-type]
    log = workdir / "log" / "slurmctld.log"
    # A key slurmctld refuses is reported on its stderr, before the log file is opened.
    out = workdir / "log" / "slurmctld.out"
    try:
        lab.setup()
        proc = lab.spawn_controller()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.exit_code() is None:
            if log.exists() and REGISTERED in log.read_text(errors="replace"):
                break
            time.sleep(0.1)
        text = "".join(f.read_text(errors="replace") for f in (out, log) if f.exists())
        # Stopped here, before the lab's teardown asks squeue for jobs (26.05 answers no client RPC
        # while it waits for slurmdbd).
        proc.stop()
        return text
    finally:
        lab.stop()


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_slurmctld_reads_every_accounting_key(flavor: str, tmp_path: Path) -> None:
    require_flavor(flavor)  # type: ignore[arg-type]
    files = conf_files(build_plan(with_accounting(small_declaration(*FLAVORS[flavor]))))
    log = read_until_registration(files, flavor, tmp_path / "good")
    assert REGISTERED in log, f"slurmctld stopped before it reached slurmdbd:\n{log[-3000:]}"
    assert "127.0.0.1:6999" in log, log[-3000:]
    files["slurm.conf"] = files["slurm.conf"].replace("PriorityWeightQOS=", "PriorityWeightQoz=")
    log = read_until_registration(files, flavor, tmp_path / "bad")
    assert REGISTERED not in log and "PriorityWeightQoz" in log, log[-3000:]
