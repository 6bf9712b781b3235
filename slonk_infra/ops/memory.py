"""In-memory stand-ins for the controller's three sides: a cloud, Slurm and Kubernetes held in one :class:`World`.

For tests, the operations benchmark and dry runs: :class:`Controller` runs its real tick against them.
The cloud follows what the clouds document for the calls the controller makes:

* ``pool_size``: the MIG's ``targetSize`` / the ASG's ``DesiredCapacity``.
* ``grow``: GKE ``instanceGroupManagers.resize`` / EKS ``UpdateNodegroupConfig`` raising desiredSize:
  the target becomes the size, and machines boot (:meth:`World.boot` makes their Nodes join).
* ``remove``: GKE ``instanceGroupManagers.deleteInstances`` ("reduces the targetSize of the managed
  instance group by the number of instances that you delete") / EC2 Auto Scaling
  ``TerminateInstanceInAutoScalingGroup`` with ``ShouldDecrementDesiredCapacity=true``: that machine
  goes and the target drops by one; its Node leaves.
* ``pool_change``: the EKS node group's ``status`` (UPDATING during a managed node group update) / the
  GKE node pool's ``status`` (RECONCILING during an upgrade) and its MIG's ``status.isStable``:
  :meth:`MemoryCloud.start_update` plays the cloud's own update (EKS raises the desired size by up to
  two machines per Availability Zone and launches them; they stay empty while the old ones drain) and
  :meth:`MemoryCloud.finish_update` its end (the desired size back down, the surge gone; where EKS ends
  the old machines after moving their pods, the stand-in ends the surge ones: the count is the same).
* ``replace``: GKE ``reportHostAsFaulty`` (the instance keeps its name, moves to a new host: a new boot)
  or ``recreateInstances`` (same name, a new VM: a new Node object); EKS ``SetInstanceHealth`` Unhealthy
  (the ASG terminates it and launches another instance: a new Node under a new name).

Failures are injected per call (:attr:`MemoryCloud.fail`). Every call is logged in :attr:`MemoryCloud.log`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slonk_infra.ops.cloud import CloudKind, MachineRef, ReplaceCall
from slonk_infra.ops.model import INSTANCE_TYPE_LABEL, KubeNode, KubePod, SlurmJob, SlurmNode, WorkerSet
from slonk_infra.vocab import GROUP_LABEL, POOL_LABEL


class CloudFailure(RuntimeError):
    """An injected cloud error."""


@dataclass
class MemoryPool:
    """One node pool / node group."""

    target: int
    machines: list[str] = field(default_factory=list)  # instance names (GCE) or ids (EC2)
    ready: bool = True
    machine_type: str = ""
    changing: str = ""  # what the cloud itself is doing to the pool ("" when stable), as pool_change says it
    surge: list[str] = field(default_factory=list)  # machines the cloud's own update launched


class MemoryCloud:
    """A :class:`~slonk_infra.ops.cloud.CloudMachines` over :class:`MemoryPool` records."""

    def __init__(self, cloud: CloudKind, world: World | None = None, zone: str = "") -> None:
        self.cloud = cloud
        self.zone = zone or ("us-central1-a" if cloud == "gcp" else "us-east-1a")
        self.pools: dict[str, MemoryPool] = {}
        self.log: list[tuple[str, Any]] = []
        self.fail: Counter[str] = Counter()  # call name -> how many of the next calls fail
        self.world = world
        self._ids = itertools.count(1)

    def provider_id(self, instance: str) -> str:
        """The Node's spec.providerID for a machine of this cloud."""
        return f"gce://proj/{self.zone}/{instance}" if self.cloud == "gcp" else f"aws:///{self.zone}/{instance}"

    def new_instance(self, pool: str) -> str:
        """A fresh machine name in ``pool``."""
        n = next(self._ids)
        return f"gke-{pool}-{n:04d}" if self.cloud == "gcp" else f"i-{n:017x}"

    def _enter(self, call: str, arg: Any) -> None:
        self.log.append((call, arg))
        if self.fail[call] > 0:
            self.fail[call] -= 1
            raise CloudFailure(f"{call}: injected failure")

    def _pool_of(self, machine: MachineRef) -> tuple[str, MemoryPool]:
        for name, pool in self.pools.items():
            if machine.instance in pool.machines:
                return name, pool
        raise CloudFailure(f"{machine.instance}: not a machine of any pool (404)")

    def calls(self, name: str) -> list[Any]:
        """Arguments of every call ``name`` made so far."""
        return [arg for call, arg in self.log if call == name]

    # ------------------------------------------------------------------ CloudMachines
    def pool_size(self, pool: str) -> int:
        self._enter("pool_size", pool)
        return self.pools[pool].target

    def pool_ready(self, pool: str) -> bool:
        self._enter("pool_ready", pool)
        return self.pools[pool].ready

    def pool_change(self, pool: str) -> str:
        self._enter("pool_change", pool)
        return self.pools[pool].changing

    def start_update(self, pool: str, surge: int, status: str = "") -> list[str]:
        """The cloud starts its own update of ``pool`` (not a controller call): ``surge`` more machines
        and a target raised by as many; the pool says ``status`` until :meth:`finish_update`."""
        p = self.pools[pool]
        p.changing = status or (
            f"node group {pool} is UPDATING" if self.cloud == "aws" else f"node pool {pool} is RECONCILING"
        )
        p.surge = [self.new_instance(pool) for _ in range(surge)]
        p.machines.extend(p.surge)
        p.target += surge
        if self.world is not None:
            self.world.booting.extend((pool, name) for name in p.surge)
        return list(p.surge)

    def finish_update(self, pool: str) -> None:
        """The cloud's update ends: the surge machines go, the target drops by as many, the pool is stable."""
        p = self.pools[pool]
        for name in p.surge:
            if name in p.machines:
                p.machines.remove(name)
                p.target -= 1
                if self.world is not None:
                    self.world.leave(name)
        p.surge = []
        p.changing = ""

    def grow(self, pool: str, size: int) -> None:
        self._enter("grow", (pool, size))
        p = self.pools[pool]
        if size < p.target:
            raise CloudFailure(f"grow {pool} to {size}: below the target {p.target}")
        while len(p.machines) < size:
            name = self.new_instance(pool)
            p.machines.append(name)
            if self.world is not None:
                self.world.booting.append((pool, name))
        p.target = size

    def remove(self, machine: MachineRef) -> None:
        self._enter("remove", machine)
        _, p = self._pool_of(machine)
        p.machines.remove(machine.instance)
        p.target -= 1
        if self.world is not None:
            self.world.leave(machine.instance)

    def replace(self, machine: MachineRef, faulty_host: bool) -> ReplaceCall:
        self._enter("replace", (machine, faulty_host))
        pool, p = self._pool_of(machine)
        if self.cloud == "aws":
            p.machines.remove(machine.instance)
            name = self.new_instance(pool)
            p.machines.append(name)
            if self.world is not None:
                self.world.leave(machine.instance)
                self.world.booting.append((pool, name))
            return "SetInstanceHealth"
        if self.world is not None:
            self.world.rebooting.append((machine.instance, not faulty_host))
        return "reportHostAsFaulty" if faulty_host else "recreateInstances"


class MemorySlurm:
    """Slurm as the controller reads and writes it: node records and jobs."""

    def __init__(self) -> None:
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: list[SlurmJob] = []
        self.calls: Counter[str] = Counter()

    def list_nodes(self) -> list[SlurmNode]:
        self.calls["list_nodes"] += 1
        return list(self.nodes.values())

    def list_jobs(self) -> list[SlurmJob]:
        self.calls["list_jobs"] += 1
        return list(self.jobs)

    def update_nodes(self, names: Sequence[str], state: str, reason: str = "") -> None:
        self.calls["update_nodes"] += 1
        for n in names:
            s = self.nodes[n]
            if state == "DRAIN":
                self.nodes[n] = dataclasses.replace(s, flags=s.flags | {"DRAIN"}, reason=reason)
            else:
                self.nodes[n] = dataclasses.replace(s, flags=s.flags - {"DRAIN"}, reason="")


class MemoryKube:
    """Kubernetes as the controller reads and writes it: nodes, worker pods, worker StatefulSets."""

    def __init__(self) -> None:
        self.nodes: dict[str, KubeNode] = {}
        self.pods: dict[str, KubePod] = {}
        self.sets: dict[str, WorkerSet] = {}
        self.calls: Counter[str] = Counter()
        self.deleted: list[str] = []

    def list_nodes(self, selector: str = "") -> list[KubeNode]:
        self.calls["list_nodes"] += 1
        return list(self.nodes.values())

    def list_pods(self, selector: str) -> list[KubePod]:
        self.calls["list_pods"] += 1
        return list(self.pods.values())

    def list_statefulsets(self, selector: str) -> list[WorkerSet]:
        self.calls["list_statefulsets"] += 1
        return list(self.sets.values())

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        self.calls["patch_node"] += 1
        n = self.nodes[name]
        ann = {**n.annotations, **body.get("metadata", {}).get("annotations", {})}
        unsched = body.get("spec", {}).get("unschedulable", n.unschedulable)
        self.nodes[name] = dataclasses.replace(
            n, annotations={k: v for k, v in ann.items() if v is not None}, unschedulable=bool(unsched)
        )

    def patch_pod(self, name: str, body: dict[str, Any]) -> None:
        self.calls["patch_pod"] += 1
        p = self.pods[name]
        ann = {**p.annotations, **body.get("metadata", {}).get("annotations", {})}
        self.pods[name] = dataclasses.replace(p, annotations={k: v for k, v in ann.items() if v is not None})

    def delete_pod(self, name: str) -> None:
        self.calls["delete_pod"] += 1
        self.pods.pop(name, None)
        self.deleted.append(name)


@dataclass
class World:
    """The three sides together, with the moves of the systems the controller does not run: the StatefulSet
    controller (:meth:`scale`, :meth:`schedule`), the kubelet joining (:meth:`boot`), slurmd (:meth:`register`)."""

    cloud_kind: CloudKind = "gcp"
    now: float = 1_800_000_000.0
    slurm: MemorySlurm = field(default_factory=MemorySlurm)
    kube: MemoryKube = field(default_factory=MemoryKube)
    booting: list[tuple[str, str]] = field(default_factory=list)  # (pool, instance) launched, not joined
    rebooting: list[tuple[str, bool]] = field(default_factory=list)  # (instance, new Node object) being replaced
    cloud: MemoryCloud = field(init=False)

    def __post_init__(self) -> None:
        self.cloud = MemoryCloud(self.cloud_kind, self)
        self._boots = itertools.count(2)

    def clock(self) -> float:
        """The world's time (the controller's clock in tests)."""
        return self.now

    def node_name(self, instance: str) -> str:
        """The Node name a machine registers under (GKE: the instance name; EKS: its private DNS name)."""
        return instance if self.cloud_kind == "gcp" else f"ip-{instance[2:]}.ec2.internal"

    def add_pool(self, group: str, machines: int, gpus: int = 8, machine_type: str = "a3-megagpu-8g") -> None:
        """A pool of ``machines`` joined nodes, a StatefulSet of as many replicas, one idle pod and Slurm node each."""
        self.cloud.pools[group] = MemoryPool(target=0, machine_type=machine_type)
        self.kube.sets[group] = WorkerSet(group, group, machines)
        self.cloud.grow(group, machines)
        self.cloud.log.clear()
        self.boot(age=3600)
        for i in range(machines):
            self.slurm.nodes[f"{group}-{i}"] = SlurmNode(f"{group}-{i}", "IDLE", gpus=gpus, slurmd_start=self.now)
        self.schedule()

    def join(self, pool: str, instance: str, age: float = 0.0) -> KubeNode:
        """The machine's kubelet registers its Node."""
        name = self.node_name(instance)
        node = KubeNode(
            name,
            uid=f"uid-{name}-{self.now}",
            labels={POOL_LABEL: pool, INSTANCE_TYPE_LABEL: self.cloud.pools[pool].machine_type},
            provider_id=self.cloud.provider_id(instance),
            boot_id=f"boot-{next(self._boots)}",
            created=self.now - age,
            conditions={"Ready": "True"},
        )
        self.kube.nodes[name] = node
        return node

    def boot(self, age: float = 0.0) -> None:
        """Every launched machine joins; every replaced one comes back (new boot, or a new Node object)."""
        for pool, instance in self.booting:
            self.join(pool, instance, age)
        self.booting.clear()
        for instance, new_object in self.rebooting:
            old = self.kube.nodes[self.node_name(instance)]
            boot = f"boot-{next(self._boots)}"
            if new_object:
                self.kube.nodes[old.name] = KubeNode(
                    old.name, uid=f"uid-{old.name}-{self.now}", labels=old.labels, provider_id=old.provider_id,
                    boot_id=boot, created=self.now, conditions={"Ready": "True"},
                )  # fmt: skip
            else:
                self.kube.nodes[old.name] = dataclasses.replace(old, boot_id=boot)
        self.rebooting.clear()

    def leave(self, instance: str) -> None:
        """The machine is gone: its Node goes, and so does any pod bound to it."""
        name = self.node_name(instance)
        self.kube.nodes.pop(name, None)
        for pod in [p for p in self.kube.pods.values() if p.node_name == name]:
            del self.kube.pods[pod.name]

    def scale(self, group: str, replicas: int) -> None:
        """``pulumi up`` with a new ``nodes``: the StatefulSet's replicas, and its pods of higher ordinals go."""
        self.kube.sets[group] = dataclasses.replace(self.kube.sets[group], replicas=replicas)
        for pod in [p for p in self.kube.pods.values() if p.pool == group and _ordinal(p.name) >= replicas]:
            del self.kube.pods[pod.name]

    def schedule(self) -> None:
        """The StatefulSet controller and the scheduler: a missing pod of each kept ordinal is created and
        bound to a free, schedulable node of its pool (or left unscheduled)."""
        for group, ws in sorted(self.kube.sets.items()):
            taken = {p.node_name for p in self.kube.pods.values()}
            free = sorted(
                n.name
                for n in self.kube.nodes.values()
                if n.labels.get(POOL_LABEL) == group and not n.unschedulable and n.name not in taken
            )
            for i in range(ws.replicas):
                name = f"{group}-{i}"
                pod = self.kube.pods.get(name)
                if pod is not None and pod.node_name:
                    continue
                node = free.pop(0) if free else ""
                self.kube.pods[name] = KubePod(
                    name,
                    uid=pod.uid if pod is not None else f"pod-{name}-{self.now}",
                    node_name=node,
                    labels={GROUP_LABEL: group},
                    created=pod.created if pod is not None else self.now,
                    phase="Running" if node else "Pending",
                )
                if node and name in self.slurm.nodes:
                    self.register(name)

    def register(self, name: str) -> None:
        """The pod's slurmd (re)registers: responding, freshly started."""
        s = self.slurm.nodes[name]
        self.slurm.nodes[name] = dataclasses.replace(s, slurmd_start=self.now)


def _ordinal(pod: str) -> int:
    return int(pod.rsplit("-", 1)[1])
