"""What ``slonk-infra check`` prints: the CI log text, a JSON report and a SARIF 2.1.0 log, in one order.

Violations become *findings* before any format is written, by one rule that every format shares:

1. **Dedupe.** Violations with the same policy, resource (URN) and message are one violation.
2. **Group by root cause.** A policy's message reads ``<subject>: <what is wrong>``, the subject naming
   the resource and, where there is one, the container or key (``StatefulSet slurm/h100-a container
   slurmd: image ... is not pinned by digest``). Violations of one policy at one enforcement level whose
   *what is wrong* part (the message after its first ``": "``; the whole message when it has none) is the
   same text are one finding: one declared value (the stack's ``image.reference``, a config setting)
   that many resources share is reported once, with every resource and place it reaches. A finding
   that reaches more than one resource is a *root-cause* finding.
3. **Order.** Findings sort by enforcement level (mandatory, then advisory), then root-cause findings
   first, widest first (most resources), then policy name, then the first resource's URN, then the
   text. The violations of a finding sort by URN, then message. Anything not checked (values unknown
   before deployment) is deduped and sorted by policy, URN, message.

The formats:

- **text** (:func:`format_text`): the header, one line per finding (a finding on one resource is its
  first message, with ``(xN on this resource; ...)`` when it repeats; a root cause is its shared text with
  how many violations on how many resources, and which), then the not-checked lines, "how to fix:" with
  each failing policy's remediation steps, and the verdict. ``every=True`` (``--all``) lists each
  violation in full instead, in the same order.
- **json** (:func:`json_report`, version :data:`JSON_REPORT_VERSION`): ``{"version", "tool": {"name",
  "version"}, "stack", "stackFile", "passed", "resources", "policyConfig": {"source", "path", "policies":
  {name: {"enforcementLevel", ...settings}}}, "summary": {"mandatory", "advisory", "notChecked",
  "findings": {"mandatory", "advisory"}}, "findings": [{"policy", "enforcementLevel", "message",
  "rootCause", "resources", "violations": [indexes]}], "violations": [{"policy", "enforcementLevel",
  "message", "subject", "urn", "resourceType", "resourceName", "finding"}], "notChecked": [same fields,
  no "finding"]}``. ``policies`` holds every policy of the pack with the level it ran at and its
  settings, in the form ``--policy-config`` reads; counts are of deduped violations.
- **sarif** (:func:`sarif_log`): one run of the tool ``slonk-infra``; its ``rules`` are every policy of
  the pack (``defaultConfiguration.level`` from the level it ran at: mandatory ``error``, advisory
  ``warning``, disabled ``none`` and not enabled), one result per finding. Violations are about Pulumi
  resources, not source lines: each result's location names every resource it reaches as a logical
  location (``kind: "resource"``, the URN as fully qualified name) and the stack file as its physical
  location (GitHub code scanning needs one), at the first line of that file quoting a value of the
  message (the image reference, say) when there is one. Not-checked items are results of ``kind:
  "open"``.

This module reads results through small protocols (:class:`ViolationLike`, :class:`ResultLike`) so that
the runner can use it without an import cycle.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pulumi_policy import EnforcementLevel, Policy

from slonk_infra.policy.config import PolicyConfig

FORMATS = ("text", "json", "sarif")
JSON_REPORT_VERSION = 1
TOOL_NAME = "slonk-infra"
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
# How many resources a grouped text line names before "and N more".
TEXT_NAMES = 6

_LEVEL_RANK = {EnforcementLevel.MANDATORY: 0, EnforcementLevel.REMEDIATE: 0, EnforcementLevel.ADVISORY: 1}
_SARIF_LEVEL = {
    EnforcementLevel.MANDATORY: "error",
    EnforcementLevel.REMEDIATE: "error",
    EnforcementLevel.ADVISORY: "warning",
    EnforcementLevel.DISABLED: "none",
}
_QUOTE_CHARS = "()[]{}<>'\"`,;"


class ViolationLike(Protocol):
    """What a report reads of one violation (:class:`slonk_infra.policy.runner.Violation`)."""

    @property
    def policy(self) -> str: ...
    @property
    def level(self) -> EnforcementLevel: ...
    @property
    def message(self) -> str: ...
    @property
    def urn(self) -> str: ...


class ResultLike(Protocol):
    """What a report reads of one check (:class:`slonk_infra.policy.runner.CheckResult`)."""

    @property
    def violations(self) -> Sequence[ViolationLike]: ...
    @property
    def undecided(self) -> Sequence[ViolationLike]: ...
    @property
    def resources(self) -> int: ...
    @property
    def policies(self) -> Sequence[Policy]: ...
    @property
    def failed(self) -> bool: ...


@dataclass(frozen=True)
class Place:
    """One (deduped) violation: the resource, the subject its message names, the whole message."""

    policy: str
    level: EnforcementLevel
    urn: str
    message: str

    @property
    def subject(self) -> str:
        """What the message names before its first ``": "`` (``StatefulSet slurm/cpu container slurmd``)."""
        return split_message(self.message)[0]

    @property
    def text(self) -> str:
        """What is wrong: the message less its subject."""
        return split_message(self.message)[1]

    @property
    def resource_type(self) -> str:
        """The resource's type token, from the URN (``kubernetes:apps/v1:StatefulSet``)."""
        return urn_type(self.urn)

    @property
    def resource_name(self) -> str:
        """The resource's Pulumi name, from the URN (``slonk-gcp-statefulset-cpu``)."""
        return urn_name(self.urn)

    def line(self) -> str:
        """The CI log line: ``[mandatory] uniform-cuda-image: StatefulSet slurm/h100-a ...``."""
        return f"[{self.level.value}] {self.policy}: {self.message}"


@dataclass(frozen=True)
class Finding:
    """Violations of one policy and level that say the same thing, possibly about many resources."""

    policy: str
    level: EnforcementLevel
    text: str
    places: tuple[Place, ...]

    @property
    def resources(self) -> tuple[str, ...]:
        """The URNs it reaches, each once, in order."""
        return tuple(dict.fromkeys(p.urn for p in self.places))

    @property
    def root_cause(self) -> bool:
        """Whether it reaches more than one resource (one shared value is wrong)."""
        return len(self.resources) > 1

    @property
    def message(self) -> str:
        """The whole message for a single violation, else the shared text."""
        return self.places[0].message if len(self.places) == 1 else self.text

    def sort_key(self) -> tuple[int, bool, int, str, str, str]:
        """Level, root cause first (widest first), policy, first resource, text."""
        return (
            _LEVEL_RANK.get(self.level, 2),
            not self.root_cause,
            -len(self.resources),
            self.policy,
            self.places[0].urn,
            self.text,
        )

    def extent(self, names: int = TEXT_NAMES) -> str:
        """``15 violations on 8 resources: a, b, ... and 2 more``: how far it reaches, naming ``names``."""
        resources = [urn_name(u) or "the stack" for u in self.resources]
        shown = resources[:names]
        more = f" and {len(resources) - len(shown)} more" if len(resources) > len(shown) else ""
        noun = "resource" if len(resources) == 1 else "resources"
        return f"{len(self.places)} violations on {len(resources)} {noun}: {', '.join(shown)}{more}"

    def line(self) -> str:
        """One CI log line for the whole finding."""
        first = self.places[0].line()
        if len(self.places) == 1:
            return first
        if not self.root_cause:
            return f"{first} (x{len(self.places)} on this resource; --all lists each)"
        return f"[{self.level.value}] {self.policy}: {self.text} ({self.extent()}; --all lists each)"


def split_message(message: str) -> tuple[str, str]:
    """``(subject, what is wrong)`` of a policy message; no ``": "`` means no subject."""
    subject, sep, rest = message.partition(": ")
    return (subject, rest) if sep and rest else ("", message)


def urn_type(urn: str) -> str:
    """The type token of a Pulumi URN (``urn:pulumi:stack::project::parent$type::name``); ``""`` if none."""
    parts = urn.split("::")
    return parts[2].rsplit("$", 1)[-1] if len(parts) >= 4 else ""


def urn_name(urn: str) -> str:
    """The resource name of a Pulumi URN; ``""`` if none."""
    parts = urn.split("::")
    return "::".join(parts[3:]) if len(parts) >= 4 else ""


def _dedupe(violations: Iterable[ViolationLike]) -> list[Place]:
    seen: dict[tuple[str, str, str], Place] = {}
    for v in violations:
        seen.setdefault((v.policy, v.urn, v.message), Place(v.policy, v.level, v.urn, v.message))
    return list(seen.values())


def findings(violations: Iterable[ViolationLike]) -> list[Finding]:
    """Deduped violations grouped by root cause and ordered, as the module docstring says."""
    groups: dict[tuple[str, EnforcementLevel, str], list[Place]] = {}
    for place in _dedupe(violations):
        groups.setdefault((place.policy, place.level, place.text), []).append(place)
    out = [
        Finding(policy, level, text, tuple(sorted(places, key=lambda p: (p.urn, p.message))))
        for (policy, level, text), places in groups.items()
    ]
    return sorted(out, key=Finding.sort_key)


def not_checked(undecided: Iterable[ViolationLike]) -> list[Place]:
    """What could not be decided, deduped, by policy, URN and message."""
    return sorted(_dedupe(undecided), key=lambda p: (p.policy, p.urn, p.message))


def _counts(found: Sequence[Finding]) -> tuple[int, int]:
    mandatory = sum(len(f.places) for f in found if _LEVEL_RANK.get(f.level) == 0)
    advisory = sum(len(f.places) for f in found if f.level == EnforcementLevel.ADVISORY)
    return mandatory, advisory


def verdict(stack: str, result: ResultLike) -> str:
    """The last line of the text: ``gcp: FAILED - 2 mandatory, 0 advisory violation(s)`` (deduped)."""
    mandatory, advisory = _counts(findings(result.violations))
    return f"{stack}: {'FAILED' if result.failed else 'OK'} - {mandatory} mandatory, {advisory} advisory violation(s)"


def format_text(stack: str, result: ResultLike, config_source: str, *, every: bool = False) -> str:
    """The CI log text of one check: findings, what was not checked, how to fix, and the verdict."""
    found = findings(result.violations)
    lines = [f"check {stack}: {len(result.policies)} policies on {result.resources} resources ({config_source})"]
    for finding in found:
        lines += [p.line() for p in finding.places] if every else [finding.line()]
    lines += [f"[not checked] {p.policy}: {p.message}" for p in not_checked(result.undecided)]
    steps = {p.name: p.remediation_steps for p in result.policies if p.remediation_steps}
    hinted = [name for name in dict.fromkeys(f.policy for f in found) if name in steps]
    if hinted:
        lines.append("how to fix:")
        lines += [f"  {name}: {steps[name]}" for name in hinted]
    lines.append(verdict(stack, result))
    return "\n".join(lines)


def tool_version() -> str:
    """The installed slonk-infra version (``0+unknown`` when it is not installed)."""
    try:
        return importlib.metadata.version(TOOL_NAME)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _level_of(policy: Policy, config: PolicyConfig | None) -> EnforcementLevel:
    return config.level(policy) if config else (policy.enforcement_level or EnforcementLevel.ADVISORY)


def relative_uri(path: Path, root: Path | None = None) -> tuple[str, bool]:
    """``(uri, relative)``: ``path`` as a URI relative to ``root`` (default: the current directory) when it
    lies under it (``stacks/Pulumi.gcp.yaml``), else its absolute ``file:`` URI."""
    base = (root or Path.cwd()).resolve()
    full = path.resolve()
    try:
        return full.relative_to(base).as_posix(), True
    except ValueError:
        return full.as_uri(), False


def _violation_json(place: Place) -> dict[str, Any]:
    return {
        "policy": place.policy,
        "enforcementLevel": place.level.value,
        "message": place.message,
        "subject": place.subject,
        "urn": place.urn,
        "resourceType": place.resource_type,
        "resourceName": place.resource_name,
    }


def json_report(
    stack: str,
    result: ResultLike,
    config: PolicyConfig | None,
    config_source: str,
    stack_file: Path | None = None,
    root: Path | None = None,
) -> dict[str, Any]:
    """The JSON report (structure in the module docstring); ``root`` makes ``stackFile`` relative."""
    found = findings(result.violations)
    violations: list[dict[str, Any]] = []
    finding_rows: list[dict[str, Any]] = []
    for index, finding in enumerate(found):
        first = len(violations)
        violations += [{**_violation_json(p), "finding": index} for p in finding.places]
        finding_rows.append(
            {
                "policy": finding.policy,
                "enforcementLevel": finding.level.value,
                "message": finding.message,
                "rootCause": finding.root_cause,
                "resources": len(finding.resources),
                "violations": list(range(first, len(violations))),
            }
        )
    mandatory, advisory = _counts(found)
    undecided = not_checked(result.undecided)
    policies = {
        p.name: {"enforcementLevel": _level_of(p, config).value, **(config.for_policy(p.name) if config else {})}
        for p in result.policies
    }
    return {
        "version": JSON_REPORT_VERSION,
        "tool": {"name": TOOL_NAME, "version": tool_version()},
        "stack": stack,
        "stackFile": relative_uri(stack_file, root)[0] if stack_file else None,
        "passed": not result.failed,
        "resources": result.resources,
        "policyConfig": {"source": config_source, "path": config.source if config else None, "policies": policies},
        "summary": {
            "mandatory": mandatory,
            "advisory": advisory,
            "notChecked": len(undecided),
            "findings": {
                "mandatory": sum(1 for f in found if _LEVEL_RANK.get(f.level) == 0),
                "advisory": sum(1 for f in found if f.level == EnforcementLevel.ADVISORY),
            },
        },
        "findings": finding_rows,
        "violations": violations,
        "notChecked": [_violation_json(p) for p in undecided],
    }


def _rule(policy: Policy, level: EnforcementLevel) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "id": policy.name,
        "name": "".join(word.capitalize() for word in policy.name.split("-")),
        "shortDescription": {"text": policy.description},
        "defaultConfiguration": {"level": _SARIF_LEVEL.get(level, "warning")},
        "properties": {"enforcementLevel": level.value},
    }
    if level == EnforcementLevel.DISABLED:
        rule["defaultConfiguration"]["enabled"] = False
    if policy.remediation_steps:
        rule["help"] = {"text": policy.remediation_steps}
    return rule


def quoted_line(text: str, lines: Sequence[str]) -> int | None:
    """The 1-based number of the first of ``lines`` that holds a value ``text`` quotes: a word with ``/``,
    ``:``, ``@`` or ``.`` in it, at least 8 characters long (an image reference, a registry, a path)."""
    for word in text.split():
        token = word.strip(_QUOTE_CHARS).rstrip(".")
        if len(token) < 8 or not any(c in token for c in "/:@."):
            continue
        for number, line in enumerate(lines, start=1):
            if token in line:
                return number
    return None


def _physical(uri: str, relative: bool, line: int | None) -> dict[str, Any]:
    artifact: dict[str, Any] = {"uri": uri}
    if relative:
        artifact["uriBaseId"] = SRCROOT
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if line is not None:
        physical["region"] = {"startLine": line}
    return physical


def _logical(urns: Iterable[str]) -> list[dict[str, Any]]:
    return [{"name": urn_name(u), "fullyQualifiedName": u, "kind": "resource"} for u in urns if urn_name(u)]


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def sarif_log(
    stack: str,
    result: ResultLike,
    config: PolicyConfig | None,
    stack_file: Path,
    root: Path | None = None,
) -> dict[str, Any]:
    """The SARIF 2.1.0 log of one check: every policy a rule, one result per finding (module docstring).

    ``stack_file`` is every result's physical location, as a URI relative to ``root`` (default: the
    current directory, the repository root in CI) with base id ``%SRCROOT%``.
    """
    rules = [_rule(p, _level_of(p, config)) for p in result.policies]
    index = {p.name: i for i, p in enumerate(result.policies)}
    uri, relative = relative_uri(stack_file, root)
    try:
        stack_lines = stack_file.read_text(encoding="utf-8").splitlines()
    except OSError:
        stack_lines = []

    def sarif_result(policy: str, message: str, text: str, urns: Sequence[str]) -> dict[str, Any]:
        location: dict[str, Any] = {"physicalLocation": _physical(uri, relative, quoted_line(text, stack_lines))}
        logical = _logical(urns)
        if logical:
            location["logicalLocations"] = logical
        out: dict[str, Any] = {"ruleId": policy}
        if policy in index:
            out["ruleIndex"] = index[policy]
        out["message"] = {"text": message}
        out["locations"] = [location]
        out["partialFingerprints"] = {"slonkInfraFinding/v1": _fingerprint(stack, policy, text)}
        return out

    results: list[dict[str, Any]] = []
    for finding in findings(result.violations):
        message = finding.message
        if len(finding.places) > 1:
            places = "; ".join(p.subject or urn_name(p.urn) or "the stack" for p in finding.places)
            noun = "resource" if len(finding.resources) == 1 else "resources"
            message += f" ({len(finding.places)} violations on {len(finding.resources)} {noun}: {places})"
        level = {"level": _SARIF_LEVEL.get(finding.level, "warning")}
        results.append(sarif_result(finding.policy, message, finding.text, finding.resources) | level)
    for place in not_checked(result.undecided):
        # Undecided, not failed: SARIF's "open" result kind, whose level must be "none".
        open_item = {"kind": "open", "level": "none"}
        results.append(sarif_result(place.policy, place.message, place.message, (place.urn,)) | open_item)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": TOOL_NAME, "version": tool_version(), "rules": rules}},
        "automationDetails": {"id": f"{TOOL_NAME}/check/{stack}/"},
        "invocations": [{"executionSuccessful": True}],
        "results": results,
        "properties": {"stack": stack, "resources": result.resources, "passed": not result.failed},
    }
    if relative:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": (root or Path.cwd()).resolve().as_uri().rstrip("/") + "/"}}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def render(
    fmt: str,
    stack: str,
    result: ResultLike,
    config: PolicyConfig | None,
    config_source: str,
    stack_file: Path,
    *,
    every: bool = False,
) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`) as text; JSON formats end with a newline."""
    if fmt == "text":
        return format_text(stack, result, config_source, every=every)
    if fmt == "json":
        data = json_report(stack, result, config, config_source, stack_file)
    elif fmt == "sarif":
        data = sarif_log(stack, result, config, stack_file)
    else:
        raise ValueError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
