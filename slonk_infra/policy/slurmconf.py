"""GRES counts per node from ``slurm.conf`` NodeName lines and from ``gres.conf``.

Only what the GRES policy needs: node names (hostlist-compressed, expanded with python-hostlist) and
per-node counts of each GRES name. Slurm keys are case-insensitive; ``NodeName=DEFAULT`` lines set values
for the lines after them; a trailing backslash continues a line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import hostlist

ALL_NODES = "*"  # gres.conf lines without NodeName apply to every node that reads the file
_COUNT_RE = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)
_MULTIPLIERS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _logical_lines(text: str) -> Iterator[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            yield line
    if pending.strip():
        yield pending.strip()


def _fields(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            out[key.lower()] = value
    return out


def parse_count(text: str) -> int | None:
    """``8`` / ``2K`` -> a count; None if it is not one."""
    found = _COUNT_RE.match(text.strip())
    if found is None:
        return None
    return int(found.group(1)) * _MULTIPLIERS[found.group(2).upper()]


def parse_gres_spec(spec: str) -> dict[str, int]:
    """``gpu:h100:8,tpu:4`` -> ``{"gpu": 8, "tpu": 4}``; a GRES without a count counts 1."""
    out: dict[str, int] = {}
    for entry in spec.split(","):
        entry = re.sub(r"\(.*?\)", "", entry).strip()  # drop socket bindings: gpu:8(S:0-1)
        if not entry or entry.lower() == "(null)":
            continue
        parts = entry.split(":")
        count = parse_count(parts[-1]) if len(parts) > 1 else None
        out[parts[0]] = out.get(parts[0], 0) + (count if count is not None else 1)
    return out


def node_gres(slurm_conf: str) -> dict[str, dict[str, int]]:
    """Node name -> GRES name -> count, for every node a NodeName line declares."""
    nodes: dict[str, dict[str, int]] = {}
    default_gres = ""
    for line in _logical_lines(slurm_conf):
        fields = _fields(line)
        names = fields.get("nodename")
        if names is None:
            continue
        if names.upper() == "DEFAULT":
            default_gres = fields.get("gres", default_gres)
            continue
        gres = parse_gres_spec(fields.get("gres", default_gres))
        for node in hostlist.expand_hostlist(names):
            nodes[node] = gres
    return nodes


def gres_conf_counts(gres_conf: str) -> dict[str, dict[str, int]]:
    """Node name (or :data:`ALL_NODES`) -> GRES name -> devices gres.conf gives it."""
    out: dict[str, dict[str, int]] = {}
    for line in _logical_lines(gres_conf):
        fields = _fields(line)
        name = fields.get("name")
        if name is None:
            continue  # AutoDetect=..., or a line this check does not model
        if "count" in fields:
            count = parse_count(fields["count"]) or 0
        elif "file" in fields:
            count = len(hostlist.expand_hostlist(fields["file"]))
        else:
            count = 1
        targets = hostlist.expand_hostlist(fields["nodename"]) if "nodename" in fields else [ALL_NODES]
        for node in targets:
            per_node = out.setdefault(node, {})
            per_node[name] = per_node.get(name, 0) + count
    return out


def group_nodes(nodes: dict[str, dict[str, int]], group: str) -> list[str]:
    """Nodes of a worker group: its pod hostnames ``<group>-<ordinal>``."""
    pattern = re.compile(rf"^{re.escape(group)}-\d+$")
    return sorted((n for n in nodes if pattern.match(n)), key=lambda n: int(n.rsplit("-", 1)[1]))


def compress(nodes: list[str]) -> str:
    """Hostlist expression of ``nodes`` for messages."""
    return str(hostlist.collect_hostlist(nodes)) if nodes else "(none)"
