"""The Kubernetes side, through the official ``kubernetes`` client: two list calls per tick (three when it
sizes cloud pools: the worker StatefulSets), patches for changes.

Lists are read with ``resourceVersion=0`` (served from the API server's watch cache, the cheap way
to list thousands of nodes) and decoded straight from JSON into :mod:`slonk_infra.ops.model`
records through :mod:`slonk_infra.ops.wire`, which reads only the fields a record keeps; building the
client's model objects for every field of 4,096 nodes would cost more than the rest of a tick. Patches are JSON merge patches of annotations and ``spec.unschedulable`` only.

Permissions used (see :mod:`slonk_infra.kube.operations`): nodes list/patch cluster-wide; pods
list/patch/delete in the Slurm namespace; statefulsets list in the Slurm namespace (only where the
controller sizes cloud pools).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

import kubernetes.client as k8s
import kubernetes.config
import msgspec
import urllib3
from kubernetes.client.exceptions import ApiException

from slonk_infra.ops.model import KubeNode, KubePod, Taint, WorkerSet
from slonk_infra.ops.readbuffer import ReadBuffer
from slonk_infra.ops.wire import (
    KUBE_NODE,
    KUBE_POD,
    KUBE_RAW_LIST,
    KUBE_STATEFULSETS,
    DecodeError,
    NodeSpec,
    NodeStatus,
    NodeWire,
    ObjectMeta,
    PodSpec,
    PodStatus,
    PodWire,
    RecordCache,
    StatefulSetSpec,
    StatefulSetWire,
)
from slonk_infra.vocab import GROUP_LABEL

T = TypeVar("T")


class KubeError(RuntimeError):
    """The Kubernetes API refused or failed a request."""


def _time(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def node_from(raw: NodeWire | Mapping[str, Any]) -> KubeNode:
    """A Node object (as decoded from a list, or as JSON) as a record."""
    w = raw if isinstance(raw, NodeWire) else msgspec.convert(raw, NodeWire)
    meta, spec, status = w.metadata or ObjectMeta(), w.spec or NodeSpec(), w.status or NodeStatus()
    return KubeNode(
        name=meta.name,
        uid=meta.uid,
        unschedulable=bool(spec.unschedulable),
        taints=tuple(Taint(t.key, t.value or "", t.effect) for t in spec.taints or ()),
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        conditions={c.type: c.status for c in status.conditions or ()},
        provider_id=spec.providerID or "",
        boot_id=(status.nodeInfo.bootID if status.nodeInfo else None) or "",
        created=_time(meta.creationTimestamp),
    )


def worker_set_from(raw: StatefulSetWire | Mapping[str, Any]) -> WorkerSet:
    """A worker StatefulSet (as decoded from a list, or as JSON) as a record; its group is its group label."""
    w = raw if isinstance(raw, StatefulSetWire) else msgspec.convert(raw, StatefulSetWire)
    meta, spec = w.metadata or ObjectMeta(), w.spec or StatefulSetSpec()
    # spec.replicas defaults to 1 when left out (apps/v1 StatefulSetSpec).
    replicas = 1 if spec.replicas is None else spec.replicas
    return WorkerSet(name=meta.name, group=(meta.labels or {}).get(GROUP_LABEL, meta.name), replicas=replicas)


def pod_from(raw: PodWire | Mapping[str, Any]) -> KubePod:
    """A Pod object (as decoded from a list, or as JSON) as a record."""
    w = raw if isinstance(raw, PodWire) else msgspec.convert(raw, PodWire)
    meta, spec, status = w.metadata or ObjectMeta(), w.spec or PodSpec(), w.status or PodStatus()
    return KubePod(
        name=meta.name,
        uid=meta.uid,
        node_name=spec.nodeName or "",
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        created=_time(meta.creationTimestamp),
        phase=status.phase or "",
        deleting=meta.deletionTimestamp is not None,
    )


# What the client's transport raises: urllib3's own errors (MaxRetryError when the API server cannot be
# reached, ProtocolError or IncompleteRead when an answer stops midway, ReadTimeoutError) derive from
# urllib3.exceptions.HTTPError, not OSError; socket errors may still surface as OSError.
TRANSPORT_ERRORS = (OSError, urllib3.exceptions.HTTPError)

# How long one call may wait: seconds to connect (TLS handshake included), and between two reads of its
# answer (not for the whole answer: a large list streams).
TIMEOUT = (5.0, 30.0)
RETRY_AFTER_CAP = 5.0  # seconds; API Priority and Fairness asks for 1


class _Retry(urllib3.util.Retry):
    """urllib3's retry, waiting at most :data:`RETRY_AFTER_CAP` for a server's Retry-After."""

    def get_retry_after(self, response: urllib3.BaseHTTPResponse) -> float | None:
        after = super().get_retry_after(response)
        return None if after is None else min(after, RETRY_AFTER_CAP)


# One retry per call, never more: urllib3's default of three let one hung API server hold a tick for four
# read timeouts, and the next tick tries again anyway. That one retry resends a GET or DELETE whose
# connection failed (a pooled connection the server or its load balancer had closed; PATCH is never
# resent, as urllib3 does not resend methods that are not idempotent), and for those methods waits out a
# 429 or 503 that carries Retry-After (the API server throttling under load, or shutting down during an
# upgrade) instead of losing the tick.
RETRIES = _Retry(total=1, redirect=0, raise_on_status=False)


class KubeApi:
    """Nodes and worker pods. ``calls`` counts requests by kind."""

    def __init__(self, client: k8s.ApiClient, namespace: str, timeout: tuple[float, float] = TIMEOUT) -> None:
        self.timeout = timeout
        self.core = k8s.CoreV1Api(client)
        self.apps = k8s.AppsV1Api(client)
        self.namespace = namespace
        self.calls: Counter[str] = Counter()
        # A node or pod unchanged since the last list (byte for byte) is not decoded or read again.
        self._nodes = RecordCache(KUBE_NODE, node_from)
        self._pods = RecordCache(KUBE_POD, pod_from)
        # The lists are read one after another and decoded at once: one buffer serves them all.
        self._buffer = ReadBuffer()

    @classmethod
    def in_cluster(cls, namespace: str) -> KubeApi:
        """Service-account credentials of the pod it runs in."""
        conf = k8s.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=conf)
        conf.retries = RETRIES
        return cls(k8s.ApiClient(conf), namespace)

    @classmethod
    def connect(cls, host: str, token: str, namespace: str, ca_file: str | None = None) -> KubeApi:
        """An explicit API server address and bearer token (tests, running outside the cluster)."""
        conf = k8s.Configuration()
        conf.host = host
        conf.api_key = {"authorization": token}
        conf.api_key_prefix = {"authorization": "Bearer"}
        conf.verify_ssl = True  # https is always verified: with ``ca_file``, else the system's CAs
        if ca_file:
            conf.ssl_ca_cert = ca_file
        conf.retries = RETRIES
        return cls(k8s.ApiClient(conf), namespace)

    def _response(self, kind: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        """The call's urllib3 response, its body not read yet."""
        self.calls[kind] += 1
        try:
            return call(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
        except ApiException as exc:
            raise KubeError(f"{kind}: HTTP {exc.status} {exc.reason}: {(exc.body or '')[:300]}") from None
        except TRANSPORT_ERRORS as exc:
            raise KubeError(f"{kind}: {exc}") from None

    def _raw(self, kind: str, call: Any, *args: Any, **kwargs: Any) -> bytes:
        resp = self._response(kind, call, *args, **kwargs)
        try:
            data: bytes = resp.data or b""
        except TRANSPORT_ERRORS as exc:
            raise KubeError(f"{kind}: {exc}") from None
        return data

    def _read(self, kind: str, call: Any, *args: Any, **kwargs: Any) -> memoryview:
        """The answer read into the client's :class:`ReadBuffer` (valid until the next list)."""
        resp = self._response(kind, call, *args, **kwargs)
        try:
            view = self._buffer.fill(resp, resp.length_remaining)
        except BaseException as exc:
            resp.close()  # a connection stopped mid-answer never goes back to the pool
            if isinstance(exc, TRANSPORT_ERRORS):
                raise KubeError(f"{kind}: {exc}") from None
            raise
        resp.release_conn()
        return view

    def _json(self, kind: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        data = self._raw(kind, call, *args, **kwargs)
        return json.loads(data) if data else {}

    def _list(self, kind: str, decoder: msgspec.json.Decoder[Any], call: Any, *args: Any, **kwargs: Any) -> Any:
        data = self._read(kind, call, *args, **kwargs)
        try:
            return decoder.decode(data if len(data) else b"{}")
        except DecodeError as exc:
            raise KubeError(f"{kind}: not a list the controller can read: {exc}") from None

    @staticmethod
    def _records(kind: str, cache: RecordCache[T], items: list[msgspec.Raw] | None) -> list[T]:
        try:
            return cache.records(items or ())
        except DecodeError as exc:
            raise KubeError(f"{kind}: not a list the controller can read: {exc}") from None

    def list_nodes(self, selector: str = "") -> list[KubeNode]:
        """Every node matching ``selector``: one call."""
        answer = self._list(
            "list_nodes", KUBE_RAW_LIST, self.core.list_node, label_selector=selector, resource_version="0"
        )
        return self._records("list_nodes", self._nodes, answer.items)

    def list_pods(self, selector: str) -> list[KubePod]:
        """The worker pods: one call."""
        answer = self._list(
            "list_pods",
            KUBE_RAW_LIST,
            self.core.list_namespaced_pod,
            self.namespace,
            label_selector=selector,
            resource_version="0",
        )
        return self._records("list_pods", self._pods, answer.items)

    def list_statefulsets(self, selector: str) -> list[WorkerSet]:
        """The worker StatefulSets (their replicas): one call."""
        answer = self._list(
            "list_statefulsets",
            KUBE_STATEFULSETS,
            self.apps.list_namespaced_stateful_set,
            self.namespace,
            label_selector=selector,
            resource_version="0",
        )
        return [worker_set_from(s) for s in answer.items or ()]

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        """Merge patch of a node (annotations, spec.unschedulable)."""
        self._json("patch_node", self.core.patch_node, name, body)

    def patch_pod(self, name: str, body: dict[str, Any]) -> None:
        """Merge patch of a worker pod's annotations."""
        self._json("patch_pod", self.core.patch_namespaced_pod, name, self.namespace, body)

    def delete_pod(self, name: str) -> None:
        """Deletes a worker pod (its StatefulSet makes a new one); a pod already gone is not an error."""
        try:
            self._json("delete_pod", self.core.delete_namespaced_pod, name, self.namespace)
        except KubeError as exc:
            if "HTTP 404" not in str(exc):
                raise
