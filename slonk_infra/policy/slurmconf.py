"""Slurm's config file syntax (slurm.conf, gres.conf, cgroup.conf), read once for the whole repository.

The tokenizer keeps every logical line's physical text, so a caller that rewrites some lines can copy
the others byte for byte (the test lab does); on top of it, what the GRES policy needs: node names
(hostlist-compressed, expanded with python-hostlist) and per-node counts of each GRES name.

Syntax: a ``#`` outside double quotes (and not after a backslash) starts a comment; a trailing backslash
continues a line; tokens are separated by whitespace outside double quotes; ``Key=Value`` keys are
case-insensitive; ``NodeName=DEFAULT`` lines set values for the NodeName lines after them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import hostlist

ALL_NODES = "*"  # gres.conf lines without NodeName apply to every node that reads the file
_COUNT_RE = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)
_MULTIPLIERS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_CONTINUATION = re.compile(r"\\\r?\n")


@dataclass(frozen=True)
class Line:
    """One logical line of a config file."""

    raw: str
    """The physical line(s) exactly as given, newlines and continuation backslashes included."""
    tokens: tuple[str, ...]
    """Whitespace-separated tokens outside quotes (quotes kept), the comment left out."""
    comment: str
    """The comment, from its ``#``; '' when none."""


def _strip_comment(text: str) -> tuple[str, str]:
    in_quote = False
    prev = ""
    for i, ch in enumerate(text):
        if ch == '"':
            in_quote = not in_quote
        elif ch == "#" and not in_quote and prev != "\\":
            return text[:i], text[i:]
        prev = ch
    return text, ""


def _split_tokens(text: str) -> tuple[str, ...]:
    tokens: list[str] = []
    cur: list[str] = []
    in_quote = False
    for ch in text:
        if ch == '"':
            in_quote = not in_quote
            cur.append(ch)
        elif ch.isspace() and not in_quote:
            if cur:
                tokens.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        tokens.append("".join(cur))
    return tuple(tokens)


def lines(text: str) -> list[Line]:
    """Every logical line of ``text``, blank and comment-only ones included (their ``tokens`` are empty)."""
    out: list[Line] = []
    pending: list[str] = []
    for phys in text.splitlines(keepends=True):
        pending.append(phys)
        if phys.rstrip("\r\n").endswith("\\"):
            continue
        raw = "".join(pending)
        pending = []
        body, comment = _strip_comment(_CONTINUATION.sub(" ", raw).rstrip("\r\n"))
        out.append(Line(raw, _split_tokens(body), comment))
    if pending:  # a continuation backslash on the last line
        raw = "".join(pending)
        body, comment = _strip_comment(_CONTINUATION.sub(" ", raw).rstrip("\\\r\n"))
        out.append(Line(raw, _split_tokens(body), comment))
    return out


def key_value(token: str) -> tuple[str, str] | None:
    """``Key=Value`` -> (``Key``, ``Value``) as written; None for a token without ``=``."""
    if "=" not in token:
        return None
    key, _, value = token.partition("=")
    return key, value


def unquote(value: str) -> str:
    """A value without its surrounding double quotes."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def fields(line: Line) -> dict[str, str]:
    """Lowercase key -> unquoted value of every ``Key=Value`` token of a line (the last one wins)."""
    return {key.lower(): unquote(value) for key, value in filter(None, map(key_value, line.tokens))}


@dataclass(frozen=True)
class NodeLine:
    """A ``NodeName=`` line other than DEFAULT, with the DEFAULT values before it applied."""

    names: list[str]
    """Its node names, hostlist expanded."""
    values: dict[str, str]
    """Lowercase key -> unquoted value, the NodeName key itself included."""


def node_lines(texts: Iterable[str]) -> list[NodeLine]:
    """The NodeName lines of slurm.conf and the files it includes, given in the order Slurm reads them."""
    out: list[NodeLine] = []
    defaults: dict[str, str] = {}
    for text in texts:
        for line in lines(text):
            values = fields(line)
            first = key_value(line.tokens[0]) if line.tokens else None
            if first is None or first[0].lower() != "nodename":
                continue
            if first[1].upper() == "DEFAULT":
                defaults.update({k: v for k, v in values.items() if k != "nodename"})
                continue
            out.append(NodeLine(list(hostlist.expand_hostlist(first[1])), {**defaults, **values}))
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
    return {
        node: parse_gres_spec(line.values.get("gres", "")) for line in node_lines([slurm_conf]) for node in line.names
    }


def gres_conf_counts(gres_conf: str) -> dict[str, dict[str, int]]:
    """Node name (or :data:`ALL_NODES`) -> GRES name -> devices gres.conf gives it."""
    out: dict[str, dict[str, int]] = {}
    for line in lines(gres_conf):
        values = fields(line)
        name = values.get("name")
        if name is None:
            continue  # AutoDetect=..., or a line this check does not model
        if "count" in values:
            count = parse_count(values["count"]) or 0
        elif "file" in values:
            count = len(hostlist.expand_hostlist(values["file"]))
        else:
            count = 1
        targets = hostlist.expand_hostlist(values["nodename"]) if "nodename" in values else [ALL_NODES]
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
