"""AWS adapter: EKS, one worker-group component per group (node group, launch template with EFA,
placement group), shared storage components (EFS, FSx for Lustre)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slonk_infra.lazy import lazy_getattr

if TYPE_CHECKING:
    from slonk_infra.clouds.aws.addons import EFA_PLUGIN_CHART, NVIDIA_PLUGIN_CHART
    from slonk_infra.clouds.aws.infrastructure import (
        TOKEN,
        TOPOLOGY_LABELS,
        AwsInfrastructure,
    )
    from slonk_infra.clouds.aws.storage import (
        FSX_DEFAULT_DEPLOYMENT,
        AwsSharedStorage,
        AwsSharedStorageArgs,
        fsx_storage_capacity,
    )
    from slonk_infra.clouds.aws.worker_group import (
        AwsWorkerGroup,
        AwsWorkerGroupArgs,
        capacity_type,
        efa_interfaces,
    )

# Imported on first use, so the descriptor can be read without loading the cloud SDK.
_WHERE = {
    "EFA_PLUGIN_CHART": "slonk_infra.clouds.aws.addons",
    "FSX_DEFAULT_DEPLOYMENT": "slonk_infra.clouds.aws.storage",
    "NVIDIA_PLUGIN_CHART": "slonk_infra.clouds.aws.addons",
    "TOKEN": "slonk_infra.clouds.aws.infrastructure",
    "TOPOLOGY_LABELS": "slonk_infra.clouds.aws.infrastructure",
    "AwsInfrastructure": "slonk_infra.clouds.aws.infrastructure",
    "AwsSharedStorage": "slonk_infra.clouds.aws.storage",
    "AwsSharedStorageArgs": "slonk_infra.clouds.aws.storage",
    "AwsWorkerGroup": "slonk_infra.clouds.aws.worker_group",
    "AwsWorkerGroupArgs": "slonk_infra.clouds.aws.worker_group",
    "capacity_type": "slonk_infra.clouds.aws.worker_group",
    "efa_interfaces": "slonk_infra.clouds.aws.worker_group",
    "fsx_storage_capacity": "slonk_infra.clouds.aws.storage",
}

__all__ = [
    "EFA_PLUGIN_CHART",
    "FSX_DEFAULT_DEPLOYMENT",
    "NVIDIA_PLUGIN_CHART",
    "TOKEN",
    "TOPOLOGY_LABELS",
    "AwsInfrastructure",
    "AwsSharedStorage",
    "AwsSharedStorageArgs",
    "AwsWorkerGroup",
    "AwsWorkerGroupArgs",
    "capacity_type",
    "efa_interfaces",
    "fsx_storage_capacity",
]


__getattr__ = lazy_getattr(__name__, _WHERE)
