"""Entry point of the slonk-infra policy pack (the CLI runs it via ``python -m pulumi.policy``).

Only assembles the pack: constructing ``PolicyPack`` starts the analyzer's gRPC server, prints its port
and blocks, so the policies themselves live in ``slonk_infra.policy`` where tests can import them.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The pack, its configuration and its policies are one versioned unit: load slonk_infra from the checkout
# this pack sits in, not from whichever slonk-infra version the interpreter has installed.
if (HERE.parent / "slonk_infra" / "policy" / "__init__.py").exists():
    sys.path.insert(0, str(HERE.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from slonk_infra.policy import ALL_POLICIES, PACK_NAME  # noqa: E402
from slonk_infra.policy.config import initial_config, read_raw  # noqa: E402

PolicyPack(
    name=PACK_NAME,
    policies=ALL_POLICIES,
    enforcement_level=EnforcementLevel.MANDATORY,
    # The shared file is also the pack's built-in configuration, so a preview that forgets
    # --policy-pack-config still checks every stack against the same image.
    initial_config=initial_config(read_raw(HERE / "policy-config.json")),
    description="Slurm on Kubernetes guard rails for slonk-infra stacks (local, gcp, aws).",
)
