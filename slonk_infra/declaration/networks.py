"""What counts as a private address range, for choosing an internal load balancer and refusing a public one.

An explicit list rather than :attr:`ipaddress.IPv4Network.is_private`: that property also counts the
documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) and loopback as private, so a user
who kept an example range would get an internal load balancer and never reach it; and it counts the
shared address space 100.64.0.0/10, which VPCs do use for nodes and pods, as public.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

# RFC 1918 (IPv4 private), RFC 6598 (shared address space, used as VPC secondary ranges on GKE and EKS)
# and RFC 4193 (IPv6 unique local): the addresses a client inside a VPC or behind a VPN has.
PRIVATE_RANGES = tuple(
    ipaddress.ip_network(r) for r in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)


def is_private_range(cidr: str) -> bool:
    """Whether every address of ``cidr`` is in one of :data:`PRIVATE_RANGES`."""
    net = ipaddress.ip_network(cidr, strict=False)
    return any(net.version == p.version and net.subnet_of(p) for p in PRIVATE_RANGES)  # type: ignore[arg-type]


def all_private(ranges: Sequence[str]) -> bool:
    """Whether there are ranges and every one is private (:func:`is_private_range`)."""
    return bool(ranges) and all(is_private_range(r) for r in ranges)
