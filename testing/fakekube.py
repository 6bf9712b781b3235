"""A fake Kubernetes API server for the operations controller's tests and benchmarks.

It serves, over real HTTP on 127.0.0.1 (a free port), the subset of the core/v1 API the controller
uses, in the API server's own shapes: list nodes and pods (with ``labelSelector``), get, merge and
strategic-merge patches of nodes and pods, delete of pods and nodes, ``Status`` objects for errors
and a bearer-token check. So the real ``kubernetes`` client is exercised end to end: URL building,
query parameters, auth header, content types, error mapping.

What it does not model: watches, resourceVersion conflicts, graceful deletion (a deleted pod is
gone at once; ``on_delete`` lets a test play the StatefulSet controller), field selectors.
"""

from __future__ import annotations

import copy
import itertools
import json
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from slonk_infra.ops.kube_api import KubeApi

Obj = dict[str, Any]
TOKEN = "fake-token"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (for maps and scalars, what a strategic merge patch also does)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality-based label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, comma-joined."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKube:
    """The fake API server. ``requests`` counts (method, resource kind, list|object) per request."""

    def __init__(self) -> None:
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.requests: Counter[tuple[str, str]] = Counter()
        self.on_delete: Callable[[Obj], None] | None = None
        self.lock = threading.RLock()
        self._rv = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeKube:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def client(self, namespace: str) -> KubeApi:
        """The controller's adapter pointed at this server."""
        return KubeApi.connect(self.url, TOKEN, namespace)

    # ------------------------------------------------------------------ objects
    def _meta(self, name: str, labels: dict[str, str] | None, annotations: dict[str, str] | None) -> Obj:
        return {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(next(self._rv)),
            "creationTimestamp": _now(),
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        }

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        conditions: dict[str, str] | None = None,
        unschedulable: bool = False,
        boot_id: str = "boot-1",
    ) -> Obj:
        """Stores a node with every field the client's typed model requires; Ready unless ``conditions``
        say otherwise."""
        with self.lock:
            node: Obj = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": self._meta(name, labels, annotations),
                "spec": {"providerID": f"gce://proj/zone/{name}", "taints": list(taints or [])},
                "status": {
                    "conditions": [{"type": t, "status": s} for t, s in (conditions or {"Ready": "True"}).items()],
                    # Every field the schema requires, so the client's typed models accept it too.
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": boot_id,
                        "containerRuntimeVersion": "containerd://2.0.0",
                        "kernelVersion": "6.1.0",
                        "kubeProxyVersion": "",
                        "kubeletVersion": "v1.33.0",
                        "machineID": uuid.uuid4().hex,
                        "operatingSystem": "linux",
                        "osImage": "Container-Optimized OS",
                        "systemUUID": str(uuid.uuid4()),
                    },
                },
            }
            if unschedulable:
                node["spec"]["unschedulable"] = True
            self.nodes[name] = node
            return node

    def add_pod(
        self,
        name: str,
        namespace: str,
        node_name: str,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        phase: str = "Running",
    ) -> Obj:
        """Stores a pod bound to ``node_name``."""
        with self.lock:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**self._meta(name, labels, annotations), "namespace": namespace},
                "spec": {"nodeName": node_name, "containers": [{"name": "slurmd", "image": "x"}]},
                "status": {"phase": phase},
            }
            self.pods[(namespace, name)] = pod
            return pod

    def node(self, name: str) -> Obj:
        """A copy of the stored node."""
        with self.lock:
            return copy.deepcopy(self.nodes[name])

    def pod(self, namespace: str, name: str) -> Obj | None:
        """A copy of the stored pod, or None when it is gone."""
        with self.lock:
            return copy.deepcopy(self.pods.get((namespace, name)))

    def set(self, obj: Obj, path: str, value: Any) -> None:
        """Sets (or with None removes) a dotted path in a stored object, as another client would."""
        with self.lock:
            *parents, last = path.split(".")
            cur = obj
            for p in parents:
                cur = cur.setdefault(p, {})
            if value is None:
                cur.pop(last, None)
            else:
                cur[last] = value
            obj["metadata"]["resourceVersion"] = str(next(self._rv))

    def reset_counts(self) -> None:
        """Forgets the request counts, so a caller can count the requests of one step."""
        with self.lock:
            self.requests.clear()

    # ------------------------------------------------------------------ HTTP
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes; without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every response, which no real API server has.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                return

            def _send(self, code: int, body: Obj) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": message,
                        "reason": reason,
                        "code": code,
                    },
                )

            def _route(self, method: str) -> None:
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._status(401, "Unauthorized", "Unauthorized")
                    return
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                parts = url.path.strip("/").split("/")
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    if parts[:3] == ["api", "v1", "nodes"]:
                        fake.requests[(method, "nodes" if len(parts) == 3 else "node")] += 1
                        store: dict[Any, Obj] = fake.nodes
                        key: Any = parts[3] if len(parts) > 3 else None
                        kind = "Node"
                        items = list(fake.nodes.values())
                    elif parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5 and parts[4] == "pods":
                        ns = parts[3]
                        fake.requests[(method, "pods" if len(parts) == 5 else "pod")] += 1
                        store = fake.pods
                        key = (ns, parts[5]) if len(parts) > 5 else None
                        kind = "Pod"
                        items = [p for (pns, _), p in fake.pods.items() if pns == ns]
                    else:
                        self._status(404, "NotFound", f"unknown path {url.path}")
                        return
                    if key is None:
                        if method != "GET":
                            self._status(405, "MethodNotAllowed", method)
                            return
                        sel = query.get("labelSelector", "")
                        chosen = [o for o in items if selector_matches(sel, o["metadata"].get("labels") or {})]
                        self._send(
                            200,
                            {
                                "apiVersion": "v1",
                                "kind": f"{kind}List",
                                "metadata": {"resourceVersion": str(next(fake._rv))},
                                "items": chosen,
                            },
                        )
                        return
                    obj = store.get(key)
                    name = key if isinstance(key, str) else key[1]
                    if obj is None:
                        self._status(404, "NotFound", f'{kind.lower()}s "{name}" not found')
                        return
                    if method == "GET":
                        self._send(200, obj)
                    elif method == "PATCH":
                        ctype = self.headers.get("Content-Type", "")
                        if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                            self._status(415, "UnsupportedMediaType", f"the fake takes merge patches, not {ctype}")
                            return
                        new = merge_patch(obj, body)
                        new["metadata"]["resourceVersion"] = str(next(fake._rv))
                        store[key] = new
                        self._send(200, new)
                    elif method == "DELETE":
                        del store[key]
                        # The hook runs before the answer, so a caller that saw the delete sees its effect.
                        if fake.on_delete is not None:
                            fake.on_delete(copy.deepcopy(obj))
                        self._send(200, obj)
                    else:
                        self._status(405, "MethodNotAllowed", method)

            def do_GET(self) -> None:
                self._route("GET")

            def do_PATCH(self) -> None:
                self._route("PATCH")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        return Handler
