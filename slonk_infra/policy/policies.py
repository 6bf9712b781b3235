"""The slonk-infra policy pack: what every stack (local, gcp, aws) must satisfy before it deploys.

One module per policy (``slonk_infra/policy/<policy>.py``); this module is the registry. Importable on
purpose: constructing a ``PolicyPack`` starts the analyzer's gRPC server and blocks, so only
``policies/__main__.py`` builds the pack, while tests and ``slonk-infra check`` call these policies
directly. Every message names the resource (``StatefulSet slurm/h100-a``), the container where there is
one, and the offending value; ``remediation_steps`` says how to fix it.

Resource policies see one resource's inputs and options (``protect`` included); stack policies see every
resource and are used where a rule spans objects (a worker and the Slurm config, a node pool and a
StatefulSet).
"""

from __future__ import annotations

from pulumi_policy import Policy

from slonk_infra.policy.accounting_database_protected import accounting_database_protected
from slonk_infra.policy.claims_name_a_storage_class import claims_name_a_storage_class
from slonk_infra.policy.gpu_node_pools_tainted import gpu_node_pools_tainted
from slonk_infra.policy.gpu_request_matches_gres import gpu_request_matches_gres
from slonk_infra.policy.no_floating_image_tags import no_floating_image_tags
from slonk_infra.policy.no_secrets_in_configmaps import no_secrets_in_configmaps
from slonk_infra.policy.privileged_only_where_needed import privileged_only_where_needed
from slonk_infra.policy.rbac_least_privilege import rbac_least_privilege
from slonk_infra.policy.stateful_resources_protected import stateful_resources_protected
from slonk_infra.policy.tpu_slice_shape import tpu_slice_shape
from slonk_infra.policy.uniform_cuda_image import uniform_cuda_image
from slonk_infra.policy.worker_graceful_drain import worker_graceful_drain
from slonk_infra.policy.worker_on_delete_updates import worker_on_delete_updates

PACK_NAME = "slonk-infra-policies"

ALL_POLICIES: list[Policy] = [
    uniform_cuda_image,
    gpu_request_matches_gres,
    tpu_slice_shape,
    stateful_resources_protected,
    no_secrets_in_configmaps,
    privileged_only_where_needed,
    gpu_node_pools_tainted,
    worker_on_delete_updates,
    worker_graceful_drain,
    no_floating_image_tags,
    claims_name_a_storage_class,
    rbac_least_privilege,
    accounting_database_protected,
]

__all__ = [
    "ALL_POLICIES",
    "PACK_NAME",
    "accounting_database_protected",
    "gpu_node_pools_tainted",
    "gpu_request_matches_gres",
    "no_floating_image_tags",
    "no_secrets_in_configmaps",
    "privileged_only_where_needed",
    "rbac_least_privilege",
    "stateful_resources_protected",
    "tpu_slice_shape",
    "uniform_cuda_image",
    "worker_graceful_drain",
    "worker_on_delete_updates",
]
