"""No credentials in ConfigMaps: no munge or JWT keys, private key blocks, passwords, tokens or
high-entropy key material."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.policy import secrets
from slonk_infra.policy.common import (
    setting,
)
from slonk_infra.policy.props import (
    as_int,
    describe,
    get,
    items,
    kind_of,
)

MAX_BLOB_CHARS = 512
MIN_ENTROPY = 4.5


def _validate_configmap_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if kind_of(args.resource_type) not in ("ConfigMap", "ConfigMapPatch"):
        return
    where = describe(args.resource_type, args.props, args.name)
    max_chars = as_int(setting(args, "maxBlobChars", MAX_BLOB_CHARS)) or MAX_BLOB_CHARS
    min_entropy = float(setting(args, "minEntropyBitsPerChar", MIN_ENTROPY))
    findings: list[secrets.Finding] = []
    # An unknown value (computed from another resource during preview) cannot be judged; skip it.
    for key, value in items(get(args.props, "data")):
        findings.extend(secrets.scan_key_name(key))
        if isinstance(value, str):
            findings.extend(secrets.scan_text(key, value, max_chars, min_entropy))
    for key, value in items(get(args.props, "binaryData")):
        findings.extend(secrets.scan_key_name(key))
        if isinstance(value, str):
            findings.extend(secrets.scan_binary(key, value, max_chars, min_entropy))
    for finding in findings:
        report(f"{where} key {finding.key}: {finding.reason}", None)


no_secrets_in_configmaps = ResourceValidationPolicy(
    name="no-secrets-in-configmaps",
    description=(
        "ConfigMaps hold no credentials: no munge or JWT keys, private key blocks, passwords, tokens or "
        "high-entropy key material."
    ),
    validate=_validate_configmap_secrets,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(
        properties={
            "maxBlobChars": {"type": "integer", "default": MAX_BLOB_CHARS, "minimum": 64},
            "minEntropyBitsPerChar": {"type": "number", "default": MIN_ENTROPY, "minimum": 0, "maximum": 8},
        }
    ),
    remediation_steps=(
        "Move the value into a Kubernetes Secret (slonk-infra keeps the munge key in Secret munge-key, generated "
        "by random.RandomBytes and stored as a Pulumi secret) and mount or reference that Secret; rotate the "
        "credential, since ConfigMaps are readable by anyone who can read the namespace and land in Pulumi "
        "state unencrypted."
    ),
)
