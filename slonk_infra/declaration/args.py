"""The cluster declaration as ``TypedDict`` types (generated: do not edit).

Generated from :mod:`slonk_infra.declaration.model` by ``python tools/generate.py``; a test fails when this
file is stale. Pydantic validates the values (allowed literals, ranges, cross-field rules)
when :class:`slonk_infra.Cluster` is constructed. Fields typed ``pulumi.Input`` also take a Pulumi
Output (see :mod:`slonk_infra.declaration.inputs`).
"""

# No ``from __future__ import annotations``: Pulumi's component analyzer reads these annotations.
from typing import NotRequired, TypedDict

import pulumi


class KubernetesArgs(TypedDict):
    """Where the Slurm cluster's Kubernetes objects go."""

    create: NotRequired[bool]
    """Create a GKE/EKS cluster (false: use an existing one). Default: False."""
    kubeconfig: NotRequired[pulumi.Input[str]]
    """Kubeconfig (a path, or its contents) of an existing cluster."""
    context: NotRequired[pulumi.Input[str]]
    """Kubeconfig context for an existing cluster."""
    version: NotRequired[str]
    """Kubernetes minor version of a created cluster (of an existing one: the version it runs). 1.29 or later: every Slurm pod runs munged as a native sidecar container (SidecarContainers, on by default from 1.29). Default: 1.33."""
    namespace: NotRequired[str]
    """Namespace holding every Slurm object. Default: slurm."""
    system_nodes: NotRequired[int]
    """gcp/aws: nodes of the system pool the library creates for the controller, login and slurmrestd pods (at least controller.replicas: two controllers never share a node). Default: 2."""
    authorized_networks: NotRequired[list[str]]
    """gcp/aws with create: the CIDRs that may reach the created cluster's public control-plane endpoint (GKE master authorized networks, EKS publicAccessCidrs): your office, VPN or CI runner, where `pulumi up` runs. Required when the library creates the cluster; ['0.0.0.0/0'] opens the endpoint to the internet on purpose."""


class ImageArgs(TypedDict):
    """The one container image every Slurm role runs."""

    reference: str
    """Image reference, pinned by digest: registry/repo[:tag]@sha256:..."""
    cuda_version: str
    """CUDA version the image carries."""
    slurm_version: str
    """Slurm version the image carries (decides what is rendered)."""


class AcceleratorRequestArgs(TypedDict):
    """A portable accelerator request, resolved to a machine type per cloud through the catalog."""

    type: str
    """Accelerator name from the catalog (h100, h200, b200, l4, ...)."""
    count: int
    """Accelerators per node."""


class ReservationArgs(TypedDict):
    """Capacity to consume: a named reservation (GCP) or capacity reservation / block (AWS)."""

    name: pulumi.Input[str]
    """Reservation name (GCP) or capacity reservation id (AWS)."""
    capacity_block: NotRequired[bool]
    """AWS: the reservation is a Capacity Block. Default: False."""


class TaintArgs(TypedDict):
    """A Kubernetes node taint."""

    key: str
    """Taint key."""
    value: NotRequired[str]
    """Taint value."""
    effect: NotRequired[str]
    """Taint effect. One of: NoSchedule, PreferNoSchedule, NoExecute. Default: NoSchedule."""


class PoolArgs(TypedDict):
    """A pool of identical GPU or CPU nodes; one Kubernetes node pool and one worker StatefulSet."""

    name: str
    """Pool name; node pool, StatefulSet and Slurm node names derive from it."""
    kind: str
    """gpu or cpu (TPUs are declared under tpuSlices). One of: gpu, cpu."""
    accelerator: NotRequired[AcceleratorRequestArgs]
    """Portable request, e.g. {type: h100, count: 8}; resolved per cloud."""
    machine_type: NotRequired[str]
    """Explicit machine type (overrides resolution)."""
    machine_types: NotRequired[dict[str, str]]
    """Per-cloud machine type choice among those the request matches."""
    nodes: int
    """Nodes in the pool (= worker pod replicas)."""
    max_nodes: NotRequired[int]
    """Slurm node records kept for the pool; scaling up to it needs no config change."""
    spot: NotRequired[bool]
    """Use spot / preemptible capacity. Default: False."""
    reservation: NotRequired[ReservationArgs]
    """Reserved capacity to consume."""
    compact_placement: NotRequired[bool]
    """Compact placement / cluster placement group (default: on for GPU pools)."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels."""
    taints: NotRequired[list[TaintArgs]]
    """Extra node taints."""
    features: NotRequired[list[str]]
    """Extra Slurm node Features."""


class TpuSliceArgs(TypedDict):
    """One or more identical TPU slices; each slice is its own node pool and worker StatefulSet."""

    name: str
    """Base name; slices are named <name>-0, <name>-1, ..."""
    generation: str
    """TPU generation (v4, v5e, v5p, v6e, tpu7x)."""
    topology: str
    """Slice topology, e.g. 4x4x4 (v5p) or 4x8 (v6e)."""
    slices: NotRequired[int]
    """Number of identical slices. Default: 1."""
    spot: NotRequired[bool]
    """Use spot capacity. Default: False."""
    reservation: NotRequired[ReservationArgs]
    """Reserved capacity to consume."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels."""
    taints: NotRequired[list[TaintArgs]]
    """Extra node taints."""
    features: NotRequired[list[str]]
    """Extra Slurm node Features."""


class StorageArgs(TypedDict):
    """A shared filesystem mounted on every Slurm pod (ReadWriteMany)."""

    name: str
    """Volume name (home, scratch, ...)."""
    kind: str
    """filestore (GCP), efs / fsx-lustre (AWS), nfs-server, nfs-export. One of: filestore, efs, fsx-lustre, nfs-server, nfs-export."""
    capacity_gib: NotRequired[int]
    """Capacity in GiB. Default: 1024."""
    mount_path: NotRequired[str]
    """Mount path in every pod. Default: /home."""
    tier: NotRequired[str]
    """Filestore tier or FSx deployment type (cloud default)."""
    server: NotRequired[str]
    """nfs-export: NFS server address."""
    export_path: NotRequired[str]
    """nfs-export: exported path."""


class PartitionArgs(TypedDict):
    """A Slurm partition over some pools / slices."""

    name: str
    """Partition name."""
    pools: NotRequired[list[str]]
    """Pool or TPU slice base names, or '*' for every node."""
    priority_tier: NotRequired[int]
    """Higher tiers preempt lower ones. Default: 1."""
    default: NotRequired[bool]
    """Default partition for jobs that name none. Default: False."""
    max_time: NotRequired[str]
    """Slurm MaxTime: MINUTES, MM:SS, HH:MM:SS, DAYS-HH, DAYS-HH:MM, DAYS-HH:MM:SS or UNLIMITED. Default: UNLIMITED."""
    preempt_mode: NotRequired[str]
    """Per-partition PreemptMode (default: the cluster's). One of: OFF, REQUEUE, CANCEL, SUSPEND."""
    allow_qos: NotRequired[list[str]]
    """QOS whose jobs may run here (AllowQos; declared in slurm.accounting.qos, or normal); default: every QOS."""


class DatabaseArgs(TypedDict):
    """Where job accounting is stored: which slurmdbd slurmctld talks to, and its database."""

    kind: NotRequired[str]
    """in-cluster: MariaDB (a StatefulSet with a retained claim) and slurmdbd run as pods in the namespace; cloud: slurmdbd in the namespace on the cloud's managed MySQL (Cloud SQL, RDS), created with backups and deletion protection; external: an existing slurmdbd at host:port, yours to run and upgrade. One of: in-cluster, cloud, external. Default: in-cluster."""
    host: NotRequired[str]
    """external: the host name or address of the existing slurmdbd (AccountingStorageHost). Not allowed with in-cluster or cloud, whose slurmdbd is the namespace's own Service."""
    port: NotRequired[int]
    """The port slurmdbd listens on (AccountingStoragePort; slurmdbd's default 6819). Default: 6819."""
    storage_gib: NotRequired[int]
    """in-cluster / cloud: size of the database's volume in GiB (default 50). Not allowed with external."""
    memory_mib: NotRequired[int]
    """in-cluster: the MariaDB container's memory limit in MiB (default 3072). Its InnoDB buffer pool gets all but 1024 MiB of it (slurmdbd 26.05 asks for 2048 MiB of buffer pool and logs a warning below); the request is 512 MiB less than the limit. Only with kind: in-cluster."""
    instance_class: NotRequired[str]
    """cloud: the database server's size: a Cloud SQL machine tier on gcp (default db-custom-2-8192: 2 vCPUs, 8 GiB) or an RDS DB instance class on aws (default db.m6g.large: 2 vCPUs, 8 GiB). Only with kind: cloud."""
    high_availability: NotRequired[bool]
    """cloud: a standby in a second zone that takes over on failure (Cloud SQL availability type REGIONAL, RDS Multi-AZ); default false (one zone; backups and point-in-time recovery still on). Only with kind: cloud."""
    private_services_access: NotRequired[str]
    """cloud on gcp: how Cloud SQL gets its private address in gcp.network. create (the default): this stack reserves a range for Google's services and peers the network with them (private services access); existing: the network already has that connection (one per network: another stack or service made it), and Cloud SQL takes an address from its ranges. Only with kind: cloud. One of: create, existing."""


class PriorityWeightsArgs(TypedDict):
    """The weights of priority/multifactor (slurm.conf(5) PriorityWeight*): a job's priority is the sum of"""

    fairshare: NotRequired[int]
    """PriorityWeightFairshare: how much an account's unused share lifts its jobs. Default: 10000."""
    qos: NotRequired[int]
    """PriorityWeightQOS: how much the job's QOS priority counts. Default: 10000."""
    age: NotRequired[int]
    """PriorityWeightAge: how much time waiting in the queue counts. Default: 1000."""
    job_size: NotRequired[int]
    """PriorityWeightJobSize: how much the job's size counts. Default: 0."""
    partition: NotRequired[int]
    """PriorityWeightPartition: how much the partition's PriorityJobFactor counts (not its priorityTier, which orders and preempts partitions regardless). Default: 0."""


class AccountArgs(TypedDict):
    """A Slurm account (a bank account in the association tree): its share, its limits and its users."""

    name: str
    """Account name (lower case; 'root' is Slurm's own and the default parent)."""
    parent: NotRequired[str]
    """Parent account (another declared account); default: root."""
    fairshare: NotRequired[int]
    """Fairshare: the account's share among its siblings (sacctmgr Fairshare); relative, not a percentage. Default: 1."""
    qos: NotRequired[list[str]]
    """QOS the account's users may submit with (sacctmgr QOS); default: every declared QOS and normal."""
    default_qos: NotRequired[str]
    """QOS of a job that names none (sacctmgr DefaultQOS); one of `qos`."""
    max_gpus_per_user: NotRequired[int]
    """GPUs each user may hold at once in this account (GrpTRES=gres/gpu=N on each user's association)."""
    max_gpus: NotRequired[int]
    """GPUs the account and its sub-accounts may hold at once (GrpTRES=gres/gpu=N on the account)."""
    users: NotRequired[list[str]]
    """Login names of the account's users (declared `users`, or the directory's with `directory`). A user's default account is the first account listing them."""


class QosArgs(TypedDict):
    """A Quality of Service: a priority, whom it preempts and per-user / per-account limits."""

    name: str
    """QOS name ('normal' is Slurm's own and may not be declared)."""
    priority: NotRequired[int]
    """Priority added through PriorityWeightQOS (sacctmgr Priority). Default: 0."""
    preempt: NotRequired[list[str]]
    """QOS whose jobs this QOS's jobs may preempt (sacctmgr Preempt). Any non-empty list makes slurm.conf PreemptType=preempt/qos, replacing preemption by partition priorityTier."""
    max_gpus_per_user: NotRequired[int]
    """GPUs each user may hold at once with this QOS (MaxTRESPerUser=gres/gpu=N)."""
    max_gpus_per_account: NotRequired[int]
    """GPUs each account may hold at once with this QOS (MaxTRESPerAccount=gres/gpu=N)."""
    max_wall: NotRequired[str]
    """Longest run time of one job with this QOS (MaxWall): MINUTES, HH:MM:SS, DAYS-HH:MM:SS, ..."""


class AccountingArgs(TypedDict):
    """Job accounting through slurmdbd, multifactor priority, and the accounts, users and QOS it holds."""

    database: NotRequired[DatabaseArgs]
    """The slurmdbd slurmctld reports to and its database."""
    enforce: NotRequired[bool]
    """AccountingStorageEnforce=associations,limits,qos,safe: a job runs only under a known association, within its limits and QOS. false: slurmdbd only records jobs (what the old `accounting: true` did). Default: True."""
    retain_months: NotRequired[int]
    """in-cluster / cloud: months slurmdbd keeps job, step, reservation, suspend, event and transaction records before deleting them (slurmdbd.conf Purge*After; the usage rollups behind sreport and fair share are kept twice as long); null keeps every record and the database grows with every job. An external slurmdbd's own settings apply there. Default: 12."""
    priority_weights: NotRequired[PriorityWeightsArgs]
    """priority/multifactor weights; null keeps Slurm's default priority/basic (first in, first out)."""
    accounts: NotRequired[list[AccountArgs]]
    """Accounts, parents before or after their children; users join them."""
    qos: NotRequired[list[QosArgs]]
    """QOS beside Slurm's own 'normal'."""


class SlurmArgs(TypedDict):
    """Slurm settings that are not derived from hardware."""

    partitions: NotRequired[list[PartitionArgs]]
    """Partitions; default is the Slonk pattern (low / general / high plus one per accelerator)."""
    preempt_mode: NotRequired[str]
    """Cluster PreemptMode for partition_prio preemption. One of: OFF, REQUEUE, CANCEL, SUSPEND,GANG. Default: REQUEUE."""
    accounting: NotRequired[AccountingArgs]
    """Job accounting through slurmdbd, fair share and quotas: the database, priority weights, accounts and QOS (docs/accounting.md); unset: none. The old `true` (with accountingHost) still reads, as an external slurmdbd that only records jobs; `false` is unset."""
    accounting_host: NotRequired[str]
    """The old form: with accounting: true, the existing slurmdbd's host (read as accounting.database {kind: external, host}). New stacks use accounting.database.host."""
    gres_autodetect: NotRequired[str]
    """gres.conf AutoDetect (nvml needs an image built with NVML). One of: off, nvml. Default: off."""
    topology: NotRequired[str]
    """tree (topology.conf switches), block (topology/block), yaml (topology.yaml). One of: tree, block, yaml. Default: tree."""
    rest_api: NotRequired[bool]
    """Run slurmrestd (adds JWT auth). Default: False."""


class LoginArgs(TypedDict):
    """Login nodes."""

    replicas: NotRequired[int]
    """Login pods. Default: 1."""
    service_type: NotRequired[str]
    """Type of the SSH Service. One of: ClusterIP, LoadBalancer. Default: ClusterIP."""
    load_balancer_source_ranges: NotRequired[list[str]]
    """CIDRs that may reach a LoadBalancer login Service. Default on gcp/aws: the private ranges only (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), never the whole internet; list your offices' or VPN's ranges, or ['0.0.0.0/0'] to open SSH to the world on purpose. When every range is private the load balancer is the cloud's internal one (reached from the VPC, a peered network or a VPN); a public range makes it internet-facing (on aws: in aws.publicSubnetIds)."""


class StateBackupArgs(TypedDict):
    """Scheduled archives of slurmctld's state (StateSaveLocation) on a declared shared filesystem."""

    storage: str
    """Name of the declared storage (storage[].name) the archives go to, under .slurm/<cluster>/backups; readable by the slurm user only."""
    schedule: NotRequired[str]
    """When to archive, as a Kubernetes CronJob schedule (UTC). Default: */30 * * * *."""
    keep: NotRequired[int]
    """Archives kept; older ones are removed. Default: 48."""


class ControllerArgs(TypedDict):
    """The Slurm controller."""

    state_gib: NotRequired[int]
    """slurmctld state volume size in GiB. Default: 100."""
    storage_class: NotRequired[str]
    """StorageClass of the state volume."""
    replicas: NotRequired[int]
    """slurmctld pods: 1, or 2 for a primary and a backup controller (Slurm HA) on different nodes (and zones where the system pool spans several); 2 needs stateStorage. Default: 1."""
    state_storage: NotRequired[str]
    """Name of a declared shared filesystem (storage[].name) holding StateSaveLocation, under .slurm/<cluster>/state, so a backup controller can take over; required with replicas: 2. Unset: the state is on a volume of its own (stateGib, storageClass)."""
    takeover_seconds: NotRequired[int]
    """With replicas: 2, how long the backup waits for a primary that neither answers nor writes its heartbeat before it takes control (SlurmctldTimeout; with one controller it is 120). Shorter fails over sooner; longer rides out a primary pod's restart or a network pause without a takeover and the hand-back that follows (docs/node-lifecycle.md). Default: 15."""
    backup: NotRequired[StateBackupArgs]
    """Scheduled archives of the controller state (off when unset)."""


class GcpMaintenanceArgs(TypedDict):
    """When GKE may upgrade a created cluster: a weekly window, and a hold on node upgrades."""

    window_start: NotRequired[str]
    """UTC time of day (HH:MM) the maintenance window opens on each of `days`. Default: 03:00."""
    window_hours: NotRequired[int]
    """Length of each window in hours (GKE: 4 or more). Default: 8."""
    days: NotRequired[list[str]]
    """UTC weekdays the window recurs on (RFC 5545 BYDAY spelling)."""
    hold_node_upgrades: NotRequired[bool]
    """Hold every automatic minor and node upgrade (GKE maintenance exclusion NO_MINOR_OR_NODE_UPGRADES until the version's end of support): a GPU/TPU node is never upgraded in the middle of a run; the control plane still gets patches in the window. Upgrade nodes on purpose (docs/clouds.md, Maintenance). Default: True."""


class GcpArgs(TypedDict):
    """GCP settings."""

    project: pulumi.Input[str]
    """GCP project id."""
    network: NotRequired[pulumi.Input[str]]
    """VPC network. Default: default."""
    subnetwork: NotRequired[pulumi.Input[str]]
    """Subnetwork for nodes."""
    release_channel: NotRequired[str]
    """GKE release channel. One of: RAPID, REGULAR, STABLE, EXTENDED. Default: REGULAR."""
    gpu_network_range: NotRequired[str]
    """Private IPv4 range the GPU NIC subnets (GPUDirect-TCPXO/RDMA VPCs the library creates) are carved from, /8 to /19; must not overlap the cluster's own network (GKE's guides use 192.168.0.0/16). Default: 192.168.0.0/16."""
    maintenance: NotRequired[GcpMaintenanceArgs]
    """Maintenance window and upgrade hold of a created GKE cluster."""
    periodic_host_maintenance: NotRequired[bool]
    """Give GPU pools the host maintenance interval the catalog names for their machine (PERIODIC on A3 High and A3 Mega: announced, scheduled host maintenance). It selects the capacity pool the VMs come from; set false when your reservation or capacity is not in a periodic-maintenance pool. Default: True."""


class AwsArgs(TypedDict):
    """AWS settings."""

    vpc_id: pulumi.Input[str]
    """VPC id."""
    subnet_ids: list[pulumi.Input[str]]
    """Private subnets of the VPC, one per Availability Zone: the cluster, the system and CPU groups and EFS use them all; GPU groups and FSx use the first one in `zone` (looked up at deploy time; a zone none of them is in stops the deploy), or the first subnet when `zone` is unset. Tagged kubernetes.io/role/internal-elb=1 when the login Service is a LoadBalancer."""
    public_subnet_ids: NotRequired[list[pulumi.Input[str]]]
    """Public subnets (routed to an internet gateway) for an internet-facing login load balancer: required when login.loadBalancerSourceRanges lists a public range; tagged kubernetes.io/role/elb=1."""
    node_role_arn: NotRequired[pulumi.Input[str]]
    """Existing node IAM role (else one is created)."""
    admin_role_arns: NotRequired[list[str]]
    """Principals given cluster admin access."""


class XidRuleArgs(TypedDict):
    """XID codes that call for one action (NVIDIA's XID catalog gives each code's meaning)."""

    codes: list[int]
    """XID codes this rule covers."""
    action: str
    """What to do when one of them is reported. One of: none, restart-pod, replace-machine, needs-person."""
    meaning: NotRequired[str]
    """What the codes mean, quoted in the failure reason."""


class PcieArgs(TypedDict):
    """PCIe link expectations."""

    require_max_width: NotRequired[bool]
    """Fail when the current link width is below the link's maximum width. Default: True."""
    min_width: NotRequired[int]
    """Lowest acceptable maximum link width (e.g. 16); unset: not checked."""
    min_generation: NotRequired[int]
    """Lowest acceptable maximum link generation of GPU and slot together (e.g. 5 for H100 SXM hosts); unset: not checked."""
    check_generation_when_busy: NotRequired[bool]
    """While the GPU is busy, fail when the current generation is below the link's maximum. Default: True."""


class GpuHealthArgs(TypedDict):
    """GPU checks' thresholds. ``count`` 0 means the node has no GPUs and the GPU checks do not run."""

    count: NotRequired[int]
    """GPUs this node must have (from the machine catalog). Default: 0."""
    require_ecc: NotRequired[bool]
    """Fail when ECC is disabled or unsupported. Default: True."""
    max_volatile_uncorrectable_ecc: NotRequired[int]
    """Uncorrectable ECC errors tolerated since the driver loaded. Default: 0."""
    max_aggregate_uncorrectable_ecc: NotRequired[int]
    """Uncorrectable ECC errors tolerated over the GPU's lifetime; unset: not checked (row remapping repairs them, and its state is checked)."""
    max_volatile_correctable_ecc: NotRequired[int]
    """Correctable ECC errors tolerated since the driver loaded; unset: not checked."""
    tolerate_remap_pending: NotRequired[bool]
    """Accept remapped rows waiting for a GPU reset (false: replace-machine). Default: False."""
    tolerate_remap_failure: NotRequired[bool]
    """Accept a failed row remapping (false: needs-person; the GPU is out of spare rows). Default: False."""
    xid_wait_ms: NotRequired[int]
    """How long boot and interval runs listen for XID events (NVML delivers only events raised while listening). Default: 1000."""
    xid_rules: NotRequired[list[XidRuleArgs]]
    """Which XID codes call for which action."""
    unknown_xid_action: NotRequired[str]
    """Action for an XID no rule names. One of: none, restart-pod, replace-machine, needs-person. Default: needs-person."""
    pcie: NotRequired[PcieArgs]
    """PCIe link expectations."""
    fatal_throttle_reasons: NotRequired[dict[str, str]]
    """Clock-event (throttle) reasons that fail the check, with their action."""
    max_idle_processes: NotRequired[int]
    """Compute processes tolerated on an idle GPU. Default: 0."""
    max_idle_memory_mib: NotRequired[int]
    """GPU memory in use (the driver's reserve not counted) tolerated on an idle GPU; an idle H100 reads 0. Default: 256."""
    idle_grace_seconds: NotRequired[float]
    """How long an epilog waits for a finished job's processes to let go. Default: 5.0."""
    leftover_action: NotRequired[str]
    """Action for leftover processes or memory. One of: none, restart-pod, replace-machine, needs-person. Default: restart-pod."""


class TpuHealthArgs(TypedDict):
    """TPU checks. ``chipsPerHost`` 0 means the node has no TPU and the check does not run."""

    chips_per_host: NotRequired[int]
    """TPU chips this slice host must see (4 on most multi-host slices). Default: 0."""
    device_dir: NotRequired[str]
    """Where the TPU device nodes (accel*, vfio/*) appear. Default: /dev."""


class DiskHealthArgs(TypedDict):
    """Scratch space and the shared home filesystem."""

    scratch_path: NotRequired[str]
    """Node-local scratch; unset: not checked. Default: /tmp."""
    min_free_gib: NotRequired[float]
    """Least free space on scratch, in GiB. Default: 10.0."""
    min_free_percent: NotRequired[float]
    """Least free space on scratch, in percent. Default: 5.0."""
    low_space_action: NotRequired[str]
    """Action when scratch is short of space (a fresh pod gets a fresh emptyDir). One of: none, restart-pod, replace-machine, needs-person. Default: restart-pod."""
    home_path: NotRequired[str]
    """The shared home filesystem; unset: not checked. Default: /home."""
    home_must_be_mount: NotRequired[bool]
    """Fail when home is a plain directory rather than a mounted filesystem. Default: True."""
    timeout_seconds: NotRequired[float]
    """How long a filesystem may take to answer before it counts as hung. Default: 5.0."""


class HealthArgs(TypedDict):
    """Everything the node health checks need to know about a node, rendered per pool or slice."""

    gpu: NotRequired[GpuHealthArgs]
    """GPU checks."""
    tpu: NotRequired[TpuHealthArgs]
    """TPU checks."""
    disk: NotRequired[DiskHealthArgs]
    """Scratch and home checks."""
    exclusive_nodes: NotRequired[bool]
    """Jobs get whole nodes on partitions of GPU pools alone (slurm.conf OverSubscribe=EXCLUSIVE); false: jobs may share GPU nodes. Either way prolog and epilog demand only the job's own GPUs idle. Default: True."""
    interval_seconds: NotRequired[int]
    """Seconds between Slurm's runs of the health check on every node (slurm.conf HealthCheckInterval); a fault found between jobs drains the node within this time. Longer than the 60 s slurmd gives one run (Slurm 26.05 requires its HealthCheckTimeout below the interval). Default: 300."""
    instance_id_file: NotRequired[str]
    """A file holding the cloud instance id, used for identity when NVML has no GPUs."""
    machine_id_file: NotRequired[str]
    """The last resort for identity. Default: /etc/machine-id."""


class UserArgs(TypedDict):
    """A person who logs in to the login pods and runs jobs, the same UID/GID on every pod."""

    name: str
    """Login name (lowercase POSIX name, at most 32 characters)."""
    uid: int
    """User id (1000 and up), identical on login, controller and workers."""
    gid: NotRequired[int]
    """Primary group id (default: the uid)."""
    group: NotRequired[str]
    """Primary group name (default: the user name)."""
    ssh_authorized_keys: NotRequired[list[str]]
    """OpenSSH public keys (one 'type base64 [comment]' line each)."""
    sudo: NotRequired[bool]
    """Passwordless sudo on the login and worker pods (the login container then allows privilege escalation, which setuid sudo needs). Default: False."""
    shell: NotRequired[str]
    """Login shell. One of: /bin/bash, /bin/sh. Default: /bin/bash."""


class DirectoryArgs(TypedDict):
    """An LDAP directory the pods resolve users from through SSSD (for sites that have one)."""

    uris: list[str]
    """LDAP servers, ldaps://host[:port] or ldap://host[:port]."""
    search_base: str
    """Base DN of users and groups, e.g. dc=example,dc=org."""
    start_tls: NotRequired[bool]
    """StartTLS on ldap:// servers (ldaps:// is TLS already). Default: True."""
    bind_dn: NotRequired[str]
    """DN to bind as (default: anonymous bind)."""
    bind_password_secret: NotRequired[str]
    """Name of an existing Secret in the namespace whose 'password' key is the bind password."""
    ca_secret: NotRequired[str]
    """Name of an existing Secret whose 'ca.crt' key is the directory's CA certificate."""
    min_id: NotRequired[int]
    """Lowest UID/GID SSSD returns. Default: 1000."""


class SignalsArgs(TypedDict):
    """Which Kubernetes node states drain the Slurm node (besides a person's cordon and health verdicts)."""

    termination_taints: NotRequired[list[str]]
    """Taint keys meaning the machine is about to go away (GKE, EKS, autoscalers)."""
    maintenance_taints: NotRequired[list[str]]
    """Taint keys meaning host maintenance runs."""
    maintenance_labels: NotRequired[dict[str, str]]
    """Label key -> value meaning host maintenance runs ('' matches any value)."""
    scheduled_maintenance_label: NotRequired[str]
    """Label holding the Unix time of announced host maintenance ('' to ignore it). Default: cloud.google.com/scheduled-maintenance-time."""
    scheduled_maintenance_lead_seconds: NotRequired[int]
    """Drain this long before announced maintenance starts, so running jobs can end (0: never). Default: 3600."""
    failing_conditions: NotRequired[list[str]]
    """Node condition types that drain the Slurm node when their status is not True."""


class RemediationArgs(TypedDict):
    """What the controller may do to a drained, idle node whose health verdict asks for an action."""

    enabled: NotRequired[bool]
    """Act on verdicts (false: only drain and report). Default: True."""
    max_actions_per_window: NotRequired[int]
    """Pod restarts plus machine replacements allowed per window, cluster-wide. Default: 4."""
    window_seconds: NotRequired[int]
    """Length of the rate-limit window. Default: 600."""
    max_pool_fraction: NotRequired[float]
    """Most of a pool under remediation at once (rounded down, but at least one node). Default: 0.1."""
    repeat_window_seconds: NotRequired[int]
    """A machine (fingerprint) that fails again this soon after a remediation is kept out. Default: 604800."""
    timeout_seconds: NotRequired[int]
    """A remediation not finished after this long needs a person. Default: 1800."""


class OperationsArgs(TypedDict):
    """The Slurm <-> Kubernetes state-sync and remediation controller (one Deployment)."""

    enabled: NotRequired[bool]
    """Deploy the controller. Default: False."""
    image: NotRequired[str]
    """Controller image (default: the cluster's one image)."""
    interval_seconds: NotRequired[float]
    """Seconds between sync ticks. Default: 15.0."""
    slurmrestd_url: NotRequired[str]
    """slurmrestd address: http://host:port or unix:/path (default: the cluster's slurmrestd Service)."""
    jwt_key_file: NotRequired[str]
    """HS256 key slurmctld checks tokens with (the slurm-jwt Secret, mounted read-only). Default: /etc/slonk-ops/jwt/jwt_hs256.key."""
    slurm_user: NotRequired[str]
    """User the controller's tokens name; must be SlurmUser or root to change node states. Default: slurm."""
    token_lifetime_seconds: NotRequired[int]
    """Lifetime of each token the controller signs. Default: 3600."""
    scontrol_fallback: NotRequired[bool]
    """Change node states with scontrol (token auth) when slurmrestd has no node update (22.05). Default: True."""
    reason_prefix: NotRequired[str]
    """Prefix of every drain reason the controller writes; only such drains are ever lifted. Default: slonk:."""
    owned_reason_prefixes: NotRequired[list[str]]
    """Other drain-reason prefixes the controller may take over (the health checker's)."""
    worker_selector: NotRequired[str]
    """Label selector of the worker pods (one per Slurm node, named like it). Default: app.kubernetes.io/name=slurm,app.kubernetes.io/component=worker."""
    node_selector: NotRequired[str]
    """Label selector of the Kubernetes nodes to list ('' all)."""
    signals: NotRequired[SignalsArgs]
    """Kubernetes states that drain."""
    remediation: NotRequired[RemediationArgs]
    """Remediation limits."""
    state_dir: NotRequired[str]
    """Volume for the controller's memory (state.json) and the job hardware record (jobs.jsonl). Default: /var/lib/slonk-ops."""
    state_volume_gib: NotRequired[int]
    """Size of the state volume. Default: 1."""
    metrics_port: NotRequired[int]
    """Port of the Prometheus endpoint. Default: 8000."""
    service_monitor: NotRequired[bool]
    """Declare a ServiceMonitor (needs the Prometheus operator's CRDs). Default: False."""
    scrape_interval: NotRequired[str]
    """ServiceMonitor scrape interval. Default: 30s."""
    cpu_request: NotRequired[str]
    """CPU request of the controller container. Default: 100m."""
    memory_request: NotRequired[str]
    """Memory request of the controller container. Default: 256Mi."""
    memory_limit: NotRequired[str]
    """Memory limit of the controller container. Default: 1Gi."""
    metrics_namespaces: NotRequired[list[str]]
    """Namespaces whose pods may reach the metrics port through the namespace's default-deny NetworkPolicy (matched on kubernetes.io/metadata.name); [] admits none."""
    cloud_actions: NotRequired[bool]
    """gcp/aws: the controller sizes the GPU/CPU worker pools' machines (grows them at once, removes only empty machines) and asks the cloud for a new machine on replace-machine verdicts; false: it only cordons and annotates, and Pulumi sizes the pools. Default: True."""
    report_faulty_hosts: NotRequired[bool]
    """gcp: for A3/A4 machines bound to a reservation, report a replace-machine verdict's host to Compute Engine as faulty (instances.reportHostAsFaulty) instead of recreating the VM. Off by default: the AI Hypercomputer guide gives GKE nodes their own procedure, the repair can take days on A3 High and Mega, and auto-repair recreating the node cancels a report in progress (not verified on GKE here). Default: False."""
    scale_in_grace_seconds: NotRequired[int]
    """A machine younger than this is never removed (a node that just joined has no pod yet). Default: 600."""
    max_removals_per_tick: NotRequired[int]
    """Most machines removed from the worker pools in one tick, cluster-wide. Default: 2."""


class ClusterArgs(TypedDict):
    """A whole Slurm-on-Kubernetes cluster, declared once for any cloud."""

    name: str
    """Cluster name (Slurm ClusterName, cloud cluster)."""
    cloud: str
    """gcp, aws or local. One of: gcp, aws, local."""
    region: NotRequired[str]
    """Cloud region."""
    zone: NotRequired[str]
    """GCP: the zone of the GPU/TPU pools (and the system pool, zonal Filestore). AWS: checked against the region only; GPU groups and FSx run in the Availability Zone of aws.subnetIds[0], which must be your reservation's."""
    kubernetes: NotRequired[KubernetesArgs]
    """Target Kubernetes."""
    image: ImageArgs
    """The one image for every Slurm role."""
    pools: NotRequired[list[PoolArgs]]
    """GPU and CPU worker pools."""
    tpu_slices: NotRequired[list[TpuSliceArgs]]
    """TPU slices."""
    storage: list[StorageArgs]
    """Shared filesystems; one mounts at /home."""
    slurm: NotRequired[SlurmArgs]
    """Slurm settings."""
    login: NotRequired[LoginArgs]
    """Login nodes."""
    controller: NotRequired[ControllerArgs]
    """Controller."""
    gcp: NotRequired[GcpArgs]
    """GCP settings (cloud: gcp)."""
    aws: NotRequired[AwsArgs]
    """AWS settings (cloud: aws)."""
    health: NotRequired[HealthArgs]
    """Node health-check thresholds (slonk-health at pod start, on Slurm's interval, in prolog/epilog); GPU and TPU counts per node come from the catalog."""
    users: NotRequired[list[UserArgs]]
    """People who log in and run jobs: name, uid, gid, SSH keys, sudo; the same on every pod."""
    directory: NotRequired[DirectoryArgs]
    """An LDAP directory to resolve further users from through SSSD (optional)."""
    operations: NotRequired[OperationsArgs]
    """The operations controller (Slurm <-> Kubernetes state sync, remediation, metrics); off by default, needs slurm.restApi."""
