"""Instance-store NVMe of EKS GPU nodes: the AL2023 ``nodeadm`` user data that makes it the node's ephemeral storage.

Without it the p5's eight NVMe drives sit unused while images, container layers, ``/tmp`` and pod logs fill
the EBS root volume. ``nodeadm``'s ``spec.instance.localStorage.strategy: RAID0`` stripes every instance-store
NVMe drive into one XFS array at ``/mnt/k8s-disks/0`` and bind-mounts ``/var/lib/kubelet``,
``/var/lib/containerd`` and ``/var/log/pods`` onto it, so the kubelet reports the array as ephemeral storage
(awslabs/amazon-eks-ami ``nodeadm/doc/api.md`` LocalStorageOptions, and
``templates/shared/runtime/bin/setup-local-disks`` ``maybe_raid0``, which also accepts a single drive and
does nothing where there is none).

A managed node group merges the ``NodeConfig`` parts of its launch template's user data with its own, which
must therefore be a MIME multi-part document (EKS user guide, "Customize managed nodes with launch
templates", Amazon EC2 user data / Amazon Linux 2023; ``nodeadm/doc/examples.md``, merging of configuration
objects). EKS merges user data only when the template names no AMI, which is the case here.
"""

from __future__ import annotations

import base64

# Total instance-store NVMe per instance type, in GB, for the catalog's AWS GPU machines; CPU machines
# (m7i, c7i, r7i) have none and get no launch template anyway. Source: aws/karpenter-provider-aws
# website/content/en/docs/reference/instance-types.md (commit 1d927085d, 2026-08-21), label
# karpenter.k8s.aws/instance-local-nvme, generated from EC2 DescribeInstanceTypes (InstanceStorageInfo).
# The catalog (slonk_infra/data/machines.yaml) has no such field yet; a type missing here gets no RAID0.
INSTANCE_STORE_GB: dict[str, int] = {
    "p4d.24xlarge": 8000,
    "p4de.24xlarge": 8000,
    "p5.48xlarge": 30400,
    "p5e.48xlarge": 30400,
    "p5en.48xlarge": 30400,
    "p6-b200.48xlarge": 30400,
    "g6.xlarge": 250,
    "g6.12xlarge": 3760,
    "g6.48xlarge": 7520,
    "g6e.xlarge": 250,
    "g6e.12xlarge": 3800,
    "g6e.48xlarge": 7600,
}
STRATEGY = "RAID0"
BOUNDARY = "SLONK-NODEADM"


def has_instance_store(instance_type: str) -> bool:
    """Whether the instance type has instance-store NVMe (as far as :data:`INSTANCE_STORE_GB` knows)."""
    return INSTANCE_STORE_GB.get(instance_type, 0) > 0


def node_config() -> str:
    """The ``NodeConfig`` that puts the kubelet's and containerd's state on a RAID0 of the instance store."""
    return (
        "---\n"
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "spec:\n"
        "  instance:\n"
        "    localStorage:\n"
        f"      strategy: {STRATEGY}\n"
    )


def user_data(instance_type: str) -> str | None:
    """The launch template's base64 user data for a GPU node of ``instance_type``: a MIME multi-part document
    holding :func:`node_config`, or None where the type has no instance store."""
    if not has_instance_store(instance_type):
        return None
    document = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n'
        "\n"
        f"--{BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n"
        "\n"
        f"{node_config()}"
        "\n"
        f"--{BOUNDARY}--\n"
    )
    return base64.b64encode(document.encode()).decode()
