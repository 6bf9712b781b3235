"""ReadBuffer: list answers read into one buffer kept between ticks, through the real HTTP clients."""

from __future__ import annotations

import http.client
import http.server
import io
import threading
from collections.abc import Iterator

import pytest
import urllib3

from slonk_infra.ops import readbuffer
from slonk_infra.ops.readbuffer import ReadBuffer


class Trickle(io.RawIOBase):
    """A body that hands over at most ``step`` bytes per read and counts the sizes asked for."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.pos = data, step, 0
        self.asked: list[int] = []

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        self.asked.append(len(b))
        n = min(len(b), self.step, len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def test_an_answer_larger_than_the_buffer_is_read_whole() -> None:
    data = bytes(range(256)) * 1000
    buf = ReadBuffer(100)
    assert bytes(buf.fill(Trickle(data, 777))) == data
    assert buf.capacity >= len(data)


def test_the_same_buffer_serves_the_next_tick() -> None:
    data = b"x" * 300_000
    buf = ReadBuffer(1000)
    first = buf.fill(io.BytesIO(data))
    kept = buf._buf
    first.release()
    again = buf.fill(io.BytesIO(data[:-5] + b"yyyyy"))
    assert buf._buf is kept, "an answer that fits is read into the buffer already mapped"
    assert bytes(again[-5:]) == b"yyyyy" and len(again) == len(data)


def test_a_view_still_held_never_blocks_a_larger_answer() -> None:
    buf = ReadBuffer(8)
    held = buf.fill(io.BytesIO(b"12345678"))
    bigger = buf.fill(io.BytesIO(b"a" * 100))  # a resize in place would raise BufferError
    assert bytes(bigger) == b"a" * 100 and len(held) == 8


def test_reads_ask_for_at_most_a_chunk() -> None:
    # urllib3's readinto reads into a temporary bytes of the size asked for: one answer-sized request
    # would be one answer-sized allocation again.
    body = Trickle(b"z" * (3 * readbuffer.CHUNK + 5), readbuffer.CHUNK)
    ReadBuffer(8 * readbuffer.CHUNK).fill(body)
    assert max(body.asked) == readbuffer.CHUNK


def test_a_known_length_sizes_the_buffer_once() -> None:
    data = b"k" * (5 * readbuffer.CHUNK + 3)
    buf = ReadBuffer()
    body = Trickle(data, readbuffer.CHUNK)
    assert bytes(buf.fill(body, len(data))) == data
    assert buf.capacity == len(data) + 1, "no growth while reading, no doubling for the read that finds the end"


def test_growth_without_a_length_is_by_half_not_doubling() -> None:
    buf = ReadBuffer(8 * readbuffer.CHUNK)
    buf.fill(io.BytesIO(b"g" * (9 * readbuffer.CHUNK)))
    assert buf.capacity == 12 * readbuffer.CHUNK


def test_a_buffer_far_larger_than_every_recent_answer_is_given_back() -> None:
    buf = ReadBuffer()
    big = b"b" * (16 * readbuffer.CHUNK)
    buf.fill(io.BytesIO(big), len(big))  # one unusually large answer
    small = b"s" * 1000
    for _ in range(readbuffer.RECENT - 1):
        assert bytes(buf.fill(io.BytesIO(small))) == small
    assert buf.capacity > 16 * readbuffer.CHUNK, "kept while the large answer is among the recent ones"
    assert bytes(buf.fill(io.BytesIO(small))) == small
    assert buf.capacity <= readbuffer.CHUNK + 1


def test_an_empty_body_is_an_empty_view() -> None:
    assert len(ReadBuffer().fill(io.BytesIO(b""))) == 0


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        if self.path == "/chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(self.body), 70_001):
                part = self.body[i : i + 70_001]
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, int, bytes]]:
    body = b'{"items": [' + b",".join(b'{"n": %d}' % i for i in range(200_000)) + b"]}"
    handler = type("Handler", (_Handler,), {"body": body, "protocol_version": "HTTP/1.1"})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", srv.server_address[1], body
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


@pytest.mark.parametrize("path", ["/length", "/chunked"])
def test_http_client_answers(server: tuple[str, int, bytes], path: str) -> None:
    """slurmrestd's side: http.client's response, with a length or chunked."""
    host, port, body = server
    buf = ReadBuffer(4096)
    for _ in range(2):
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.request("GET", path)
            assert bytes(buf.fill(conn.getresponse())) == body
        finally:
            conn.close()


@pytest.mark.parametrize("path", ["/length", "/chunked"])
def test_urllib3_answers(server: tuple[str, int, bytes], path: str) -> None:
    """The Kubernetes client's side: a urllib3 response not preloaded, its connection back in the pool."""
    host, port, body = server
    pool = urllib3.HTTPConnectionPool(host, port, maxsize=1, block=True, timeout=10)
    buf = ReadBuffer(4096)
    for _ in range(2):  # one pooled connection: the second request waits for the first's release
        resp = pool.request("GET", path, preload_content=False)
        assert bytes(buf.fill(resp)) == body
        resp.release_conn()
    pool.close()
