"""Talking to Slurm: slurmrestd with tokens the controller signs, one list call per tick for nodes and jobs.

* **Auth.** slurmctld checks HS256 JWTs against the key in ``AuthAltParameters=jwt_key=...``
  (the project's slurm-jwt Secret). The controller signs its own (PyJWT; claims ``sun``, ``iat``,
  ``exp``) and sends them as ``X-SLURM-USER-NAME`` / ``X-SLURM-USER-TOKEN`` to slurmrestd.
* **Version.** ``/openapi/v3`` is read once; the newest ``/slurm/v0.0.NN/nodes`` path the server
  offers is used (22.05 offers v0.0.38; 26.05 v0.0.42 .. v0.0.45).
* **Reads.** ``GET nodes`` and ``GET jobs``: one call each per tick, whatever the node count.
* **Writes.** v0.0.40 and later: ``POST nodes/`` with a list of names, one call per (state, reason).
  v0.0.39: ``POST node/{name}`` per node. v0.0.38 has no node update at all, so the controller
  runs ``scontrol update NodeName=<hostlist> ...`` with ``SLURM_JWT`` set (the same token, checked
  by slurmctld's auth/jwt): again one call per (state, reason).
* **Transport.** ``http://host:port`` or ``unix:/path/to/socket`` (slurmrestd listens on either).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload
from urllib.parse import urlsplit

import hostlist
import jwt
import msgspec

from slonk_infra.ops.model import SlurmJob, SlurmNode
from slonk_infra.ops.readbuffer import ReadBuffer
from slonk_infra.ops.slurm_records import job_from, node_from
from slonk_infra.ops.wire import (
    SLURM_JOB,
    SLURM_JOBS_RAW,
    SLURM_NODE,
    SLURM_NODES_RAW,
    DecodeError,
    RecordCache,
    decode,
)

T = TypeVar("T")
_VERSION_PATH = re.compile(r"^/slurm/v0\.0\.(\d+)/nodes/?$")


class SlurmError(RuntimeError):
    """slurmrestd (or slurmctld behind it) refused or failed a request."""


class SlurmUnreachable(SlurmError):
    """No answer from slurmrestd at all."""


class TokenSigner:
    """Signs HS256 tokens for ``user`` with the key slurmctld checks; renews them before they expire."""

    def __init__(self, key: bytes, user: str, lifetime: int = 3600, clock: Callable[[], float] = time.time) -> None:
        if not key:
            raise ValueError("the JWT key is empty")
        self.key, self.user, self.lifetime, self.clock = key, user, lifetime, clock
        self._token, self._expires = "", 0.0

    @classmethod
    def from_file(cls, path: str | Path, user: str, lifetime: int = 3600) -> TokenSigner:
        """Reads the key file (the mounted slurm-jwt Secret)."""
        return cls(Path(path).read_bytes(), user, lifetime)

    def token(self) -> str:
        """A token valid for at least a fifth of its lifetime more."""
        now = self.clock()
        if now > self._expires - self.lifetime / 5:
            iat = int(now)
            self._expires = iat + self.lifetime
            self._token = jwt.encode({"iat": iat, "exp": int(self._expires), "sun": self.user}, self.key, "HS256")
        return self._token


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


@dataclass(frozen=True)
class ApiInfo:
    """What the server offers: the data-parser version used and how nodes can be changed."""

    version: int  # 38 for v0.0.38, ...
    nodes_path: str
    jobs_path: str
    batch_update: str | None  # POST path taking a list of names
    node_update: str | None  # POST path with {node_name}

    @property
    def prefix(self) -> str:
        return f"/slurm/v0.0.{self.version}"


def choose_api(paths: dict[str, Any]) -> ApiInfo:
    """Picks the newest version whose nodes and jobs paths exist in an OpenAPI ``paths`` object."""
    versions = sorted(
        {int(m.group(1)) for p in paths if (m := _VERSION_PATH.match(p)) and "get" in paths[p]}, reverse=True
    )
    for v in versions:
        base = f"/slurm/v0.0.{v}"
        nodes = next((p for p in (f"{base}/nodes/", f"{base}/nodes") if "get" in paths.get(p, {})), None)
        jobs = next((p for p in (f"{base}/jobs/", f"{base}/jobs") if "get" in paths.get(p, {})), None)
        if nodes is None or jobs is None:
            continue
        batch = nodes if "post" in paths.get(nodes, {}) else None
        single = next(
            (p for p in (f"{base}/node/{{node_name}}",) if "post" in paths.get(p, {})),
            None,
        )
        return ApiInfo(v, nodes, jobs, batch, single)
    raise SlurmError(f"slurmrestd offers no known nodes/jobs API (versions seen: {versions or 'none'})")


class ScontrolWriter:
    """Node-state changes through ``scontrol`` with token auth, for REST APIs without node updates."""

    def __init__(self, argv: Sequence[str] = ("scontrol",), env: dict[str, str] | None = None) -> None:
        self.argv, self.env = list(argv), dict(env or {})

    def update(self, names: Sequence[str], state: str, reason: str, token: str) -> None:
        args = [*self.argv, "update", f"NodeName={hostlist.collect_hostlist(list(names))}", f"State={state}"]
        if reason:
            args.append(f"Reason={reason}")
        env = {**os.environ, **self.env, "SLURM_JWT": token}
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"scontrol update failed: {exc}") from None
        if done.returncode != 0:
            raise SlurmError(f"scontrol update {state} failed: {(done.stderr or done.stdout).strip()}")


class SlurmRest:
    """The controller's Slurm side. ``calls`` counts requests by kind (for metrics and the benchmark)."""

    def __init__(
        self,
        url: str,
        signer: TokenSigner,
        timeout: float = 60.0,
        scontrol: ScontrolWriter | None = None,
    ) -> None:
        self.url, self.signer, self.timeout, self.scontrol = url, signer, timeout, scontrol
        self.calls: Counter[str] = Counter()
        self._api: ApiInfo | None = None
        self.last_update = 0.0
        # A record unchanged since the last list (byte for byte) is not decoded or read again.
        self._nodes = RecordCache(SLURM_NODE, node_from)
        self._jobs = RecordCache(SLURM_JOB, job_from)
        # The lists are read one after another and decoded at once: one buffer serves both.
        self._buffer = ReadBuffer()

    # ------------------------------------------------------------------ transport
    def _connection(self) -> http.client.HTTPConnection:
        if self.url.startswith("unix:"):
            return _UnixConnection(self.url.removeprefix("unix:").removeprefix("//"), self.timeout)
        parts = urlsplit(self.url)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.hostname or "", parts.port or 443, timeout=self.timeout)
        return http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=self.timeout)

    def request(self, method: str, path: str, body: Any = None, kind: str = "other") -> dict[str, Any]:
        """One request; the decoded JSON answer. Raises on transport errors, HTTP errors and Slurm errors."""
        status, raw = self._send(method, path, body, kind)
        return self._answer(method, path, status, raw)

    def _list(self, path: str, kind: str, decoder: msgspec.json.Decoder[Any]) -> Any:
        """A GET whose answer is decoded into only the fields the records read (:mod:`slonk_infra.ops.wire`).

        The answer is read into the client's :class:`ReadBuffer`; the decoded answer refers to it, so it is
        read before the next list."""
        status, view = self._send("GET", path, None, kind, self._buffer)
        try:
            answer = decode(decoder, view) if status < 400 else None
        except DecodeError:
            answer = None
        if answer is None:
            raw = bytes(view)
            self._answer("GET", path, status, raw)  # raises with slurmrestd's own words
            raise SlurmError(f"GET {path}: HTTP {status}: not an answer the controller can read: {raw[:300]!r}")
        if answer.errors:
            self._raise_errors("GET", path, status, bytes(view[:300]), answer.errors)
        return answer

    @overload
    def _send(self, method: str, path: str, body: Any, kind: str) -> tuple[int, bytes]: ...
    @overload
    def _send(self, method: str, path: str, body: Any, kind: str, into: ReadBuffer) -> tuple[int, memoryview]: ...
    def _send(
        self, method: str, path: str, body: Any, kind: str, into: ReadBuffer | None = None
    ) -> tuple[int, bytes | memoryview]:
        self.calls[kind] += 1
        headers = {
            "X-SLURM-USER-NAME": self.signer.user,
            "X-SLURM-USER-TOKEN": self.signer.token(),
            "Accept": "application/json",
        }
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        # A GET is tried once more on a fresh connection when slurmrestd resets or drops the first one
        # before answering (seen from slurmrestd 22.05 in the ops scenarios): asking again changes nothing,
        # and the tick would otherwise report Slurm unreachable until the next one. Writes are not repeated.
        tries = 2 if method == "GET" else 1
        for attempt in range(1, tries + 1):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                if into is None:
                    return resp.status, resp.read()
                view = into.fill(resp, resp.length)
                if resp.length:  # readinto ends quietly where read() raises: slurmrestd stopped mid-answer
                    raise http.client.IncompleteRead(bytes(view[-64:]), resp.length)
                return resp.status, view
            except (ConnectionResetError, http.client.RemoteDisconnected) as exc:
                if attempt == tries:
                    raise SlurmUnreachable(f"slurmrestd at {self.url}: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                raise SlurmUnreachable(f"slurmrestd at {self.url}: {exc}") from None
            finally:
                conn.close()
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _answer(self, method: str, path: str, status: int, raw: bytes) -> dict[str, Any]:
        try:
            answer = json.loads(raw.decode("utf-8", "replace")) if raw else {}  # bytes as people typed them
        except json.JSONDecodeError:
            answer = None
        if not isinstance(answer, dict):
            raise SlurmError(f"{method} {path}: HTTP {status}: {raw[:300]!r}")
        self._raise_errors(method, path, status, raw, answer.get("errors"))
        return answer

    @staticmethod
    def _raise_errors(method: str, path: str, status: int, raw: bytes, reported: Any) -> None:
        errors = [e for e in reported or [] if isinstance(e, dict)]
        if status >= 400 or errors:
            text = "; ".join(str(e.get("description") or e.get("error") or e) for e in errors)
            raise SlurmError(f"{method} {path}: HTTP {status}: {text or raw[:300]!r}")

    # ------------------------------------------------------------------ API
    def api(self) -> ApiInfo:
        """The probed API (fetched once)."""
        if self._api is None:
            spec = self.request("GET", "/openapi/v3", kind="probe")
            self._api = choose_api(spec.get("paths") or {})
        return self._api

    def list_nodes(self) -> list[SlurmNode]:
        """Every node record slurmctld shows (FUTURE ones are hidden, as in sinfo): one call."""
        path = self.api().nodes_path
        answer = self._list(path, "list_nodes", SLURM_NODES_RAW)
        nodes = self._records(path, self._nodes, answer.nodes)
        self.last_update = time.time()
        return nodes

    def list_jobs(self) -> list[SlurmJob]:
        """Every job slurmctld still holds: one call."""
        path = self.api().jobs_path
        answer = self._list(path, "list_jobs", SLURM_JOBS_RAW)
        return self._records(path, self._jobs, answer.jobs)

    @staticmethod
    def _records(path: str, cache: RecordCache[T], items: list[msgspec.Raw] | None) -> list[T]:
        try:
            return cache.records(items or ())
        except DecodeError as exc:  # an item that is not a record: the answer is unreadable as a whole
            raise SlurmError(f"GET {path}: not an answer the controller can read: {exc}") from None

    def update_nodes(self, names: Sequence[str], state: str, reason: str = "") -> None:
        """Sets ``state`` (DRAIN or RESUME) on ``names``; one call where the API allows it."""
        if not names:
            return
        api = self.api()
        body: dict[str, Any] = {"state": [state]}
        if reason:
            body["reason"] = reason
        if api.batch_update is not None:
            self.request("POST", api.batch_update, {**body, "name": list(names)}, kind="update")
        elif api.node_update is not None:
            for name in names:
                self.request("POST", api.node_update.replace("{node_name}", name), body, kind="update")
        elif self.scontrol is not None:
            self.calls["update"] += 1
            self.scontrol.update(names, state, reason, self.signer.token())
        else:
            raise SlurmError(
                f"slurmrestd v0.0.{api.version} cannot change node states and the scontrol fallback is off"
            )
