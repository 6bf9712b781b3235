"""The ConfigMap secret scanner: literal credentials are found, numbers and booleans beside a token key are not."""

from __future__ import annotations

from slonk_infra.policy.secrets import scan_text


def test_a_literal_token_is_found() -> None:
    [finding] = scan_text("config.yaml", "apiToken: s3cr3tValue42\n", 200, 4.5)
    assert "line 1 sets apiToken to a literal value" in finding.reason


def test_a_token_lifetime_is_not_a_secret() -> None:
    text = "tokenLifetimeSeconds: 3600\ntoken_refresh: true\ntokenTtl: 15m\n"
    assert scan_text("config.yaml", text, 200, 4.5) == []
