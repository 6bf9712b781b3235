"""The Kubernetes side, through the official ``kubernetes`` client: two list calls per tick, patches for changes.

Lists are read with ``resourceVersion=0`` (served from the API server's watch cache, the cheap way
to list thousands of nodes) and decoded straight from JSON into :mod:`slonk_infra.ops.model`
records; building the client's model objects for every field of 4,096 nodes would cost more than
the rest of a tick. Patches are JSON merge patches of annotations and ``spec.unschedulable`` only.

Permissions used (see :mod:`slonk_infra.kube.operations`): nodes get/list/patch cluster-wide; pods
list/patch/delete in the Slurm namespace.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import kubernetes.client as k8s
import kubernetes.config
from kubernetes.client.exceptions import ApiException

from slonk_infra.ops.model import KubeNode, KubePod, Taint


class KubeError(RuntimeError):
    """The Kubernetes API refused or failed a request."""


def _time(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def node_from(raw: Mapping[str, Any]) -> KubeNode:
    """A Node object (JSON) as a record."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    return KubeNode(
        name=meta["name"],
        uid=meta.get("uid", ""),
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=tuple(Taint(t["key"], t.get("value", "") or "", t.get("effect", "")) for t in spec.get("taints") or []),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        conditions={c["type"]: c.get("status", "Unknown") for c in status.get("conditions") or []},
        provider_id=spec.get("providerID", "") or "",
        boot_id=(status.get("nodeInfo") or {}).get("bootID", "") or "",
    )


def pod_from(raw: Mapping[str, Any]) -> KubePod:
    """A Pod object (JSON) as a record."""
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    return KubePod(
        name=meta["name"],
        uid=meta.get("uid", ""),
        node_name=spec.get("nodeName", "") or "",
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        created=_time(meta.get("creationTimestamp")),
        phase=status.get("phase", "") or "",
        deleting=meta.get("deletionTimestamp") is not None,
    )


class KubeApi:
    """Nodes and worker pods. ``calls`` counts requests by kind."""

    def __init__(self, client: k8s.ApiClient, namespace: str) -> None:
        self.core = k8s.CoreV1Api(client)
        self.namespace = namespace
        self.calls: Counter[str] = Counter()

    @classmethod
    def in_cluster(cls, namespace: str) -> KubeApi:
        """Service-account credentials of the pod it runs in."""
        kubernetes.config.load_incluster_config()
        return cls(k8s.ApiClient(), namespace)

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
        return cls(k8s.ApiClient(conf), namespace)

    def _json(self, kind: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls[kind] += 1
        try:
            resp = call(*args, _preload_content=False, _request_timeout=60, **kwargs)
        except ApiException as exc:
            raise KubeError(f"{kind}: HTTP {exc.status} {exc.reason}: {(exc.body or '')[:300]}") from None
        except OSError as exc:  # urllib3 connection errors derive from OSError
            raise KubeError(f"{kind}: {exc}") from None
        data = resp.data
        return json.loads(data) if data else {}

    def list_nodes(self, selector: str = "") -> list[KubeNode]:
        """Every node matching ``selector``: one call."""
        answer = self._json("list_nodes", self.core.list_node, label_selector=selector, resource_version="0")
        return [node_from(n) for n in answer.get("items") or []]

    def list_pods(self, selector: str) -> list[KubePod]:
        """The worker pods: one call."""
        answer = self._json(
            "list_pods", self.core.list_namespaced_pod, self.namespace, label_selector=selector, resource_version="0"
        )
        return [pod_from(p) for p in answer.get("items") or []]

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
