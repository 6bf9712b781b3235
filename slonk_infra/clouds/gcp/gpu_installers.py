"""The host side of GKE GPUDirect: the DaemonSets that put the NCCL plugin and devices on GPU nodes.

GKE's GPUDirect guides have the operator apply these by hand; here they are part of the cluster.
A worker pod on an A3 Mega node needs the FasTrak NCCL plugin under ``/home/kubernetes/bin/nvidia/lib64``
and the aperture devices under ``/dev/aperture_devices`` (``nccl-tcpxo-installer``), and its
receive-datapath sidecar gets its GPUs only from the NRI device injector; an A3 Ultra, A4 or A4X pod
loads the gIB plugin from ``/home/kubernetes/bin/gib`` (``nccl-rdma-installer``). Which DaemonSets,
their images and the machines they select are catalog data (``fabrics.yaml`` ``installer``); the pod
specs below are written from the upstream manifests each entry names. One DaemonSet per kind per
cluster, and only when a pool of its machines exists; it selects those machines by their
accelerator label and tolerates their pools' taints.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from slonk_infra import vocab
from slonk_infra.catalog import Catalog
from slonk_infra.catalog.fabrics import Installer, InstallerDaemonSet
from slonk_infra.plan import ClusterPlan, WorkerGroup

Obj = dict[str, Any]

NAMESPACE = "kube-system"
APP_LABEL = "k8s-app"
PART_OF = {vocab.PART_OF_LABEL: vocab.PART_OF}
ARCH_LABEL = "kubernetes.io/arch"
# The node-critical class keeps these pods ahead of workers when a node is short of room: without
# them a worker pod never becomes Ready (upstream manifests use it too).
PRIORITY_CLASS = "system-node-critical"

# Run in the host's namespaces (nsenter into PID 1): accept the receive path's TCP traffic, load the
# dma-buf import helper, and expose each FasTrak aperture PCI device (vendor:device 1ae0:0084) under
# /dev/aperture_devices/<BDF> for the worker pod. Idempotent: a re-run re-binds the same mounts.
TCPXO_HOST_PREP = r"""set -e
iptables -C INPUT -p tcp -m tcp -j ACCEPT 2>/dev/null || iptables -I INPUT -p tcp -m tcp -j ACCEPT
modprobe import-helper
mkdir -p /dev/aperture_devices
for bdf in $(lspci -nn -D | awk '/1ae0:0084/ {print $1}'); do
  target=/dev/aperture_devices/$bdf
  mkdir -p "$target"
  umount -R "$target" 2>/dev/null || true
  mount --bind "$(readlink -f /sys/bus/pci/devices/$bdf)" "$target"
done
chmod -R a+r /dev/aperture_devices
chmod a+rw /dev/aperture_devices/*/resource* 2>/dev/null || true
"""
# The installer image's entry script writes the plugin under /var/lib/tcpxo; the libraries go where
# the worker pod mounts them from (/home/kubernetes/bin/nvidia/lib64, mounted here at /usr/local).
TCPXO_INSTALL = """set -ex
chmod 755 /scripts/container_entry.sh
/scripts/container_entry.sh install --install-nccl
mkdir -p /usr/local/nvidia/lib64
cp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64
"""
GIB_HOST = "/usr/local/home/kubernetes/bin"
GIB_INSTALL = f"""set -ex
/scripts/container_entry.sh install
cp -r /var/lib/gib/lib64/. {GIB_HOST}/nvidia/lib64
cp -r /var/lib/gib/. {GIB_HOST}/gib
"""


def _host_volume(name: str, path: str, kind: str | None = None) -> Obj:
    host: Obj = {"path": path}
    if kind:
        host["type"] = kind
    return {"name": name, "hostPath": host}


def _privileged(name: str, image: str, cpu_m: int | None, mounts: list[Obj], script: str | None) -> Obj:
    container: Obj = {"name": name, "image": image, "securityContext": {"privileged": True}, "volumeMounts": mounts}
    if cpu_m is not None:
        container["resources"] = {"requests": {"cpu": f"{cpu_m}m"}}
    if script is not None:
        container["command"] = ["/bin/sh", "-c", script]
    return container


def _pause(installer: Installer) -> Obj:
    # The work is done in init containers; this keeps the pod (and so the node's readiness for
    # workers) in place without using CPU.
    return {"name": "pause", "image": installer.pause_image, "resources": {"requests": {"cpu": "1m"}}}


def _role_spec(ds: InstallerDaemonSet, installer: Installer) -> Obj:
    """Containers, volumes and host namespaces of one DaemonSet's pod, by its role."""
    if ds.role == "tcpxo-plugin":
        return {
            "hostNetwork": True,
            "hostPID": True,
            "volumes": [_host_volume("var-lib", "/var/lib"), _host_volume("kubernetes-bin", "/home/kubernetes/bin")],
            "initContainers": [
                {
                    "name": "host-prep",
                    "image": installer.host_image,
                    "securityContext": {"privileged": True},
                    "command": ["nsenter", "-at", "1", "--", "bash", "-c", TCPXO_HOST_PREP],
                },
                _privileged(
                    "nccl-tcpxo-installer",
                    ds.image,
                    ds.cpu_m,
                    [
                        {"name": "var-lib", "mountPath": "/var/lib"},
                        {"name": "kubernetes-bin", "mountPath": "/usr/local"},
                    ],
                    TCPXO_INSTALL,
                ),
            ],
            "containers": [_pause(installer)],
        }
    if ds.role == "nri-device-injector":
        return {
            "hostNetwork": True,
            "hostPID": True,
            "volumes": [_host_volume("dev", "/dev"), _host_volume("nri", "/var/run/nri")],
            "containers": [
                _privileged(
                    "device-injector",
                    ds.image,
                    ds.cpu_m,
                    [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}],
                    None,
                )
            ],
        }
    # gib-plugin
    return {
        "hostNetwork": True,
        "volumes": [
            _host_volume("nvidia-lib64", "/home/kubernetes/bin/nvidia/lib64", "DirectoryOrCreate"),
            _host_volume("gib", "/home/kubernetes/bin/gib", "DirectoryOrCreate"),
        ],
        "initContainers": [
            _privileged(
                "nccl-rdma-installer",
                ds.image,
                ds.cpu_m,
                [
                    {"name": "nvidia-lib64", "mountPath": f"{GIB_HOST}/nvidia/lib64"},
                    {"name": "gib", "mountPath": f"{GIB_HOST}/gib"},
                ],
                GIB_INSTALL,
            )
        ],
        "containers": [_pause(installer)],
    }


# Host installers must run on every machine they select whatever else taints it (the GPU taint, a declared
# taint, a node someone tainted while repairing it): without them the worker pod never becomes Ready.
# GKE's own installer and injector manifests tolerate everything the same way.
TOLERATE_ALL: list[Obj] = [{"operator": "Exists"}]
# Pulumi must not wait on these: their pods exist only once GPU nodes do, and a rollout over a large
# pool (or one NotReady node) would outlast the provider's 10-minute await and fail `pulumi up`.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def daemonset_manifest(ds: InstallerDaemonSet, installer: Installer, groups: list[WorkerGroup]) -> Obj:
    """The DaemonSet (metadata and spec) for ``ds`` selecting the machines of ``groups``."""
    labels = sorted({g.machine.label.value for g in groups if g.machine.label is not None})
    key = next(g.machine.label.key for g in groups if g.machine.label is not None)
    match = [{"key": key, "operator": "In", "values": labels}]
    if ds.arch != "amd64":
        match.append({"key": ARCH_LABEL, "operator": "In", "values": [ds.arch]})
    pod_labels = {APP_LABEL: ds.name, **PART_OF}
    spec: Obj = {
        "priorityClassName": PRIORITY_CLASS,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": match}]}
            }
        },
        "tolerations": TOLERATE_ALL,
        **_role_spec(ds, installer),
    }
    return {
        "metadata": {"name": ds.name, "namespace": NAMESPACE, "labels": pod_labels, "annotations": SKIP_AWAIT},
        "spec": {
            "selector": {"matchLabels": {APP_LABEL: ds.name}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
    }


def installer_manifests(plan: ClusterPlan, catalog: Catalog) -> list[Obj]:
    """Every installer DaemonSet the plan's GPU groups need: one per kind, only where its machines are."""
    out: list[Obj] = []
    for fabric in sorted(catalog.fabrics.values(), key=lambda f: f.name):
        if fabric.installer is None or not fabric.wired:
            continue
        for ds in fabric.installer.daemonsets:
            groups = [g for g in plan.groups if g.kind == "gpu" and g.machine.name in ds.machines]
            if groups:
                out.append(daemonset_manifest(ds, fabric.installer, groups))
    return out


def create_installers(
    prefix: str, plan: ClusterPlan, catalog: Catalog, provider: k8s.Provider, parent: pulumi.Resource
) -> list[k8s.apps.v1.DaemonSet]:
    """The installer DaemonSets, created through the cluster's Kubernetes provider."""
    return [
        k8s.apps.v1.DaemonSet(
            f"{prefix}-{manifest['metadata']['name']}",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(parent=parent, provider=provider),
        )
        for manifest in installer_manifests(plan, catalog)
    ]
