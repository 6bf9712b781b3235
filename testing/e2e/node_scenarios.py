"""Scenarios of the cloud node profiles: what slurmd and a GKE/EKS node really do to a worker pod.

Health checks under slurmd's own environment with the GPU checks on, GPU sharing, the user's
environment through the TaskProlog, a multi-host TPU job's variables, GRES against the GPUs NVML
sees, and a user declared later. Each leaves the cluster as it found it (started nodes IDLE).
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import time
from typing import Any

from slonk_infra import vocab
from slonk_infra.health.giveup import NVML_CALL_S
from slonk_infra.plan import WorkerGroup, naming
from testing.e2e.cluster import Cluster
from testing.e2e.jobs import LOGIN, job_fields, submit, wait_done, wait_job
from testing.e2e.nodes import GpuNode
from testing.e2e.podman import wait_for
from testing.e2e.pods import PodOptions
from testing.e2e.stack import rerender

HEALTH_INTERVAL_SLACK = 30.0  # slurmd starts the program on its own tick; the check itself takes seconds


def _groups(cluster: Cluster, kind: str) -> list[WorkerGroup]:
    return [g for g in cluster.rendered.plan.groups if g.kind == kind]


def _running(cluster: Cluster, group: WorkerGroup) -> list[str]:
    return [w for w in cluster.workers() if w.rsplit("-", 1)[0] == group.name]


def _gpu_nodes(cluster: Cluster) -> tuple[WorkerGroup, list[str]]:
    """The GPU group with the most GPUs per node and its running nodes (at least two where it can)."""
    group = max(_groups(cluster, "gpu"), key=lambda g: (g.gres_count, len(_running(cluster, g))))
    return group, _running(cluster, group)


def _as_user(cluster: Cluster) -> str:
    """The first declared user as ``uid:gid`` for podman exec (the name is only in the users Secret's NSS)."""
    user = cluster.rendered.plan.declaration.users[0]
    return f"{user.uid}:{user.primary_gid}"


def no_gpus(cluster: Cluster) -> str | None:
    return None if _groups(cluster, "gpu") else "no GPU pool declared"


def _slurm_conf_value(cluster: Cluster, key: str) -> str:
    conf = cluster.rendered.objects.get("ConfigMap", vocab.CONFIG_MAP)["data"]["slurm.conf"]
    match = re.search(rf"^{key}=(\S+)", conf, re.MULTILINE)
    return match.group(1) if match else ""


def _report(cluster: Cluster, node: str, mode: str) -> dict[str, Any]:
    """The last report slonk-health wrote on ``node`` in ``mode`` ({} before the first)."""
    proc = cluster.exec(node, f"cat /tmp/slonk-health-{mode}.json")
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}


def _gpu_count(report: dict[str, Any]) -> dict[str, Any]:
    return next((r for r in report.get("results", []) if r.get("check") == "gpu-count"), {})


def _resume(cluster: Cluster, node: str) -> None:
    cluster.exec(LOGIN, f"scontrol update NodeName={node} State=RESUME Reason=", timeout=60)


def _health_settled(cluster: Cluster, node: str) -> None:
    """Wait until no health check is running on ``node``.

    A check that read the GPUs before a fault was cleared still drains the node when it ends; resuming
    before then leaves the node drained for good (nothing in the tier resumes health-check drains). Checks
    that start later read the cleared state. The bracket keeps pgrep from matching its own shell.
    """
    wait_for(
        f"{node}: no health check running",
        lambda: cluster.exec(node, "pgrep -f '[s]lonk-health --mode'").returncode == 1,
        60,
        0.5,
    )


def _not_held(job: str, fields: dict[str, str]) -> None:
    """A job requeued after its prolog failed is not held (``nohold_on_prolog_fail``)."""
    if "held" in fields.get("Reason", "").lower() or fields.get("Priority") == "0":
        raise AssertionError(f"job {job} was held: {fields}")


def _clear_faults(cluster: Cluster, gpu: GpuNode, node: str) -> None:
    """The planted faults gone, no check still judging the old ones, and the node back in service."""
    gpu.faults = {}
    gpu.write()
    _health_settled(cluster, node)
    _resume(cluster, node)


def health_under_slurmd(cluster: Cluster) -> str:
    """9. slurmd runs HealthCheckProgram, Prolog and Epilog in its own bare environment with the GPU checks on;
    they pass on a healthy node; an uncorrectable ECC error planted on one GPU drains that node with a
    ``slonk-health:`` reason, and a job that was to start there runs on another node: requeued, not held."""
    group, nodes = _gpu_nodes(cluster)
    if len(nodes) < 2:
        raise AssertionError(f"{group.name}: needs two running nodes, has {nodes}")
    interval = float(_slurm_conf_value(cluster, "HealthCheckInterval") or 0)
    bad, good = nodes[0], nodes[1]
    # Healthy: slurmd's own interval run (not the entrypoint's boot run) passed with the GPUs counted.

    def interval_report() -> dict[str, Any] | None:
        report = _report(cluster, bad, "interval")
        return report if _gpu_count(report) else None

    report = wait_for(f"{bad}: slurmd's interval health check", interval_report, interval + HEALTH_INTERVAL_SLACK, 2.0)
    count = _gpu_count(report)
    if not report.get("ok") or count.get("figures", {}).get("found") != group.gres_count:
        raise AssertionError(f"{bad}: interval check under slurmd: ok={report.get('ok')} gpu-count={count}")
    user = _as_user(cluster)
    partition = f"-p {_gpu_partition(cluster, group)}"
    job = submit(cluster, f"{partition} -N1 -w {good} --gpus={group.gres_count} -o /dev/null", "true", user=user)
    wait_done(cluster, [job], 120)
    prolog = _report(cluster, good, "prolog")
    if not prolog.get("ok") or _gpu_count(prolog).get("figures", {}).get("found") != group.gres_count:
        raise AssertionError(f"{good}: prolog health check under slurmd: {prolog}")
    # Faulty: ECC on one GPU of the node the scheduler picks first; a whole-node job submitted at once.
    gpu = cluster.gpu_node(bad)
    gpu.faults = {3: ["ecc-uncorrectable"]}
    gpu.write()
    planted = time.monotonic()
    job = submit(cluster, f"{partition} -N1 --gpus={group.gres_count} -o /dev/null", "hostname", user=user)
    try:
        reason = wait_for(f"{bad} drained by slonk-health", lambda: _drain_reason(cluster, bad), interval + 60, 1.0)
        drained_s = time.monotonic() - planted
        wait_job(cluster, job, ("COMPLETED",), 180)
        fields = job_fields(cluster, job)
        if fields.get("NodeList") != good:
            raise AssertionError(f"job {job} ran on {fields.get('NodeList')}, not on the healthy {good}")
        _not_held(job, fields)
    finally:
        _clear_faults(cluster, gpu, bad)
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 180)
    return (
        f"slurmd's interval check ok ({count['figures']['found']} GPUs, NVML at {_nvml_dir(cluster)}); "
        f"prolog ok on {good}; ECC on {bad} GPU 3 drained it in {drained_s:.1f}s ({reason!r}); "
        f"job {job} requeued (restarts {fields.get('Restarts', '?')}, never held) and ran on {good}"
    )


def _nvml_dir(cluster: Cluster) -> str:
    profile = cluster.runner.profile.gpu
    return profile.library_dir if profile else "?"


def _gpu_partition(cluster: Cluster, group: WorkerGroup) -> str:
    """A partition of ``group``'s nodes only (the one per accelerator), else the default one."""
    partitions = cluster.rendered.plan.partitions
    own = sorted((not p.default, p.name) for p in partitions if p.groups == (group.name,))
    return own[0][1] if own else next(p.name for p in partitions if p.default)


def _drain_reason(cluster: Cluster, node: str) -> str | None:
    out = cluster.exec(LOGIN, f"scontrol show node -o {node}").stdout
    state = re.search(r"State=(\S+)", out)
    reason = re.search(r"Reason=(.*?)(?: \w+=|$)", out)
    if state and "DRAIN" in state.group(1) and reason and reason.group(1).startswith("slonk-health:"):
        return reason.group(1)
    return None


def _health_deadline(cluster: Cluster) -> float:
    """The deadline the rendered healthcheck.sh gives slonk-health (``--deadline N``)."""
    script = cluster.rendered.objects.get("ConfigMap", vocab.SCRIPTS_MAP)["data"]["healthcheck.sh"]
    match = re.search(r"--deadline (\d+(?:\.\d+)?)", script)
    if match is None:
        raise AssertionError("healthcheck.sh passes no --deadline")
    return float(match.group(1))


def gpu_stops_answering(cluster: Cluster) -> str:
    """25. A GPU whose NVML calls never return (a GSP timeout, its driver stuck): the prolog's health check
    gives up on the call after NVML_CALL_S, kills the child it ran the checks in and drains the node naming
    the GPU and the value, well inside the run's deadline; the job does not run there and is requeued, not
    held. Without it the prolog would wait for ever, and slurmd would stop an interval run, draining nothing."""
    group, nodes = _gpu_nodes(cluster)
    bad = nodes[0]
    deadline = _health_deadline(cluster)
    gpu = cluster.gpu_node(bad)
    gpu.faults = {1: ["hang-nvmlDeviceGetTotalEccErrors"]}
    gpu.write()
    planted = time.monotonic()
    args = f"-p {_gpu_partition(cluster, group)} -N1 -w {bad} --gpus={group.gres_count} -o /dev/null"
    job = submit(cluster, args, "hostname", user=_as_user(cluster))
    expected = (
        f"slonk-health: gpu-ecc: GPU 1: NVML eccErrors.uncorrected.volatile did not answer within {NVML_CALL_S:.0f} s"
    )

    def prolog_gave_up() -> dict[str, Any] | None:
        report = _report(cluster, bad, "prolog")
        hung = [r for r in report.get("results", []) if "gaveUpAfterSeconds" in r.get("figures", {})]
        return report if hung else None

    def requeued(job: str) -> dict[str, str] | None:
        fields = job_fields(cluster, job)
        return fields if fields.get("JobState") == "PENDING" and fields.get("Restarts", "0") != "0" else None

    try:
        reason = wait_for(f"{bad} drained by slonk-health", lambda: _drain_reason(cluster, bad), deadline + 60, 1.0)
        drained_s = time.monotonic() - planted
        if not reason.startswith(expected):
            raise AssertionError(f"{bad} drained for {reason!r}, not {expected!r}...")
        report = wait_for(f"{bad}: the prolog's report of the check it gave up on", prolog_gave_up, deadline + 30, 1.0)
        if report["action"] != "replace-machine" or not report["drain"]["requested"]:
            raise AssertionError(f"{bad}: prolog report {report}")
        if report["durationMs"] >= deadline * 1000:
            raise AssertionError(f"{bad}: the prolog's run took {report['durationMs']} ms, past its {deadline:g} s")
        fields = wait_for(f"job {job} requeued", lambda: requeued(job), 60, 1.0)
        _not_held(job, fields)
    finally:
        cluster.exec(LOGIN, f"scancel {job}", timeout=60)
        _clear_faults(cluster, gpu, bad)
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 180)
    return (
        f"NVML hung on {bad} GPU 1: drained {drained_s:.1f}s after the job was submitted ({reason!r}); the prolog's "
        f"run ended after {report['durationMs'] / 1000:.1f}s (call limit {NVML_CALL_S:g}s, deadline {deadline:g}s); job {job} requeued "
        f"(restarts {fields.get('Restarts')}, {fields.get('Reason')}), not held"
    )


FIRST_JOB_S = 25
"""How long scenario 10's first job holds its GPUs (its ``sleep`` is how the scenario finds the script)."""


def gpu_sharing(cluster: Cluster) -> str:
    """10. Two 4-GPU jobs on one 8-GPU node: both run where jobs share nodes, and a GPU busy with the other
    job never drains the node; where GPU nodes are exclusive the partition says so and the second waits."""
    group, nodes = _gpu_nodes(cluster)
    if group.gres_count < 8:
        raise AssertionError(f"{group.name}: needs 8 GPUs per node, has {group.gres_count}")
    node = nodes[0]
    user = _as_user(cluster)
    part = _gpu_partition(cluster, group)
    exclusive = cluster.rendered.plan.declaration.health.exclusive_nodes
    shown = cluster.exec(LOGIN, f"scontrol show partition -o {part}").stdout
    # slurm.conf says OverSubscribe=EXCLUSIVE; 22.05 shows it so, 26.05 as Exclusive=NODE (OverSubscribe=NO).
    whole_nodes = "OverSubscribe=EXCLUSIVE" in shown or "Exclusive=NODE" in shown
    args = f"-p {part} -N1 -w {node} --gpus=4 -o /dev/null"
    first = submit(cluster, args, f"sleep {FIRST_JOB_S}", user=user)
    wait_job(cluster, first, ("RUNNING",), 60)
    # RUNNING comes before the prolog is done: busy GPUs planted while it still looks fail it (rightly),
    # and Slurm requeues the job with a begin time minutes ahead. The script running means it is done.
    uid = user.split(":")[0]
    wait_for(
        f"job {first}'s script running on {node} (its prolog done)",
        lambda: cluster.exec(node, f"pgrep -u {uid} -x -f 'sleep {FIRST_JOB_S}'").returncode == 0,
        60,
        seen=lambda: job_fields(cluster, first),
    )
    if exclusive:
        if not whole_nodes:
            raise AssertionError(f"partition {part} gives no whole nodes: {shown.strip()}")
        second = submit(cluster, args, "true", user=user)
        time.sleep(5)
        state = job_fields(cluster, second).get("JobState")
        if state != "PENDING":
            raise AssertionError(f"job {second} is {state} beside {first} on an exclusive node")
        wait_done(cluster, [first, second], 120)
        return f"partition {part} allocates whole nodes; job {second} waited for {first} on {node}"
    # Shared: the first job's GPUs look busy (a process holding memory on each) while the second starts.
    indices = _job_gpu_indices(cluster, first)
    gpu = cluster.gpu_node(node)
    gpu.faults = {i: ["leftover-process"] for i in indices}
    gpu.write()
    try:
        second = submit(cluster, args, "sleep 2", user=user)
        wait_job(cluster, second, ("RUNNING", "COMPLETING", "COMPLETED"), 60)
        both = job_fields(cluster, first).get("JobState") == "RUNNING"
        theirs = _job_gpu_indices(cluster, second)
        wait_done(cluster, [second], 60)
    finally:
        gpu.faults = {}
        gpu.write()  # the first job's processes exit with it, before its epilog looks
    wait_done(cluster, [first], 60)
    if whole_nodes:
        raise AssertionError(f"partition {part} allocates whole nodes on a shared declaration: {shown.strip()}")
    reason = _drain_reason(cluster, node)
    if not both or reason or set(indices) & set(theirs):
        raise AssertionError(f"sharing {node}: both running {both}, GPUs {indices} / {theirs}, drained: {reason}")
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 120)
    return (
        f"jobs {first} (GPUs {indices}) and {second} (GPUs {theirs}) ran together on {node}; "
        f"the busy GPUs of one did not fail the other's prolog/epilog; not drained"
    )


def _job_gpu_indices(cluster: Cluster, job: str) -> list[int]:
    """The GPU indexes of a running job on its node (``GRES=gpu:h100:4(IDX:0-3)``)."""
    out = cluster.exec(LOGIN, f"scontrol show job -d {job}").stdout
    match = re.search(r"IDX:([0-9,-]+)", out)
    if not match:
        raise AssertionError(f"job {job}: no GPU indexes in scontrol show job -d")
    found: list[int] = []
    for part in match.group(1).split(","):
        lo, _, hi = part.partition("-")
        found += list(range(int(lo), int(hi or lo) + 1))
    return found


def _path_fabric(cluster: Cluster) -> tuple[WorkerGroup, list[str]] | None:
    for group in cluster.rendered.plan.groups:
        sts = cluster.rendered.objects.get("StatefulSet", naming.statefulset(group.name))
        env = {e["name"]: e.get("value", "") for e in sts["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        if "LD_LIBRARY_PATH" in env.get("SLONK_TASK_ENV", "").split(",") and group.replicas >= 2:
            return group, env["LD_LIBRARY_PATH"].split(":")
    return None


def no_path_fabric(cluster: Cluster) -> str | None:
    return None if _path_fabric(cluster) else "no fabric pool that hands its tasks a library path"


def user_env_survives(cluster: Cluster) -> str:
    """11. A batch job exports its own LD_LIBRARY_PATH and PATH (a conda-like prefix): every srun task on a
    fabric node sees them, with the fabric's paths added, not instead."""
    found = _path_fabric(cluster)
    assert found is not None
    group, fabric_paths = found
    user = cluster.rendered.plan.declaration.users[0]
    prefix = f"{user.home}/conda"
    script = (
        f"export LD_LIBRARY_PATH={prefix}/lib:/opt/user/lib; export PATH={prefix}/bin:$PATH; "
        "srun -N2 --ntasks-per-node=1 sh -c 'echo \"$(hostname) LD=$LD_LIBRARY_PATH PATH=$PATH\"'"
    )
    out_file = f"{user.home}/s11-%j.out"
    job = submit(cluster, f"-p {_gpu_partition(cluster, group)} -N2 -o {out_file}", script, user=_as_user(cluster))
    wait_done(cluster, [job], 120)
    lines = cluster.sh(LOGIN, f"cat {shlex.quote(out_file.replace('%j', job))}", user=_as_user(cluster)).splitlines()
    if len(lines) != 2:
        raise AssertionError(f"job {job}: {lines}")
    for line in lines:
        ld = re.search(r"LD=(\S*)", line)
        path = re.search(r"PATH=(\S*)", line.split(" LD=")[1].split(" ", 1)[1])
        ld_parts = ld.group(1).split(":") if ld else []
        if not {f"{prefix}/lib", "/opt/user/lib"} <= set(ld_parts) or fabric_paths[0] not in ld_parts:
            raise AssertionError(f"task LD_LIBRARY_PATH {ld_parts}: want the job's and the fabric's ({fabric_paths})")
        if not path or f"{prefix}/bin" not in path.group(1).split(":"):
            raise AssertionError(f"task PATH lost the job's {prefix}/bin: {line}")
    return f"job {job}: both tasks kept {prefix}/lib, /opt/user/lib and {prefix}/bin, with {fabric_paths[0]} added"


def no_multihost_tpu(cluster: Cluster) -> str | None:
    return None if any(g.replicas > 1 for g in _groups(cluster, "tpu")) else "no multi-host TPU slice declared"


def tpu_job_env(cluster: Cluster) -> str:
    """12. A multi-host TPU job: every task sees TPU_WORKER_ID 0..n-1 matching its pod, resolvable
    TPU_WORKER_HOSTNAMES, and every TPU_* variable the device plugin gave the container."""
    group = next(g for g in _groups(cluster, "tpu") if g.replicas > 1)
    nodes = _running(cluster, group)
    user = cluster.rendered.plan.declaration.users[0]
    plugin = {}
    for line in cluster.exec(nodes[0], "env").stdout.splitlines():
        name, _, value = line.partition("=")
        if name.startswith("TPU_") and name not in ("TPU_WORKER_ID",):
            plugin[name] = value
    script = (
        f"srun -N{len(nodes)} --ntasks-per-node=1 sh -c "
        '\'echo "$(hostname) $(env | grep ^TPU_ | sort | tr "\\n" " ")"; '
        'for h in $(echo $TPU_WORKER_HOSTNAMES | tr , " "); do getent hosts $h >/dev/null || echo UNRESOLVED $h; done\''
    )
    out_file = f"{user.home}/s12-%j.out"
    job = submit(
        cluster, f"-p {_gpu_partition(cluster, group)} -N{len(nodes)} -o {out_file}", script, user=_as_user(cluster)
    )
    wait_done(cluster, [job], 120)
    text = cluster.sh(LOGIN, f"cat {shlex.quote(out_file.replace('%j', job))}", user=_as_user(cluster))
    if "UNRESOLVED" in text:
        raise AssertionError(f"job {job}: TPU_WORKER_HOSTNAMES not resolvable: {text}")
    seen: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        host, _, rest = line.partition(" ")
        seen[host] = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
    if set(seen) != set(nodes):
        raise AssertionError(f"job {job}: tasks on {sorted(seen)}, want {nodes}")
    for host, env in seen.items():
        if env.get("TPU_WORKER_ID") != host.rsplit("-", 1)[1]:
            raise AssertionError(f"{host}: TPU_WORKER_ID={env.get('TPU_WORKER_ID')}, want its pod index")
        missing = {k: v for k, v in plugin.items() if env.get(k) != v}
        if missing:
            raise AssertionError(f"{host}: the task lacks the device plugin's {missing}")
    return (
        f"job {job} on {len(nodes)} hosts: TPU_WORKER_ID = pod index, hostnames resolve, "
        f"{len(plugin)} device-plugin variables in every task ({', '.join(sorted(plugin)[:3])}, ...)"
    )


def gres_match_hardware(cluster: Cluster) -> str:
    """13. A node whose GPUs NVML shows 7 of 8 is refused with a reason naming the count, never registered
    with 8; with all 8 back it joins."""
    group, nodes = _gpu_nodes(cluster)
    node = nodes[-1]
    cluster.delete_pod(node, recreate=False)
    cluster.options[node] = PodOptions(gpus_missing=1)
    try:
        cluster.recreate(node)
        want = f"{group.gres_count - 1} of {group.gres_count} GPUs visible"

        def refused() -> str | None:
            logs = cluster.logs(node, "slurmd", tail=400)
            return want if want in logs else None

        wait_for(f"{node}: the boot check naming '{want}'", refused, 120, 2.0)
        time.sleep(5)
        state = cluster.node_states().get(node, "")
        if state not in ("future", "down", "down*", "drain", "drained", "drng"):
            raise AssertionError(f"{node} with 7 of 8 GPUs is {state}")
    finally:
        cluster.options.pop(node, None)
        cluster.lose(node)
        cluster.recreate(node)
    cluster.wait_states({n: "idle" for n in cluster.workers()}, 180)
    return (
        f"{node} with {group.gres_count - 1} GPUs: boot check refused it ('{want}'), node {state}; with 8 it rejoined"
    )


def user_added_later(cluster: Cluster) -> str:
    """14. A user declared later logs in without a login restart and finds a home directory."""
    login = cluster.pods["login-0"]
    started, restarts = cluster.started_at("login-0"), cluster.restarts("login-0")
    name, uid = "carol", 2042
    key = cluster.secrets.user_public_key

    def add(raw: dict[str, Any]) -> None:
        raw["users"] = [*raw["users"], {"name": name, "uid": uid, "gid": uid, "sshAuthorizedKeys": [key]}]
        accounts = ((raw.get("slurm") or {}).get("accounting") or {}).get("accounts")
        if accounts:  # with accounting, a declared user must be in an account (the declaration refuses one in none)
            accounts[0]["users"] = [*accounts[0].get("users", []), name]

    result = cluster.apply(rerender(cluster.rendered, cluster.secrets, add))
    now = (cluster.pods.get("login-0") is login, cluster.started_at("login-0"), cluster.restarts("login-0"))
    if now != (True, started, restarts):
        raise AssertionError(
            f"adding a user restarted the login pod: same pod {now[0]}, started {started} -> {now[1]}, "
            f"restarts {restarts} -> {now[2]}; apply replaced {result.replaced}"
        )
    out = wait_for(
        f"{name} logs in", lambda: _try_ssh(cluster, name, "id -u; stat -c '%u %a' ~; pwd"), 120, interval=3.0
    )
    ident = out.split()
    if ident[:3] != [str(uid), str(uid), "700"]:
        raise AssertionError(f"{name}: {ident}, want uid {uid} and a home of theirs, mode 700")
    return f"{name} (uid {uid}) added: logged in without a login restart, home {ident[3]} made at first login"


def _try_ssh(cluster: Cluster, user: str, command: str) -> str | None:
    try:
        return cluster.ssh(user, command, timeout=60)
    except Exception:  # not there yet: the Secret's files reach the pod within kubelet's sync period
        return None


def _mixed_default(cluster: Cluster) -> tuple[str, list[str]] | None:
    """The default partition when it holds CPU and accelerator groups, and its running CPU nodes."""
    plan = cluster.rendered.plan
    default = next(p for p in plan.partitions if p.default)
    kinds = {g.name: g.kind for g in plan.groups}
    members = [g for g in plan.groups if g.name in default.groups]
    if not any(g.kind == "cpu" and g.replicas for g in members) or all(kinds[g] == "cpu" for g in default.groups):
        return None
    return default.name, [n for g in members if g.kind == "cpu" for n in g.node_names[: g.replicas]]


def no_mixed_default(cluster: Cluster) -> str | None:
    return None if _mixed_default(cluster) else "the default partition holds no CPU and accelerator nodes together"


def cpu_work_on_cpu_nodes(cluster: Cluster) -> str:
    """15. One-core jobs in a default partition that also holds GPU or TPU nodes run on the CPU nodes,
    sharing them, never taking a whole accelerator node (node Weight; no whole nodes on mixed partitions)."""
    found = _mixed_default(cluster)
    assert found is not None
    partition, cpu_nodes = found
    jobs = [submit(cluster, f"-p {partition} -n1 -o /dev/null", "sleep 8", user=_as_user(cluster)) for _ in range(3)]
    for job in jobs:
        wait_job(cluster, job, ("RUNNING", "COMPLETING", "COMPLETED"), 60)
    where = {job: job_fields(cluster, job).get("NodeList", "") for job in jobs}
    wait_done(cluster, jobs, 60)
    if any(node not in cpu_nodes for node in where.values()):
        raise AssertionError(f"one-core jobs in {partition} ran on {where}, want the CPU nodes {cpu_nodes}")
    return f"3 one-core jobs in {partition} ran together on {sorted(set(where.values()))}, no accelerator node taken"


def prolog_seconds(cluster: Cluster, runs: int = 20) -> list[float]:
    """Wall seconds of the prolog (health check included) run as slurmd runs it, ``runs`` times on one GPU
    node: a bare environment with the job's SLURM_* variables (benchmarks/e2e.py reports these)."""
    group, nodes = _gpu_nodes(cluster)
    gpus = ",".join(str(i) for i in range(group.gres_count))
    command = (
        f"for i in $(seq {runs}); do s=$(date +%s%N); env -i SLURMD_NODENAME={nodes[0]} SLURM_JOB_ID=$i "
        f"SLURM_JOB_GPUS={gpus} sh {vocab.SCRIPTS_DIR}/prolog.sh >/dev/null 2>&1 || echo FAIL; "
        "e=$(date +%s%N); echo $(( (e - s) / 1000 )); done"
    )
    out = cluster.exec(nodes[0], command, timeout=600).stdout.split()
    if "FAIL" in out:
        raise AssertionError(f"the prolog failed on a healthy node: {out}")
    return [int(us) / 1e6 for us in out]


def prolog_figures(seconds: list[float]) -> str:
    return f"median {statistics.median(seconds):.2f}s, max {max(seconds):.2f}s over {len(seconds)}"


__all__ = [
    "cpu_work_on_cpu_nodes",
    "gpu_sharing",
    "gpu_stops_answering",
    "gres_match_hardware",
    "health_under_slurmd",
    "no_gpus",
    "no_mixed_default",
    "no_multihost_tpu",
    "no_path_fabric",
    "prolog_figures",
    "prolog_seconds",
    "tpu_job_env",
    "user_added_later",
    "user_env_survives",
]
