"""The slonk-infra policy pack: policies (importable, no gRPC server) and the offline runner.

``policies/__main__.py`` builds the ``PolicyPack`` for ``pulumi preview --policy-pack policies``;
``slonk-infra check STACK`` runs the same policies on the program's offline registrations.
"""

from slonk_infra.policy.config import PolicyConfig, PolicyConfigError, load_policy_config
from slonk_infra.policy.policies import ALL_POLICIES, PACK_NAME

__all__ = ["ALL_POLICIES", "PACK_NAME", "PolicyConfig", "PolicyConfigError", "load_policy_config"]
