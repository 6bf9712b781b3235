"""AWS adapter: EKS, one worker-group component per group (node group, launch template with EFA,
placement group), shared storage components (EFS, FSx for Lustre)."""

from __future__ import annotations

from slonk_infra.clouds.aws.infrastructure import (
    EFA_PLUGIN_CHART,
    NVIDIA_PLUGIN_CHART,
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
    launch_template_violations,
)

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
    "launch_template_violations",
]
