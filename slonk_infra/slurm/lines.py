"""Formatting of Slurm's ``Key=Value Key=Value`` lines."""

from __future__ import annotations

from collections.abc import Iterable


def kv_line(pairs: Iterable[tuple[str, object | None]]) -> str:
    """One config line from key/value pairs, skipping keys whose value is None."""
    return " ".join(f"{k}={_value(v)}" for k, v in pairs if v is not None)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "YES" if v else "NO"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    return str(v)


def header(what: str, cluster: str) -> str:
    """Comment block that opens every rendered file."""
    return (
        f"# {what} for Slurm cluster {cluster!r}, rendered by slonk-infra from the cluster declaration.\n"
        "# Do not edit by hand: change the declaration and re-render.\n"
    )
