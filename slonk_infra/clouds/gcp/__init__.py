"""GCP adapter: GKE, one worker-group component per group (a node pool; a workload policy for tpu7x
slices), one shared-storage component per Filestore volume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.lazy import lazy_getattr

if TYPE_CHECKING:
    from slonk_infra.clouds.gcp.infrastructure import TOKEN, TOPOLOGY_LABELS, GcpInfrastructure
    from slonk_infra.clouds.gcp.storage import (
        FILESTORE_DEFAULT_TIER,
        GcpSharedStorage,
        GcpSharedStorageArgs,
        filestore_location,
        filestore_share,
    )
    from slonk_infra.clouds.gcp.worker_group import GcpWorkerGroup, GcpWorkerGroupArgs

# Imported on first use, so the descriptor can be read without loading the cloud SDK.
_WHERE = {
    "FILESTORE_DEFAULT_TIER": "slonk_infra.clouds.gcp.storage",
    "TOKEN": "slonk_infra.clouds.gcp.infrastructure",
    "TOPOLOGY_LABELS": "slonk_infra.clouds.gcp.infrastructure",
    "GcpInfrastructure": "slonk_infra.clouds.gcp.infrastructure",
    "GcpSharedStorage": "slonk_infra.clouds.gcp.storage",
    "GcpSharedStorageArgs": "slonk_infra.clouds.gcp.storage",
    "GcpWorkerGroup": "slonk_infra.clouds.gcp.worker_group",
    "GcpWorkerGroupArgs": "slonk_infra.clouds.gcp.worker_group",
    "filestore_location": "slonk_infra.clouds.gcp.storage",
    "filestore_share": "slonk_infra.clouds.gcp.storage",
}

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


__getattr__ = lazy_getattr(__name__, _WHERE)
