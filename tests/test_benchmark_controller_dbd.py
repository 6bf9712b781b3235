"""benchmarks/controller_dbd.py's reading of a slurmctld start traced with ``strace -f -tt -T``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "controller_dbd", Path(__file__).resolve().parents[1] / "benchmarks" / "controller_dbd.py"
)
assert _SPEC is not None and _SPEC.loader is not None
controller_dbd = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(controller_dbd)

DBD_PORT = 6819

# The shape strace gives: the main thread connects to slurmdbd (fd 9) and waits for its answers; the
# slurmdbd agent thread waits on the same connection, once split by another thread's line; other sockets'
# waits, short waits and anything after the RPC port's listen do not count.
TRACE = """\
2510  22:53:18.253952 connect(9, {sa_family=AF_INET, sin_port=htons(6819), sin_addr=inet_addr("127.0.0.1")}, 128) = -1 EINPROGRESS (Operation now in progress) <0.000142>
2510  22:53:18.254000 connect(10, {sa_family=AF_INET, sin_port=htons(3306), sin_addr=inet_addr("127.0.0.1")}, 128) = 0 <0.000100>
2510  22:53:18.263175 poll([{fd=9, events=POLLIN}], 1, 900000) = 1 ([{fd=9, revents=POLLIN}]) <0.041550>
2510  22:53:18.304888 poll([{fd=9, events=POLLIN}], 1, 900000) = 1 ([{fd=9, revents=POLLIN}]) <0.000200>
2510  22:53:18.305000 poll([{fd=10, events=POLLIN}], 1, 900000) = 1 ([{fd=10, revents=POLLIN}]) <0.500000>
2516  22:53:18.971248 poll([{fd=9, events=POLLIN}], 1, 900000 <unfinished ...>
2510  22:53:18.980000 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=0, tv_nsec=100000000}, NULL) = 0 <0.100205>
2516  22:53:19.018286 <... poll resumed>) = 1 ([{fd=9, revents=POLLIN}]) <0.045960>
2524  22:53:19.150079 listen(3, 4096)   = 0 <0.000063>
2510  22:53:19.200000 poll([{fd=9, events=POLLIN}], 1, 900000) = 1 ([{fd=9, revents=POLLIN}]) <0.043000>
"""


def test_held_waits_counts_the_long_waits_on_the_slurmdbd_connection_before_listen() -> None:
    count, total = controller_dbd.held_waits(TRACE.splitlines(keepends=True), DBD_PORT)
    assert count == 2
    assert abs(total - (0.041550 + 0.045960)) < 1e-9


def test_held_waits_without_a_slurmdbd_connection_counts_nothing() -> None:
    assert controller_dbd.held_waits(TRACE.splitlines(), 6820) == (0, 0.0)


# The connection closed and its descriptor reused for another socket; a listen on a unix socket (backlog 5 or
# less) before the RPC port's; slurmdbd reached over IPv6.
REUSED = """\
2510  22:53:18.253952 connect(9, {sa_family=AF_INET6, sin6_port=htons(6819), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0 <0.000142>
2510  22:53:18.263175 poll([{fd=9, events=POLLIN}], 1, 900000) = 1 ([{fd=9, revents=POLLIN}]) <0.042000>
2511  22:53:18.270000 listen(5, 5)   = 0 <0.000063>
2510  22:53:18.304888 poll([{fd=9, events=POLLIN}], 1, 900000) = 1 ([{fd=9, revents=POLLIN}]) <0.044000>
2510  22:53:18.310000 close(9)          = 0 <0.000011>
2510  22:53:18.320000 connect(9, {sa_family=AF_INET, sin_port=htons(3306), sin_addr=inet_addr("127.0.0.1")}, 16) = 0 <0.000100>
2510  22:53:18.400000 poll([{fd=9, events=POLLIN}], 1, 900000) = 1 ([{fd=9, revents=POLLIN}]) <0.300000>
2524  22:53:19.150079 listen(3, 4096)   = 0 <0.000063>
"""


def test_held_waits_stops_counting_a_closed_descriptor_and_reads_ipv6_and_past_unix_listens() -> None:
    count, total = controller_dbd.held_waits(REUSED.splitlines(), DBD_PORT)
    assert count == 2
    assert abs(total - 0.086) < 1e-9
