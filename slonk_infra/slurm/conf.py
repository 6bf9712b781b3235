"""slurm.conf: controller, plugins, timeouts, node records per worker group, partitions."""

from __future__ import annotations

from collections.abc import Sequence

from slonk_infra import vocab
from slonk_infra.catalog.slurm_versions import (
    FORCE_REQUEUE_ON_FAIL,
    HEALTH_CHECK_TIMEOUT_S,
    NO_ADDR_CACHE_REMOVED,
    RECONFIG_ON_RESTART,
    RECONFIGURE_RESTARTS,
)
from slonk_infra.plan import ClusterPlan, WorkerGroup, def_mem_per_cpu, naming
from slonk_infra.slurm.lines import header, kv_line

# Node records are static and sized by maxNodes, so scaling a pool changes only replica counts.
# They start in FUTURE: hidden from sinfo and never contacted until the worker pod's entrypoint
# brings its own node in, and the preStop hook returns it to FUTURE, so a scaled-down pool leaves no
# DOWN records behind. See docs/node-lifecycle.md.
INITIAL_NODE_STATE = "FUTURE"

# Timeouts for nodes that come and go with pods: a pod replaced by Kubernetes gets its slurmd back
# within a minute or two, so slurmctld waits that long before declaring it dead, and a returning
# node with a valid config goes back into service by itself (ReturnToService=2).
TIMEOUTS: tuple[tuple[str, object], ...] = (
    ("SlurmctldTimeout", 120),
    ("SlurmdTimeout", 180),
    ("MessageTimeout", 30),
    ("BatchStartTimeout", 60),
    ("KillWait", 30),
    ("UnkillableStepTimeout", 180),
    ("InactiveLimit", 0),
    ("MinJobAge", 300),
    ("Waittime", 0),
    ("ReturnToService", 2),
)


def timeouts(plan: ClusterPlan) -> tuple[tuple[str, object], ...]:
    """:data:`TIMEOUTS`, with a backup controller's takeover time where there is one.

    SlurmctldTimeout is only how long a backup controller waits for an unanswering primary before it
    takes control; with one controller nothing reads it. Before taking over, the backup also checks the
    heartbeat file the primary writes in the shared StateSaveLocation, so a primary that is alive but
    slow to answer RPCs keeps control (no two controllers writing the state).
    """
    ctl = plan.declaration.controller
    if ctl.replicas == 1:
        return TIMEOUTS
    return tuple((k, ctl.takeover_seconds if k == "SlurmctldTimeout" else v) for k, v in TIMEOUTS)


# What a failing prolog (the health check found a bad node) does to the job. slurm.conf(5) Prolog: "the
# node being set to a DRAIN state and the job being requeued in a held state, unless nohold_on_prolog_fail
# is configured in SchedulerParameters". With it the job goes back to the queue, not held until an admin
# releases it, so the scheduler starts it on another node. Checked with a real slurmctld and a prolog that
# fails on one node (22.05.8 and 26.05.5): without it the job ends PENDING with
# Reason=launch_failed_requeued_held Priority=0; with it Reason=BeginTime, Restarts=1, the node DRAIN
# ("Prolog error"), and the job runs on another node once its requeue delay (AuthInfo cred_expire, 120 s
# by default) has passed. From 23.02 a job requeued MaxBatchRequeue (5) times in a row is held.
#
# How soon a submitted batch job starts. sbatch's RPC only queues a scheduling request: slurmctld's
# background thread, which wakes once a second (26.05: at each whole second; 22.05: every 1 s of sleep),
# runs the main scheduler when a request is queued AND at least batch_sched_delay seconds have passed since
# it last did (slurm.conf(5) SchedulerParameters batch_sched_delay, "How long, in seconds, the scheduling
# of batch jobs can be delayed", default 3; slurmctld controller.c _slurmctld_background). With the
# default a job submitted within 3 s of any other scheduling event (the previous job's end, a node
# registering) waited up to 3 s on an idle cluster; 0 leaves only the one-second tick. The backfill
# scheduler is a second, independent trigger: bf_interval=1 (default 30; "Higher values result in less
# overhead and better responsiveness") runs it every second when something changed since its last cycle
# (backfill.c _more_work), at a phase of its own, so a job waits for whichever comes first (a median of
# 0.4 s instead of 0.62 s for the tick alone, measured in the container tier). Each backfill cycle is
# bounded by bf_max_time, which defaults to bf_interval: one second of scheduler locks at most, then a
# second of sleep. On a queue of many thousands of pending jobs raise bf_interval (and set bf_continue).
# Sources: https://slurm.schedmd.com/slurm.conf.html#OPT_batch_sched_delay, #OPT_bf_interval, #OPT_bf_max_time.
SCHEDULER_PARAMETERS = ("nohold_on_prolog_fail", "batch_sched_delay=0", "bf_interval=1")


def slurmctld_parameters(plan: ClusterPlan) -> list[str]:
    """``SlurmctldParameters``: workers fetch their files from slurmctld (configless), and from 25.11 every
    slurmctld restart pushes the current files to them (``reconfig_on_restart``).

    A config change rolls the controller only; without the push each slurmd keeps the files it fetched
    at its start (slurmctld logs "appears to have a different slurm.conf" at every registration) and
    applies what it reads itself (prolog, health check, GRES, task prolog) only when its pod is replaced.
    """
    params = ["enable_configless"]
    if plan.slurm_version >= RECONFIG_ON_RESTART:
        params.append("reconfig_on_restart")
    return params


def push_config_after_start(plan: ClusterPlan) -> bool:
    """Whether slurmctld.sh pushes the files to the workers itself (``push-config.sh``): before 23.11.

    From 23.11 to 25.05 nothing can: a reconfigure restarts slurmctld, which returns idle nodes to FUTURE
    and pushes to none (seen on 24.11); their workers take the files when their pods are replaced.
    """
    return plan.slurm_version < RECONFIGURE_RESTARTS


def config_pushed_to_workers(plan: ClusterPlan) -> bool:
    """Whether a config change reaches running workers' slurmd (docs/node-lifecycle.md)."""
    return plan.slurm_version >= RECONFIG_ON_RESTART or push_config_after_start(plan)


def prolog_flags(plan: ClusterPlan) -> list[str]:
    """``PrologFlags``: the prolog (the health check) runs at allocation, and a job it refuses is requeued.

    ForceRequeueOnFail (slurm.conf(5): it implies Alloc) also requeues batch jobs submitted with
    ``--no-requeue``; seen with a prolog failing on one node, 22.05.8 (no such flag) cancels such a job
    and 26.05.5 with the flag requeues it. Requeueable jobs (JobRequeue=1, the default here) are requeued
    on both by :data:`SCHEDULER_PARAMETERS`. Interactive jobs are not requeued: an srun outside a batch
    job exits 1 ("Prolog failure on node ...") and its job is cancelled, on both releases.
    """
    flags = ["Alloc"]
    if plan.slurm_version >= FORCE_REQUEUE_ON_FAIL:
        flags.append("ForceRequeueOnFail")
    return flags


# Node Weight by kind (slurm.conf(5): nodes of the lowest weight are allocated first), so a CPU-only job
# in a partition that also holds accelerators takes CPU nodes first, then GPU nodes, TPU hosts last: one
# busy host keeps a whole multi-host slice from its TPU jobs. CPU nodes keep Slurm's default, 1.
NODE_WEIGHT = {"cpu": None, "gpu": 10, "tpu": 100}


def node_line(group: WorkerGroup) -> str:
    """The ``NodeName=`` record of a worker group."""
    shape = group.shape
    return kv_line(
        [
            ("NodeName", group.hostlist),
            ("Sockets", shape.sockets),
            ("CoresPerSocket", shape.cores_per_socket),
            ("ThreadsPerCore", shape.threads_per_core),
            ("CoreSpecCount", shape.core_spec or None),
            ("RealMemory", shape.real_memory_mib),
            ("Gres", group.gres),
            ("Feature", ",".join(group.features)),
            ("Weight", NODE_WEIGHT[group.kind]),
            ("State", INITIAL_NODE_STATE),
        ]
    )


def gpu_defaults(members: Sequence[WorkerGroup]) -> tuple[int | None, int | None]:
    """A partition's ``DefCpuPerGPU`` and ``DefMemPerGPU``; None for a partition without GPU groups.

    Each is the leanest GPU group's share per GPU, so a job that asks for k GPUs and nothing else never
    needs more CPUs or memory than any member node has for k GPUs. CPUs go by whole cores: with
    ThreadsPerCore=2 Slurm rounds a job's CPUs up to whole cores (seen on 22.05.8 and 26.05.5: a 1-GPU
    job with DefCpuPerGPU=25 got 26 CPUs), so an odd share would let eight 1-GPU jobs want more CPUs
    than an 8-GPU node has and leave a GPU idle. A node with fewer free cores than GPUs gets no CPU default.
    """
    gpu = [g for g in members if g.kind == "gpu" and g.gres_count]
    if not gpu:
        return None, None
    cpus = min(g.shape.cpus // g.shape.threads_per_core // g.gres_count * g.shape.threads_per_core for g in gpu)
    mem = min(g.shape.real_memory_mib // g.gres_count for g in gpu)
    return cpus or None, mem


def partition_lines(plan: ClusterPlan) -> list[str]:
    """``PartitionName=`` records; node lists are the member groups' hostlists."""
    out = []
    by_name = {g.name: g for g in plan.groups}
    yaml_topology = plan.declaration.slurm.topology == "yaml"
    exclusive_nodes = plan.declaration.health.exclusive_nodes
    allow_qos = {spec.name: spec.allow_qos for spec in plan.declaration.slurm.partitions or ()}
    for p in plan.partitions:
        nodes = ",".join(by_name[g].hostlist for g in p.groups) or None
        select_blocks = (
            yaml_topology
            and any(by_name[g].kind == "tpu" for g in p.groups)
            and all(by_name[g].kind == "tpu" for g in p.groups)
        )
        members = [by_name[g] for g in p.groups]
        # Without a default, a job that names no memory is given a whole node's memory and blocks
        # every other job there; the default is the leanest member node's memory per CPU.
        def_mem = def_mem_per_cpu(g.shape for g in members)
        # A job that asks for GPUs gets CPUs and memory per GPU instead of per CPU: with only DefMemPerCPU
        # a one-task job gets one core, 2 CPUs x DefMemPerCPU, about 4 GiB for an 8-GPU job on a 1.8 TB
        # node in the gcp stack's default partitions (review finding n8). slurm.conf(5) calls
        # DefMemPerCPU and DefMemPerGPU mutually exclusive, yet slurmctld 22.05.8 and 26.05.5 take both on
        # one partition without a word and apply one per job: a job asking for GPUs (--gpus, --gres=gpu,
        # --gpus-per-node) gets DefMemPerGPU (MemPerTres=gpu:N; ReqTRES mem=N*GPUs), any other job
        # DefMemPerCPU (MinMemoryCPU). So DefMemPerCPU stays on every partition: without it a CPU-only job
        # on a GPU partition was given the whole node's memory (MinMemoryNode=0). On a whole-node partition
        # a GPU job holds every GPU of its nodes and so gets that many times DefMemPerGPU (seen: --gpus=1
        # on an 8-GPU node, AllocTRES mem=8*DefMemPerGPU); where a partition mixes GPU machines, that is
        # the leanest one's share per GPU on the bigger ones too, and a job wanting more asks --mem.
        cpu_per_gpu, mem_per_gpu = gpu_defaults(members)
        # health.exclusiveNodes: jobs on GPU partitions get whole nodes (slurm.conf(5) OverSubscribe=EXCLUSIVE;
        # 26.05 reads it as Exclusive=NODE, its new spelling, accepting the old one without a warning).
        # Only partitions of GPU groups alone: on the default partitions, which also hold CPU and TPU
        # nodes, whole nodes would hand a one-core job an 8-GPU node or a TPU host (and with it the
        # slice). The health check does not depend on it: prolog and epilog look at the job's own GPUs.
        exclusive = exclusive_nodes and bool(members) and all(g.kind == "gpu" for g in members)
        out.append(
            kv_line(
                [
                    ("PartitionName", p.name),
                    ("Nodes", nodes),
                    ("DefMemPerCPU", def_mem),
                    ("DefCpuPerGPU", cpu_per_gpu),
                    ("DefMemPerGPU", mem_per_gpu),
                    ("Default", p.default),
                    ("PriorityTier", p.priority_tier),
                    ("MaxTime", p.max_time),
                    ("PreemptMode", p.preempt_mode),
                    ("AllowQos", allow_qos.get(p.name) or None),
                    ("OverSubscribe", "EXCLUSIVE" if exclusive else None),
                    ("Topology", "blocks" if select_blocks else None),
                    ("State", "UP"),
                ]
            )
        )
    return out


# slurm.conf(5) AccountingStorageEnforce: associations (a job needs a known user/account pair), limits (the
# associations' and QOS' limits; implies associations), qos (a job's QOS must be one its association may use),
# safe (a job starts only if it can finish within GrpTRESMins limits). Same words in 22.05 and 26.05.
ENFORCE = ("associations", "limits", "qos", "safe")


def slurmdbd_host(plan: ClusterPlan) -> str:
    """AccountingStorageHost: the external slurmdbd's host, else the namespace's slurmdbd Service."""
    accounting = plan.declaration.slurm.accounting
    assert accounting is not None
    if accounting.database.host:
        return accounting.database.host
    # The slurmdbd Service of slonk_infra.kube.accounting, by its fully qualified name (the final dot: no
    # search domain is tried first).
    return f"{vocab.SLURMDBD}.{plan.namespace}.svc.cluster.local."


def accounting_tres(plan: ClusterPlan) -> str:
    """AccountingStorageTRES: the GRES the cluster has, gres/gpu always (the GPU limits are on it).

    slurm.conf(5): billing, cpu, energy, mem, node, fs/disk, pages and vmem are tracked anyway and can only
    be appended to; a limit on a TRES that is not tracked is never enforced.
    """
    gres = {"gpu"} | {g.gres_name for g in plan.groups if g.gres_name}
    return ",".join(f"gres/{name}" for name in sorted(gres))


def accounting_settings(plan: ClusterPlan) -> list[tuple[str, object | None]]:
    """slurm.conf's accounting, enforcement and priority keys; none without ``slurm.accounting``."""
    accounting = plan.declaration.slurm.accounting
    if accounting is None:
        return []
    out: list[tuple[str, object | None]] = [
        ("AccountingStorageType", "accounting_storage/slurmdbd"),
        ("AccountingStorageHost", slurmdbd_host(plan)),
        ("AccountingStoragePort", accounting.database.port),
        ("AccountingStorageEnforce", ",".join(ENFORCE) if accounting.enforce else None),
        ("AccountingStorageTRES", accounting_tres(plan)),
        ("JobAcctGatherType", "jobacct_gather/cgroup"),
    ]
    weights = accounting.priority_weights
    if weights is not None:
        out += [
            ("PriorityType", "priority/multifactor"),
            ("PriorityWeightFairshare", weights.fairshare),
            ("PriorityWeightQOS", weights.qos),
            ("PriorityWeightAge", weights.age),
            ("PriorityWeightJobSize", weights.job_size),
            ("PriorityWeightPartition", weights.partition),
        ]
    return out


def preempt_type(plan: ClusterPlan) -> str:
    """PreemptType: by QOS where a declared QOS preempts others, else by partition priorityTier.

    slurm.conf(5) has one PreemptType; a QOS Preempt list is read only under preempt/qos (sacctmgr(1)), so
    declaring one moves preemption to QOS; partitions' PriorityTier still orders scheduling.
    """
    accounting = plan.declaration.slurm.accounting
    if accounting is not None and any(q.preempt for q in accounting.qos):
        return "preempt/qos"
    return "preempt/partition_prio"


def topology_plugin(plan: ClusterPlan) -> str | None:
    """TopologyPlugin value; None with topology.yaml, which names its plugins per topology."""
    return {"tree": "topology/tree", "block": "topology/block", "yaml": None}[plan.declaration.slurm.topology]


def render_slurm_conf(plan: ClusterPlan) -> str:
    """Render slurm.conf."""
    decl = plan.declaration
    slurm = decl.slurm
    ns = plan.namespace
    gres_types = sorted({g.gres_name for g in plan.groups if g.gres_name})
    settings: list[tuple[str, object | None]] = [
        ("ClusterName", plan.name),
        # Primary first, then the backup (controller.replicas: 2): each is the pod hostname slurmctld
        # compares its own against, with the address clients reach it at.
        *(
            ("SlurmctldHost", f"{naming.controller_pod(i)}({host})")
            for i, host in enumerate(naming.controller_hosts(ns, decl.controller.replicas))
        ),
        ("SlurmctldPort", vocab.SLURMCTLD_PORT),
        ("SlurmdPort", vocab.SLURMD_PORT),
        ("SlurmUser", "slurm"),
        ("SlurmdUser", "root"),
        ("AuthType", "auth/munge"),
        ("CredType", "cred/munge"),
        ("AuthAltTypes", "auth/jwt" if slurm.rest_api else None),
        ("AuthAltParameters", f"jwt_key={vocab.JWT_KEY}" if slurm.rest_api else None),
        # Workers fetch this file from slurmctld (configless): no worker pod mounts or hashes it. A config
        # change rolls only the controller, so its restart must push the new files to every slurmd
        # (before 23.11 push-config.sh does; see push_config_after_start).
        ("SlurmctldParameters", ",".join(slurmctld_parameters(plan))),
        # Pods come back on new IPs. Before 23.11 every daemon caches a node's address unless told not
        # to; 23.11 removed the option (slurmd.sh sets NodeAddr itself on every version).
        ("CommunicationParameters", "NoAddrCache" if plan.slurm_version < NO_ADDR_CACHE_REMOVED else None),
        ("StateSaveLocation", vocab.STATE_DIR),
        ("SlurmdSpoolDir", vocab.SLURMD_SPOOL),
        ("SlurmctldPidFile", "/run/slurm/slurmctld.pid"),
        ("SlurmdPidFile", "/run/slurm/slurmd.pid"),
        ("ProctrackType", "proctrack/cgroup"),
        ("TaskPlugin", "task/cgroup,task/affinity"),
        ("SelectType", "select/cons_tres"),
        ("SelectTypeParameters", "CR_Core_Memory"),
        ("GresTypes", ",".join(gres_types) or None),
        ("TopologyPlugin", topology_plugin(plan)),
        ("SchedulerType", "sched/backfill"),
        ("PreemptType", preempt_type(plan)),
        ("PreemptMode", slurm.preempt_mode),
        ("SchedulerParameters", ",".join(SCHEDULER_PARAMETERS)),
        ("JobRequeue", 1),
        ("MpiDefault", "none"),
        ("PrologFlags", ",".join(prolog_flags(plan))),
        ("Prolog", f"{vocab.SCRIPTS_DIR}/prolog.sh"),
        ("Epilog", f"{vocab.SCRIPTS_DIR}/epilog.sh"),
        # slurmd waits on Prolog and Epilog for ever by default (slurm.conf(5) PrologEpilogTimeout: "The
        # default behavior is to wait indefinitely"); on a timeout it drains the node and requeues the job.
        # Ours are the health check, which concludes within HealthCheckProgram's own limit (launch, its
        # deadline, the scontrol calls: slonk_infra/health/budget.py); twice that leaves it room. From
        # 25.05 PrologTimeout and EpilogTimeout take this value when unset.
        ("PrologEpilogTimeout", 2 * HEALTH_CHECK_TIMEOUT_S),
        # slonk-health on every node between jobs too (drains and publishes a verdict on failure).
        ("HealthCheckProgram", f"{vocab.SCRIPTS_DIR}/healthcheck.sh"),
        ("HealthCheckInterval", plan.declaration.health.interval_seconds),
        # CYCLE spreads the runs over the interval, so a large cluster does not check every node (and
        # publish every verdict) in the same second.
        ("HealthCheckNodeState", "ANY,CYCLE"),
        # Hands each task the node's fabric (NCCL plugin, libfabric) and TPU slice variables, which a
        # task would not otherwise see: it inherits the submitter's environment, not slurmd's.
        ("TaskProlog", f"{vocab.SCRIPTS_DIR}/task-env.sh"),
        # Tasks keep the node's locked-memory limit instead of the login shell's: NCCL over EFA,
        # GPUDirect-RDMA and TCPXO register (lock) large buffers, which a 64 KiB limit refuses.
        ("PropagateResourceLimitsExcept", "MEMLOCK"),
        ("MailProg", "/bin/true"),
        *accounting_settings(plan),
        *timeouts(plan),
    ]
    body = [f"{k}={v}" for k, v in settings if v is not None]
    nodes = [node_line(g) for g in plan.groups]
    return (
        header("slurm.conf", plan.name)
        + "\n".join(body)
        + "\n\n# Worker groups: one line per node pool or TPU slice; node names are the pod hostnames.\n"
        + "\n".join(nodes)
        + "\n\n"
        + "\n".join(partition_lines(plan))
        + "\n"
    )
