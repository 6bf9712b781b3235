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

from typing import Protocol

# Each read asks for at most this much: urllib3's ``readinto`` reads into a temporary ``bytes`` of the
# size asked for, so one answer-sized request would allocate an answer-sized object again.
CHUNK = 1 << 20


class Readable(Protocol):
    """A response body that can be read into a buffer (http.client and urllib3 responses)."""

    def readinto(self, b: memoryview, /) -> int | None: ...


class ReadBuffer:
    """A growing buffer one kind of answer is read into, tick after tick.

    The view :meth:`fill` returns is valid until the next :meth:`fill`; callers decode it at once and
    keep only what they decoded. The buffer never shrinks and is never resized in place: a larger
    answer gets a new, doubled buffer, so a view still held elsewhere never blocks the read.
    """

    def __init__(self, size: int = CHUNK) -> None:
        self._buf = bytearray(max(size, 1))

    @property
    def capacity(self) -> int:
        """The buffer's size in bytes (the largest answer read so far, rounded up)."""
        return len(self._buf)

    def fill(self, body: Readable) -> memoryview:
        """Read ``body`` to its end; the bytes read, as a view of this buffer."""
        buf = self._buf
        view = memoryview(buf)
        pos = 0
        while True:
            if pos == len(buf):
                grown = bytearray(2 * len(buf))
                grown[:pos] = buf
                self._buf = buf = grown
                view = memoryview(buf)
            n = body.readinto(view[pos : min(pos + CHUNK, len(buf))])
            if not n:
                return view[:pos]
            pos += n
