"""KubeApi's transport: an API server out of reach or an answer cut short is a KubeError (the tick reports
it and goes on), never an urllib3 exception that ends the controller; the next list reads cleanly."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slonk_infra.ops.kube_api import RETRIES, RETRY_AFTER_CAP, TIMEOUT, KubeApi, KubeError
from testing.fakekube import TOKEN
from testing.loopback import raw_server

NODES = json.dumps(
    {"kind": "NodeList", "items": [{"metadata": {"name": f"gke-{i}"}, "spec": {}} for i in range(3000)]}
).encode()


def _answer(body: bytes, cut: bool, chunked: bool) -> bytes:
    sent = body[: len(body) // 2] if cut else body
    if chunked:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        return head + b"%x\r\n" % len(sent) + sent + b"\r\n" + (b"" if cut else b"0\r\n\r\n")
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return head + sent


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """A loopback API server answering each request with the next planned answer ("cut", "cut-chunked",
    "whole"; "whole" once the plan is spent), closing the connection after each."""
    plan: list[str] = []

    def answer(conn: socket.socket) -> None:
        what = plan.pop(0) if plan else "whole"
        conn.sendall(_answer(NODES, cut=what.startswith("cut"), chunked=what.endswith("chunked")))

    with raw_server(answer) as url:
        yield url, plan


@pytest.mark.parametrize("how", ["cut", "cut-chunked"])
def test_an_answer_cut_short_is_a_kube_error_and_the_next_list_reads(server: tuple[str, list[str]], how: str) -> None:
    url, plan = server
    api = KubeApi.connect(url, TOKEN, "slurm")
    plan.append(how)
    with pytest.raises(KubeError, match="list_nodes"):
        api.list_nodes()
    assert len(api.list_nodes()) == 3000


def test_an_api_server_out_of_reach_is_a_kube_error() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now: every connection is refused
    api = KubeApi.connect(f"http://127.0.0.1:{port}", TOKEN, "slurm")
    with pytest.raises(KubeError, match="list_nodes"):
        api.list_nodes()
    with pytest.raises(KubeError, match="patch_node"):
        api.patch_node("gke-0", {"spec": {"unschedulable": True}})


def test_an_api_server_that_never_answers_costs_two_read_timeouts_not_four() -> None:
    """urllib3's default retries (three) made one hung API server hold a tick for four read timeouts."""
    hits: list[float] = []

    def hang(conn: socket.socket) -> None:
        hits.append(time.monotonic())
        time.sleep(0.6)  # longer than the client's read timeout; then the connection is closed

    with raw_server(hang) as url:
        api = KubeApi.connect(url, TOKEN, "slurm")
        api.timeout = (2.0, 0.3)
        with pytest.raises(KubeError, match="list_nodes"):
            api.list_nodes()
        time.sleep(1.5)  # a third attempt would have reached the server by now
    assert len(hits) == 2


def _status_then_list(status: str, retry_after: str) -> Callable[[socket.socket], None]:
    """Answers the first request with ``status`` (and Retry-After), every later one with the node list."""
    answered: list[bool] = []

    def answer(conn: socket.socket) -> None:
        if not answered:
            answered.append(True)
            body = b'{"kind": "Status", "code": %s}' % status.split()[0].encode()
            conn.sendall(
                f"HTTP/1.1 {status}\r\nRetry-After: {retry_after}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        else:
            conn.sendall(_answer(NODES, cut=False, chunked=False))

    return answer


@pytest.mark.parametrize("status", ["429 Too Many Requests", "503 Service Unavailable"])
def test_a_throttled_list_is_waited_out_once(status: str) -> None:
    """The API server's priority and fairness answers 429 with Retry-After under load; losing the tick for
    it (no retry at all) would be worse than waiting the second it asks for."""
    with raw_server(_status_then_list(status, "1")) as url:
        api = KubeApi.connect(url, TOKEN, "slurm")
        started = time.monotonic()
        assert len(api.list_nodes()) == 3000
        assert time.monotonic() - started >= 0.9


def test_a_long_retry_after_is_cut_to_a_few_seconds() -> None:
    with raw_server(_status_then_list("429 Too Many Requests", "3600")) as url:
        api = KubeApi.connect(url, TOKEN, "slurm")
        started = time.monotonic()
        assert len(api.list_nodes()) == 3000
        assert time.monotonic() - started < RETRY_AFTER_CAP + 2


def test_in_cluster_credentials_keep_the_timeouts_and_the_one_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What slonk-ops runs with in its pod: the service account's token and CA, and RETRIES."""
    from kubernetes.config import incluster_config

    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("not read until a connection is made")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    api = KubeApi.in_cluster("slurm")
    conf = api.core.api_client.configuration
    assert conf.host == "https://10.0.0.1:443" and conf.retries is RETRIES
    assert conf.api_key["authorization"].endswith("sa-token")
    assert api.timeout == TIMEOUT
