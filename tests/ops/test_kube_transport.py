"""KubeApi's transport: an API server out of reach or an answer cut short is a KubeError (the tick reports
it and goes on), never an urllib3 exception that ends the controller; the next list reads cleanly."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from slonk_infra.ops.kube_api import KubeApi, KubeError
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
