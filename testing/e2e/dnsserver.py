"""The cluster DNS of the container tier, answering as a cluster's CoreDNS does; runs in a container.

``python3 dnsserver.py RECORDS_JSON`` serves UDP and TCP port 53 from a records file the harness
rewrites (atomically, by rename) whenever a pod or a Service's address changes; each query looks at the
file's modification time first, so an answer never lags a pod's creation or removal.

What it answers, after the Kubernetes DNS specification (github.com/kubernetes/dns,
docs/specification.md) and CoreDNS's kubernetes plugin (coredns.io/plugins/kubernetes):

- ``A`` for the names in the file (a pod's ``HOSTNAME.SUBDOMAIN.NS.svc.cluster.local``, a Service's
  ``NAME.NS.svc.cluster.local``), TTL 5 s as CoreDNS's default;
- ``PTR`` for the addresses in the file (a pod by its FQDN, a Service's address by its name);
- ``NOERROR`` with no answer for another type of a known name (``AAAA`` on this IPv4 cluster);
- ``NXDOMAIN`` at once for everything else: the cluster domain's unknown names, the search list's
  wrong guesses, addresses no pod holds. A cluster forwards names outside its domain upstream; this
  network has no upstream, and nothing in the pods asks for one.

Only the standard library and dnslib (a maintained DNS library) are used: the container is the test
image, with dnslib mounted from the harness's virtual environment.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from dnslib import PTR, QTYPE, RCODE, RR, A, DNSRecord  # type: ignore[import-untyped]
from dnslib.server import BaseResolver, DNSLogger, DNSServer  # type: ignore[import-untyped]

TTL = 5
REVERSE_SUFFIX = ".in-addr.arpa"


class Records(BaseResolver):  # type: ignore[misc]
    """Names and addresses from the records file, reloaded when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int, int] = (-1, -1, -1)
        self.names: dict[str, list[str]] = {}
        self.reverse: dict[str, str] = {}
        self.lock = threading.Lock()

    def _load(self) -> None:
        try:
            st = os.stat(self.path)
            # A rename brings a new inode: two rewrites within one timestamp tick still differ.
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            return
        with self.lock:
            if stamp == self.stamp:
                return
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.names = {k.lower(): v for k, v in data["names"].items()}
            self.reverse = dict(data["reverse"])
            self.stamp = stamp

    def resolve(self, request: DNSRecord, handler: Any) -> DNSRecord:
        self._load()
        reply = request.reply()
        qname = request.q.qname
        name = str(qname).rstrip(".").lower()
        qtype = request.q.qtype
        if name.endswith(REVERSE_SUFFIX):
            address = ".".join(reversed(name[: -len(REVERSE_SUFFIX)].split(".")))
            target = self.reverse.get(address)
            if target is None:
                reply.header.rcode = RCODE.NXDOMAIN
            elif qtype in (QTYPE.PTR, QTYPE.ANY):
                reply.add_answer(RR(qname, QTYPE.PTR, rdata=PTR(f"{target}."), ttl=TTL))
            return reply
        addresses = self.names.get(name)
        if addresses is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif qtype in (QTYPE.A, QTYPE.ANY):
            for address in addresses:
                reply.add_answer(RR(qname, QTYPE.A, rdata=A(address), ttl=TTL))
        return reply


def main() -> int:
    records = Records(Path(sys.argv[1]))
    quiet = DNSLogger("-request,-reply,-truncated,-recv,-send,-data")  # errors only: every query would flood the log
    servers = [DNSServer(records, port=53, address="0.0.0.0", tcp=tcp, logger=quiet) for tcp in (False, True)]
    for server in servers:
        server.start_thread()
    (Path(sys.argv[1]).parent / "serving").write_text("yes\n")  # the harness waits for this
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
