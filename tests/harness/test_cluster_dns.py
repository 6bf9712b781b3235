"""The container tier's cluster DNS (testing/e2e/dns.py, dnsserver.py) answers as CoreDNS does: asked over
real UDP on loopback, with the records file the harness writes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from dnslib import RCODE, DNSRecord  # type: ignore[import-untyped]
from dnslib.server import DNSLogger, DNSServer  # type: ignore[import-untyped]

from testing.e2e.dns import ClusterDNS, fqdns
from testing.e2e.dnsserver import Records
from testing.e2e.kube import dns_names, pod_reverse_name

NS = "slurm"


class _NoPodman:
    """ClusterDNS without a server container: only its records file is used here."""

    prefix = "t"
    containers: ClassVar[list[str]] = []


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ClusterDNS, int]]:
    dns = ClusterDNS(_NoPodman(), "net", "10.0.0.2", "image", tmp_path / "dns")  # type: ignore[arg-type]
    port = _free_port()
    server = DNSServer(Records(dns.path), port=port, address="127.0.0.1", logger=DNSLogger("-request,-reply"))
    server.start_thread()
    try:
        yield dns, port
    finally:
        server.stop()


def _ask(port: int, name: str, qtype: str = "A") -> Any:
    t0 = time.monotonic()
    answer = DNSRecord.parse(DNSRecord.question(name, qtype).send("127.0.0.1", port, timeout=2))
    return answer, time.monotonic() - t0


def test_a_pod_is_found_by_its_cluster_names_and_its_address(served: tuple[ClusterDNS, int]) -> None:
    dns, port = served
    service = {"metadata": {"name": "slurmctld-0"}, "spec": {"clusterIP": "10.0.0.90"}}
    names = dns_names("slurmctld-0", NS, "slurmctld", [service])
    reverse = pod_reverse_name("slurmctld-0", NS, "slurmctld", "10.0.0.11", [service])
    dns.set("slurmctld-0", fqdns(names), "10.0.0.11", reverse)
    assert fqdns(names) == ["slurmctld-0.slurmctld.slurm.svc.cluster.local", "slurmctld-0.slurm.svc.cluster.local"]
    for name in ("slurmctld-0.slurmctld.slurm.svc.cluster.local", "SLURMCTLD-0.slurm.svc.cluster.local."):
        answer, _ = _ask(port, name)
        assert [str(r.rdata) for r in answer.rr] == ["10.0.0.11"]
    answer, _ = _ask(port, "11.0.0.10.in-addr.arpa", "PTR")
    assert [str(r.rdata) for r in answer.rr] == ["slurmctld-0.slurmctld.slurm.svc.cluster.local."]
    answer, _ = _ask(port, "slurmctld-0.slurm.svc.cluster.local", "AAAA")  # known name, no such record
    assert answer.header.rcode == RCODE.NOERROR and not answer.rr


def test_unknown_names_and_addresses_are_nxdomain_at_once(served: tuple[ClusterDNS, int]) -> None:
    _, port = served
    # What a pod's search list tries first for a short name, an address no pod holds, a name outside.
    for name, qtype in (
        ("h100-a-0.slurm.svc.cluster.local", "A"),
        ("99.0.0.10.in-addr.arpa", "PTR"),
        ("example.com", "A"),
    ):
        answer, took = _ask(port, name, qtype)
        assert answer.header.rcode == RCODE.NXDOMAIN, name
        assert took < 1.0, (name, took)


def test_records_follow_pods_and_service_stand_ins(served: tuple[ClusterDNS, int]) -> None:
    dns, port = served
    name = "h100-a-0.slurm-workers.slurm.svc.cluster.local"
    dns.set("h100-a-0", [name], "10.0.0.12", name)
    assert [str(r.rdata) for r in _ask(port, name)[0].rr] == ["10.0.0.12"]
    dns.set("h100-a-0", [name], "10.0.0.13", name)  # replaced: a new address at once, the old one gone
    assert [str(r.rdata) for r in _ask(port, name)[0].rr] == ["10.0.0.13"]
    assert _ask(port, "12.0.0.10.in-addr.arpa", "PTR")[0].header.rcode == RCODE.NXDOMAIN
    dns.forget("h100-a-0")
    assert _ask(port, name)[0].header.rcode == RCODE.NXDOMAIN
    # A Service's name held by its stand-in while no pod backs it; two pods behind one Service: both.
    dns.set("Service/login", ["login.slurm.svc.cluster.local"], "10.0.0.50", "login.slurm.svc.cluster.local")
    assert [str(r.rdata) for r in _ask(port, "login.slurm.svc.cluster.local")[0].rr] == ["10.0.0.50"]
    dns.forget("Service/login")
    dns.set("login-0", ["login.slurm.svc.cluster.local"], "10.0.0.14", None)
    dns.set("login-1", ["login.slurm.svc.cluster.local"], "10.0.0.15", None)
    got = sorted(str(r.rdata) for r in _ask(port, "login.slurm.svc.cluster.local")[0].rr)
    assert got == ["10.0.0.14", "10.0.0.15"]


def test_a_deployment_pod_answers_by_its_dashed_address_under_its_service() -> None:
    svc = {"metadata": {"name": "slurmrestd"}, "spec": {}}
    assert pod_reverse_name("slurmrestd-abc-12345", NS, None, "10.0.0.16", [svc]) == (
        "10-0-0-16.slurmrestd.slurm.svc.cluster.local"
    )
    assert pod_reverse_name("lonely", NS, None, "10.0.0.17", []) is None


def test_many_rewrites_while_asked_never_give_a_wrong_answer(served: tuple[ClusterDNS, int]) -> None:
    dns, port = served
    name = "w.slurm-workers.slurm.svc.cluster.local"
    dns.set("w", [name], "10.0.1.1", name)
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            dns.set(f"other-{i % 50}", [f"o{i % 50}.slurm.svc.cluster.local"], f"10.0.2.{i % 50 + 1}", None)
            i += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(200):
            assert [str(r.rdata) for r in _ask(port, name)[0].rr] == ["10.0.1.1"]
    finally:
        stop.set()
        thread.join()
