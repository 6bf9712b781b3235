"""A one-request-per-connection HTTP server on loopback whose every byte a test decides: answers cut
short, connections reset, what real servers do when they are killed mid-answer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def raw_server(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """Serve on a free loopback port until the block ends; yields ``http://127.0.0.1:PORT``.

    Each connection's request is read (one recv), then ``answer(conn)`` writes what it likes; the
    connection is closed after it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed: the block ended
                return
            with conn:
                conn.recv(65536)
                answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not on Linux)
        listener.close()
        thread.join(timeout=5)
