"""Container image references: registry, repository, tag, digest and the CUDA version a tag declares."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# Image tags of CUDA images say which toolkit they carry (nvidia/cuda:12.8.1-..., ...-cuda12.8.1); the
# image has no other place a policy can read before it is pulled.
CUDA_IN_TAG_RE = re.compile(r"cuda[-_]?(\d+)\.(\d+)(?:\.(\d+))?", re.IGNORECASE)
DEFAULT_REGISTRY = "docker.io"


@dataclass(frozen=True)
class ImageRef:
    """One image reference split the way a container runtime reads it."""

    raw: str
    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """Registry and repository, without tag or digest."""
        return f"{self.registry}/{self.repository}"

    @property
    def pinned(self) -> bool:
        """Whether the reference names content (a sha256 digest) rather than a movable tag."""
        return self.digest is not None and DIGEST_RE.match(self.digest) is not None

    @property
    def floating(self) -> bool:
        """No digest and either no tag or ``latest``: what runs changes without any change here."""
        return self.digest is None and self.tag in (None, "latest")

    def cuda_version(self) -> str | None:
        """The CUDA version the tag declares (``12.8.1`` or ``12.8``), or None."""
        found = CUDA_IN_TAG_RE.search(self.tag or "")
        if found is None:
            return None
        return ".".join(part for part in found.groups() if part is not None)

    def in_registries(self, allowed: Iterable[str]) -> bool:
        """Whether the image comes from one of ``allowed`` (a registry host, or a host/path prefix)."""
        for entry in allowed:
            prefix = entry.strip().rstrip("/")
            if prefix and (self.name == prefix or self.name.startswith(prefix + "/")):
                return True
        return False


def parse_image(ref: str) -> ImageRef:
    """Split ``ref`` into registry, repository, tag and digest (Docker reference grammar)."""
    rest, _, digest = ref.strip().partition("@")
    tag: str | None = None
    last_slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > last_slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
    first, _, remainder = rest.partition("/")
    # Only a first component that looks like a host (has a dot or a port, or is localhost) names a registry.
    if remainder and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, remainder
    else:
        registry = DEFAULT_REGISTRY
        repository = rest if "/" in rest else f"library/{rest}"
    return ImageRef(raw=ref, registry=registry, repository=repository, tag=tag or None, digest=digest or None)


def version_matches(declared: str, wanted: str) -> bool:
    """``12.8.1`` matches ``12.8`` and ``12.8.1``; ``12.8`` does not match ``12.8.1`` (too vague to tell)."""
    declared_parts, wanted_parts = declared.split("."), wanted.strip().split(".")
    return declared_parts[: len(wanted_parts)] == wanted_parts
