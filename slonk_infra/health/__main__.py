"""``python -m slonk_infra.health``: the same as the ``slonk-health`` command."""

from slonk_infra.health.cli import main

main()
