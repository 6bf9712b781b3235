"""What a credential looks like inside a ConfigMap: key names, value patterns, high-entropy blobs.

Findings never carry the secret itself, only where it is and what it looks like, so a CI log that prints
them does not become the leak.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

CREDENTIAL_KEY_RE = re.compile(
    r"(?i)(?:^|[._-])(munge[._-]?key|jwt\w*|passw(?:or)?d|credentials?|private[._-]?key|api[._-]?key|"
    r"id_(?:rsa|dsa|ecdsa|ed25519))(?:[._-]|$)|\.(?:pem|key|p12|pfx|jks|keytab)$"
)
PRIVATE_KEY_RE = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
JWT_RE = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
AWS_KEY_RE = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
# KEY=value / key: value where the key names a password and the value is a literal, not a reference to
# one ($VAR, a file path such as AccountingStoragePass=/run/munge/..., or a template placeholder).
PASSWORD_LINE_RE = re.compile(
    r"(?im)^\s*(?:export\s+)?[\w.-]*(?:password|passwd|storagepass|secret_?key|api_?key|token)[\w.-]*\s*[=:]\s*"
    r"(?P<value>['\"]?[^\s'\"$/<{][^\s'\"]{3,})"
)
NOT_A_SECRET_RE = re.compile(r"(?i)^(?:\d+(?:\.\d+)?[smhd]?|true|false|yes|no|null)$")
CERTIFICATE_BLOCK_RE = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)
BASE64_LINE_RE = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")
BASE64_RUN_RE = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


@dataclass(frozen=True)
class Finding:
    """Why one ConfigMap entry looks like it holds a credential."""

    key: str
    reason: str


def entropy_bits_per_char(text: str) -> float:
    """Shannon entropy of ``text`` per character (random base64 is close to 6, prose near 4)."""
    if not text:
        return 0.0
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _blobs(text: str) -> Iterator[str]:
    # Public certificates (CA bundles) are long base64 too, and belong in ConfigMaps.
    text = CERTIFICATE_BLOCK_RE.sub("", text)
    # Base64 is often wrapped (76 columns from `base64`, 64 in PEM): join runs of pure base64 lines first.
    joined: list[str] = []
    run = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and BASE64_LINE_RE.match(stripped):
            run += stripped
            continue
        if run:
            joined.append(run)
            run = ""
        joined.append(stripped)
    if run:
        joined.append(run)
    for chunk in joined:
        yield from BASE64_RUN_RE.findall(chunk)


def scan_text(key: str, text: str, max_blob_chars: int, min_entropy: float) -> list[Finding]:
    """Findings for one ConfigMap ``data`` entry."""
    found: list[Finding] = []
    if PRIVATE_KEY_RE.search(text):
        found.append(Finding(key, "contains a PEM private key block"))
    if JWT_RE.search(text):
        found.append(Finding(key, "contains a JSON Web Token (eyJ...)"))
    if AWS_KEY_RE.search(text):
        found.append(Finding(key, "contains an AWS access key id"))
    for match in PASSWORD_LINE_RE.finditer(text):
        if NOT_A_SECRET_RE.match(match.group("value").strip("'\"")):
            continue  # a number or a boolean (tokenLifetimeSeconds: 3600) holds no credential
        line_no = text.count("\n", 0, match.start()) + 1
        setting = match.group(0).strip().split("=", 1)[0].split(":", 1)[0].strip()
        found.append(Finding(key, f"line {line_no} sets {setting} to a literal value ({redact(match.group('value'))})"))
    for blob in _blobs(text):
        if len(blob) > max_blob_chars and entropy_bits_per_char(blob) >= min_entropy:
            found.append(
                Finding(
                    key,
                    f"holds a high-entropy base64 blob of {len(blob)} characters "
                    f"({entropy_bits_per_char(blob):.1f} bits/char; a key, not configuration)",
                )
            )
            break
    return found


def scan_binary(key: str, b64: str, max_blob_chars: int, min_entropy: float) -> list[Finding]:
    """Findings for one ConfigMap ``binaryData`` entry (base64 of arbitrary bytes)."""
    compact = "".join(b64.split())
    found: list[Finding] = []
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    with contextlib.suppress(UnicodeDecodeError):  # binary content: only the blob rule below applies
        found.extend(scan_text(key, raw.decode("utf-8"), max_blob_chars, min_entropy))
    if len(compact) > max_blob_chars and entropy_bits_per_char(compact) >= min_entropy and not found:
        found.append(Finding(key, f"holds {len(raw)} bytes of high-entropy binary data (a munge key looks like this)"))
    return found


def scan_key_name(key: str) -> list[Finding]:
    """A finding when the key's name says it is a credential (``munge.key``, ``jwt_hs256.key``, ...)."""
    match = CREDENTIAL_KEY_RE.search(key)
    if match is None:
        return []
    return [Finding(key, f"key name looks like a credential ({match.group(0).strip('._-')})")]


def redact(value: str) -> str:
    """Enough of a value to find it again, never enough to use it."""
    value = value.strip("'\"")
    return f"{value[:2]}... ({len(value)} chars)" if len(value) > 2 else f"({len(value)} chars)"
