"""Entry point for ``pulumi up`` / ``pulumi preview`` (Pulumi.yaml: main)."""

from slonk_infra.program import main

main()
