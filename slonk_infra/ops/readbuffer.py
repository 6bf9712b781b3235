"""One buffer per list a tick reads, filled again every tick instead of a new answer-sized allocation.

At 16,384 nodes slurmrestd's node list is about 44 MB and the Kubernetes node and pod lists about 14 and
9 MB. Read the usual way (``resp.read()``, ``resp.data``), each answer is a fresh object larger than glibc's
largest mmap threshold (32 MiB), or several smaller ones concatenated: the allocator maps new pages every
tick, the kernel zeroes them and the process faults them in (in the lab, about 11,000 page faults per
quiet tick at 16,384 records and under 100 at 4,096: part of why the tick grew faster than the record
count; benchmarks/README.md). Reading into a buffer kept from the last tick touches only pages already
mapped.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

# Each read asks for at most this much: urllib3's ``readinto`` reads into a temporary ``bytes`` of the
# size asked for, so one answer-sized request would allocate an answer-sized object again.
CHUNK = 1 << 20
# A buffer more than this many times the largest of the recent answers is given back (a cluster that
# shrank, or one unusually large answer); RECENT answers count, so a client whose lists differ in size
# (nodes, then jobs) keeps the buffer its largest list needs.
SHRINK_FACTOR = 4
RECENT = 32


class Readable(Protocol):
    """A response body that can be read into a buffer (http.client and urllib3 responses)."""

    def readinto(self, b: memoryview, /) -> int | None: ...


class ReadBuffer:
    """A buffer a client's list answers are read into, one after another, tick after tick.

    The view :meth:`fill` returns is valid until the next :meth:`fill`; callers decode it at once and
    keep only what they decoded (msgspec's ``Raw`` items point into it). The buffer is never resized in
    place: a larger answer gets a new buffer, so a view still held elsewhere never blocks the read. It
    is sized to the answer's length where the server sends one, grows by half where it does not, and
    is given back when it is far larger than every recent answer.
    """

    def __init__(self, size: int = CHUNK) -> None:
        self._buf = bytearray(max(size, 1))
        self._recent: deque[int] = deque(maxlen=RECENT)

    @property
    def capacity(self) -> int:
        """The buffer's size in bytes."""
        return len(self._buf)

    def _resize(self, size: int, keep: int) -> None:
        grown = bytearray(size)
        grown[:keep] = memoryview(self._buf)[:keep]
        self._buf = grown

    def fill(self, body: Readable, length: int | None = None) -> memoryview:
        """Read ``body`` to its end; the bytes read, as a view of this buffer.

        ``length``, the answer's Content-Length where known, sizes the buffer before the first read.
        """
        if length is not None and length >= len(self._buf):
            self._resize(length + 1, 0)  # + 1: the read that finds the end needs room to ask
        pos = 0
        while True:
            if pos == len(self._buf):
                self._resize(len(self._buf) + max(len(self._buf) // 2, CHUNK), pos)
            n = body.readinto(memoryview(self._buf)[pos : min(pos + CHUNK, len(self._buf))])
            if not n:
                break
            pos += n
        self._recent.append(pos)
        view = memoryview(self._buf)[:pos]
        largest = max(self._recent)
        if len(self._buf) > SHRINK_FACTOR * max(largest, CHUNK):
            # The answer just read moves to a buffer the recent answers need; the old one is freed.
            self._resize(max(largest + 1, CHUNK), pos)
            view = memoryview(self._buf)[:pos]
        return view
