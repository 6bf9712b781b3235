"""SlurmRest's transport: a GET that slurmrestd resets before answering is asked once more; a write never; an
answer cut short is unreachable."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from slonk_infra.ops.slurm_rest import ApiInfo, SlurmRest, SlurmUnreachable, TokenSigner
from testing.loopback import raw_server

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"


@pytest.fixture
def server() -> Iterator[tuple[str, list[int]]]:
    """A loopback server resetting (RST) the first ``resets[0]`` connections after reading the request, then
    answering ``{}``; yields its URL and that counter."""
    resets = [1]

    def answer(conn: socket.socket) -> None:
        if resets[0] > 0:
            resets[0] -= 1
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
        else:
            conn.sendall(ANSWER)

    with raw_server(answer) as url:
        yield url, resets


def test_a_reset_get_is_asked_once_more(server: tuple[str, list[int]]) -> None:
    url, resets = server
    rest = SlurmRest(url, TokenSigner(b"k" * 32, "slurm"), timeout=5)
    assert rest.request("GET", "/slurm/v0.0.45/ping") == {}
    assert resets[0] == 0


def test_a_get_reset_twice_is_unreachable_and_a_write_is_not_repeated(server: tuple[str, list[int]]) -> None:
    url, resets = server
    rest = SlurmRest(url, TokenSigner(b"k" * 32, "slurm"), timeout=5)
    resets[0] = 2
    with pytest.raises(SlurmUnreachable, match="reset"):
        rest.request("GET", "/slurm/v0.0.45/ping")
    resets[0] = 1
    with pytest.raises(SlurmUnreachable):
        rest.request("POST", "/slurm/v0.0.45/node/a", {"state": ["DRAIN"]})
    assert resets[0] == 0
    assert rest.request("POST", "/slurm/v0.0.45/node/a", {"state": ["DRAIN"]}) == {}


def test_an_answer_cut_short_is_unreachable_not_a_bad_answer() -> None:
    """slurmrestd stopped mid-answer (killed, restarted): its Content-Length is not met. http.client's
    readinto ends quietly there, where read() raised; the list must still be reported unreachable."""
    body = b'{"nodes": [' + b",".join(b'{"name": "n%d"}' % i for i in range(20_000)) + b"]}"
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    with raw_server(lambda conn: conn.sendall(head + body[: len(body) // 2])) as url:
        rest = SlurmRest(url, TokenSigner(b"k" * 32, "slurm"), timeout=5)
        rest._api = ApiInfo(45, "/slurm/v0.0.45/nodes", "/slurm/v0.0.45/jobs", "/slurm/v0.0.45/nodes", None)
        with pytest.raises(SlurmUnreachable, match="IncompleteRead"):
            rest.list_nodes()
