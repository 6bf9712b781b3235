"""The list answers a tick reads, decoded into only the fields the records use (msgspec).

At 4,096 nodes a tick's CPU went mostly to decoding: slurmrestd's node list (v0.0.45: about 2.7 KB and
sixty fields a node) and the Kubernetes node and pod lists, each decoded whole by the standard library into
dicts that were read for a dozen fields and thrown away, with the garbage collector rescanning them.
Decoding into structs that name only those fields skips the rest in C, and the structs are not tracked by
the collector (benchmarks/README.md has the figures).

The Slurm fields stay loosely typed (``Any``): v0.0.38 sends plain numbers and comma strings, v0.0.39 and
later number structs and lists, and the readers of :mod:`slonk_infra.ops.slurm_records` accept either, so
one reader serves every data-parser version and no new shape can fail a whole tick. The Kubernetes fields
follow the core/v1 API, which does not change shape.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from itertools import compress, count, repeat
from operator import is_
from typing import Any, Generic, TypeVar, cast

import msgspec
from xxhash import xxh3_128_intdigest

R = TypeVar("R")
# What an answer or one of its items arrives as: bytes, a view of a ReadBuffer, or a msgspec.Raw item.
BytesLike = bytes | bytearray | memoryview | msgspec.Raw

# ----------------------------------------------------------------------------- slurmrestd


class SlurmNodeWire(msgspec.Struct, gc=False):
    """The fields of one slurmrestd node record that :func:`~slonk_infra.ops.slurm_records.node_from` reads."""

    name: Any = None
    state: Any = None
    state_flags: Any = None
    reason: Any = None
    reason_changed_at: Any = None
    cpus: Any = None
    alloc_cpus: Any = None
    gres: Any = None
    gres_used: Any = None
    partitions: Any = None
    comment: Any = None
    slurmd_start_time: Any = None


class SlurmJobWire(msgspec.Struct, gc=False):
    """The fields of one slurmrestd job record that :func:`~slonk_infra.ops.slurm_records.job_from` reads."""

    job_id: Any = None
    job_state: Any = None
    partition: Any = None
    nodes: Any = None
    submit_time: Any = None
    start_time: Any = None
    name: Any = None
    user_name: Any = None


class SlurmNodesAnswer(msgspec.Struct):
    """``GET .../nodes``: the records and the errors slurmrestd reports beside them."""

    nodes: list[SlurmNodeWire] | None = None
    errors: list[Any] | None = None


class SlurmJobsAnswer(msgspec.Struct):
    """``GET .../jobs``: the records and the errors slurmrestd reports beside them."""

    jobs: list[SlurmJobWire] | None = None
    errors: list[Any] | None = None


# ----------------------------------------------------------------------------- Kubernetes


class ObjectMeta(msgspec.Struct, gc=False):
    """The metadata a record keeps."""

    name: str = ""
    uid: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class NodeTaint(msgspec.Struct, gc=False):
    """spec.taints[]."""

    key: str = ""
    value: str | None = None
    effect: str = ""


class NodeSpec(msgspec.Struct, gc=False):
    """What a node record keeps of spec."""

    unschedulable: bool | None = None
    taints: list[NodeTaint] | None = None
    providerID: str | None = None


class NodeCondition(msgspec.Struct, gc=False):
    """status.conditions[]."""

    type: str = ""
    status: str = "Unknown"


class NodeSystemInfo(msgspec.Struct, gc=False):
    """status.nodeInfo."""

    bootID: str | None = None


class NodeStatus(msgspec.Struct, gc=False):
    """What a node record keeps of status."""

    conditions: list[NodeCondition] | None = None
    nodeInfo: NodeSystemInfo | None = None


class NodeWire(msgspec.Struct, gc=False):
    """A Node, as far as :func:`~slonk_infra.ops.kube_api.node_from` reads it."""

    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class PodSpec(msgspec.Struct, gc=False):
    """What a pod record keeps of spec."""

    nodeName: str | None = None


class PodStatus(msgspec.Struct, gc=False):
    """What a pod record keeps of status."""

    phase: str | None = None


class PodWire(msgspec.Struct, gc=False):
    """A Pod, as far as :func:`~slonk_infra.ops.kube_api.pod_from` reads it."""

    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class StatefulSetSpec(msgspec.Struct, gc=False):
    """What a worker set record keeps of spec."""

    replicas: int | None = None


class StatefulSetWire(msgspec.Struct, gc=False):
    """A StatefulSet, as far as :func:`~slonk_infra.ops.kube_api.worker_set_from` reads it."""

    metadata: ObjectMeta | None = None
    spec: StatefulSetSpec | None = None


class StatefulSetList(msgspec.Struct):
    """A StatefulSetList's items."""

    items: list[StatefulSetWire] | None = None


class NodeList(msgspec.Struct):
    """A NodeList's items."""

    items: list[NodeWire] | None = None


class PodList(msgspec.Struct):
    """A PodList's items."""

    items: list[PodWire] | None = None


class SlurmNodesRaw(msgspec.Struct):
    """``GET .../nodes`` with each record left as its bytes (for :class:`RecordCache`)."""

    nodes: list[msgspec.Raw] | None = None
    errors: list[Any] | None = None


class SlurmJobsRaw(msgspec.Struct):
    """``GET .../jobs`` with each record left as its bytes (for :class:`RecordCache`)."""

    jobs: list[msgspec.Raw] | None = None
    errors: list[Any] | None = None


class RawList(msgspec.Struct):
    """A Kubernetes list with each item left as its bytes (for :class:`RecordCache`)."""

    items: list[msgspec.Raw] | None = None


class RecordCache(Generic[R]):
    """The records of the previous answer, by a digest of the exact bytes each one came from.

    On a steady cluster nearly every item of a list is byte for byte what it was one tick earlier; its
    record (immutable) is taken again instead of being decoded and read anew. Only the items of the
    latest answer are kept, so the cache holds one answer's records at most. ``built`` counts the records
    made by the last call (the rest were reused).

    Items are known by their 128-bit XXH3 digest, seeded at random per cache, not by a copy of their
    bytes: a copy of every item (about 2.7 KB a Slurm node) was made, hashed and compared with the last
    answer's copy every tick, and kept, which doubled the memory a tick touches (at 16,384 nodes, about
    70 MB). Reusing a wrong record would need two different items with equal 128-bit digests under a
    seed nobody outside this process knows.
    """

    def __init__(self, decoder: msgspec.json.Decoder[Any], build: Callable[[Any], R]) -> None:
        self.decoder, self.build = decoder, build
        self._seed = secrets.randbits(64)
        self._by_digest: dict[int, R] = {}
        self._last: list[R] = []
        self.built = 0

    def records(self, items: Sequence[msgspec.Raw]) -> list[R]:
        """The record of each item, in order; a bad item raises as decoding the whole answer would.

        An item whose bytes changed but whose record is equal to the one at its place in the last answer
        (a field the records do not read changed: a node's CPU load, a heartbeat time) gives that same
        record object, so the memo of :mod:`slonk_infra.ops.sync` sees no change. When every record is
        the last answer's, in order, the last answer's list itself is returned: callers must not modify it.
        """
        before, last = self._by_digest, self._last
        # Every per-item step but the rebuilding of changed items runs in C (map, compress): at 16,384
        # records a Python loop over the items cost more than the hashing and splitting together.
        keys = list(map(xxh3_128_intdigest, items, repeat(self._seed)))
        out: list[R | None] = list(map(before.get, keys))
        built: dict[int, R] = {}
        for i in compress(count(), map(is_, out, repeat(None))):
            record = built.get(keys[i])
            if record is None:
                record = self.build(decode(self.decoder, items[i]))
                if i < len(last) and last[i] == record:
                    record = last[i]
                built[keys[i]] = record
            out[i] = record
        records = cast("list[R]", out)
        self._by_digest, self.built = dict(zip(keys, records, strict=True)), len(built)
        same = len(records) == len(last) and all(map(is_, records, last))
        self._last = last if same else records
        return self._last


SLURM_NODES = msgspec.json.Decoder(SlurmNodesAnswer)
SLURM_NODES_RAW = msgspec.json.Decoder(SlurmNodesRaw)
SLURM_JOBS_RAW = msgspec.json.Decoder(SlurmJobsRaw)
SLURM_NODE = msgspec.json.Decoder(SlurmNodeWire)
SLURM_JOB = msgspec.json.Decoder(SlurmJobWire)
KUBE_RAW_LIST = msgspec.json.Decoder(RawList)
KUBE_NODE = msgspec.json.Decoder(NodeWire)
KUBE_POD = msgspec.json.Decoder(PodWire)
SLURM_JOBS = msgspec.json.Decoder(SlurmJobsAnswer)
KUBE_NODES = msgspec.json.Decoder(NodeList)
KUBE_PODS = msgspec.json.Decoder(PodList)
KUBE_STATEFULSETS = msgspec.json.Decoder(StatefulSetList)
DecodeError = (msgspec.DecodeError, msgspec.ValidationError)


def decode(decoder: msgspec.json.Decoder[Any], raw: BytesLike) -> Any:
    """``raw`` (bytes, a view of a read buffer, or one item of an answer) through ``decoder``; bytes that
    are not UTF-8 are read as U+FFFD instead of failing.

    slurmrestd passes names, reasons and comments through as people typed them (``sbatch -J $'caf\\xe9'``),
    and one such byte must not stop the controller: the record keeps a replacement character.
    """
    try:
        return decoder.decode(raw)
    except UnicodeDecodeError:
        return decoder.decode(str(raw, "utf-8", "replace"))
