"""GCP adapter: GKE, one worker-group component per group (a node pool; a workload policy for tpu7x
slices), one shared-storage component per Filestore volume."""

from __future__ import annotations

from slonk_infra.clouds.gcp.infrastructure import TOKEN, TOPOLOGY_LABELS, GcpInfrastructure
from slonk_infra.clouds.gcp.storage import (
    FILESTORE_DEFAULT_TIER,
    GcpSharedStorage,
    GcpSharedStorageArgs,
    filestore_location,
    filestore_share,
)
from slonk_infra.clouds.gcp.worker_group import GcpWorkerGroup, GcpWorkerGroupArgs

__all__ = [
    "FILESTORE_DEFAULT_TIER",
    "TOKEN",
    "TOPOLOGY_LABELS",
    "GcpInfrastructure",
    "GcpSharedStorage",
    "GcpSharedStorageArgs",
    "GcpWorkerGroup",
    "GcpWorkerGroupArgs",
    "filestore_location",
    "filestore_share",
]
