"""slurm.conf: controller, plugins, timeouts, node records per worker group, partitions."""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.catalog.slurm_versions import NO_ADDR_CACHE_REMOVED
from slonk_infra.plan import ClusterPlan, WorkerGroup, def_mem_per_cpu, naming
from slonk_infra.slurm.lines import header, kv_line

# Node records are static and sized by maxNodes, so scaling a pool changes only replica counts.
# They start in FUTURE: hidden from sinfo and never contacted until the worker pod's entrypoint
# brings its own node in, and the preStop hook returns it to FUTURE, so a scaled-down pool leaves no
# DOWN records behind. See docs/node-lifecycle.md.
INITIAL_NODE_STATE = "FUTURE"
# Seconds between slonk-health runs on each node; CYCLE spreads the runs over the interval so a
# large cluster does not check every node (and publish every verdict) in the same second.
HEALTH_CHECK_INTERVAL = 300

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
            ("State", INITIAL_NODE_STATE),
        ]
    )


def partition_lines(plan: ClusterPlan) -> list[str]:
    """``PartitionName=`` records; node lists are the member groups' hostlists."""
    out = []
    by_name = {g.name: g for g in plan.groups}
    yaml_topology = plan.declaration.slurm.topology == "yaml"
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
        out.append(
            kv_line(
                [
                    ("PartitionName", p.name),
                    ("Nodes", nodes),
                    ("DefMemPerCPU", def_mem),
                    ("Default", p.default),
                    ("PriorityTier", p.priority_tier),
                    ("MaxTime", p.max_time),
                    ("PreemptMode", p.preempt_mode),
                    ("Topology", "blocks" if select_blocks else None),
                    ("State", "UP"),
                ]
            )
        )
    return out


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
        ("SlurmctldHost", f"{naming.CONTROLLER}-0({naming.controller_host(ns)})"),
        ("SlurmctldPort", vocab.SLURMCTLD_PORT),
        ("SlurmdPort", vocab.SLURMD_PORT),
        ("SlurmUser", "slurm"),
        ("SlurmdUser", "root"),
        ("AuthType", "auth/munge"),
        ("CredType", "cred/munge"),
        ("AuthAltTypes", "auth/jwt" if slurm.rest_api else None),
        ("AuthAltParameters", f"jwt_key={vocab.JWT_KEY}" if slurm.rest_api else None),
        # Workers fetch this file from slurmctld (configless): no worker pod mounts or hashes it.
        ("SlurmctldParameters", "enable_configless"),
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
        ("PreemptType", "preempt/partition_prio"),
        ("PreemptMode", slurm.preempt_mode),
        ("JobRequeue", 1),
        ("MpiDefault", "none"),
        ("PrologFlags", "Alloc"),
        ("Prolog", f"{vocab.SCRIPTS_DIR}/prolog.sh"),
        ("Epilog", f"{vocab.SCRIPTS_DIR}/epilog.sh"),
        # slonk-health on every node between jobs too (drains and publishes a verdict on failure).
        ("HealthCheckProgram", f"{vocab.SCRIPTS_DIR}/healthcheck.sh"),
        ("HealthCheckInterval", HEALTH_CHECK_INTERVAL),
        ("HealthCheckNodeState", "ANY,CYCLE"),
        # Hands each task the node's fabric (NCCL plugin, libfabric) and TPU slice variables, which a
        # task would not otherwise see: it inherits the submitter's environment, not slurmd's.
        ("TaskProlog", f"{vocab.SCRIPTS_DIR}/task-env.sh"),
        # Tasks keep the node's locked-memory limit instead of the login shell's: NCCL over EFA,
        # GPUDirect-RDMA and TCPXO register (lock) large buffers, which a 64 KiB limit refuses.
        ("PropagateResourceLimitsExcept", "MEMLOCK"),
        ("MailProg", "/bin/true"),
        ("AccountingStorageType", "accounting_storage/slurmdbd" if slurm.accounting else None),
        ("AccountingStorageHost", slurm.accounting_host if slurm.accounting else None),
        ("JobAcctGatherType", "jobacct_gather/cgroup" if slurm.accounting else None),
        *TIMEOUTS,
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
