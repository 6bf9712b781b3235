"""What a cloud's node gives a worker container besides the rendered pod spec: the node profiles.

Kubernetes runs the pod the manifests describe, but the node adds to it: the GPU device plugin mounts
the driver's libraries and binaries and sets variables, the TPU device plugin hands over devices and
the slice's whole environment, a fabric's device plugin its NICs, and the StatefulSet controller labels
each pod with its ordinal. A generic Linux container shows none of this, and that is where a first
deploy breaks (a health check that cannot load NVML under slurmd's bare environment; a TPU job that
never sees the slice's variables). Each profile here is one cloud's node as its documentation and its
device plugins' sources describe it; docs/containers.md lists every fact with its source and what
the tier still cannot show.

The GPU itself is :mod:`testing.nvml`'s ``libnvidia-ml.so.1`` stand-in, answering from a per-pod
profile file (planted faults included) at the fixed path it reads when no variable names another,
which is the case under slurmd.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import testing.nvml as nvml

NVIDIA_MAJOR = 195  # the character-device major of /dev/nvidia*; Slurm's gres.conf File= only stats these
ACCEL_MAJOR = 121  # a stand-in major for TPU chips (/dev/accelN, /dev/vfio/N); nothing in the pod opens them
UVERBS_MAJOR = 231  # the infiniband_verbs major: /dev/infiniband/uverbsN, EFA's devices
# The stand-in reads its profile here when no variable names another (slurmd's programs have none); a
# directory of its own, mounted whole, so a profile replaced atomically on this machine is seen in the pod.
STANDIN_PROFILE_DIR = str(nvml.DEFAULT_PROFILE_PATH.parent)
# A CUDA image's own ENV (nvidia/cuda base images): the driver's directories the device plugin fills.
CUDA_IMAGE_ENV = {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"}
NVIDIA_SMI = """#!/bin/sh
# Stand-in for the driver's nvidia-smi: lists the GPUs the device plugin gave this container.
n=0
for d in /dev/nvidia[0-9]*; do
  [ -e "$d" ] || continue
  echo "GPU $n: NVIDIA stand-in (UUID: GPU-00000000-0000-0000-0000-00000000000$n)"
  n=$((n + 1))
done
"""


@dataclass(frozen=True)
class GpuProfile:
    """Where a cloud's GPU node puts the driver in a container that asks for ``nvidia.com/gpu``."""

    name: str
    library_dir: str
    """Where ``libnvidia-ml.so.1`` appears in the container."""
    bin_dir: str
    """Where ``nvidia-smi`` appears."""
    env: Mapping[str, str]
    """Variables the container gets from the node's device plugin and the CUDA image."""
    in_linker_cache: bool
    """Whether the library directory is in the image's linker cache (or the loader's own directories)."""


GKE_GPU = GpuProfile(
    name="GKE GPU node (COS, GKE-managed driver, GKE's NVIDIA device plugin)",
    library_dir="/usr/local/nvidia/lib64",
    bin_dir="/usr/local/nvidia/bin",
    env=CUDA_IMAGE_ENV,
    in_linker_cache=False,
)
EKS_GPU = GpuProfile(
    name="EKS GPU node (AL2023 NVIDIA AMI, NVIDIA container toolkit, NVIDIA device plugin)",
    # The toolkit mounts the driver's libraries into the image's own library directory and runs ldconfig;
    # on a Debian/Ubuntu image that directory is also one the loader searches by itself.
    library_dir="/usr/lib/x86_64-linux-gnu",
    bin_dir="/usr/bin",
    env=CUDA_IMAGE_ENV,
    in_linker_cache=True,
)


@dataclass(frozen=True)
class TpuProfile:
    """What GKE's TPU device plugin gives a container that asks for ``google.com/tpu``."""

    name: str = "GKE TPU node (GKE's TPU device plugin)"

    @staticmethod
    def env(generation: str, topology: str, chips_per_host: int) -> dict[str, str]:
        """The slice's variables, as the device plugin sets them on every host of the slice."""
        dims = [int(d) for d in topology.split("x")]
        per_host = _chips_per_host_bounds(dims, chips_per_host)
        hosts = [d // p for d, p in zip(dims, per_host, strict=True)]
        chips = 1
        for d in dims:
            chips *= d
        # v4 and v5p name a slice by TensorCores (two per chip); v5e, v6e and later by chips.
        cores = chips * 2 if generation in ("v4", "v5p") else chips
        wrap = ",".join(["false"] * 3)
        host_bounds = ",".join(str(h) for h in [*hosts, 1, 1][:3])
        chip_bounds = ",".join(str(p) for p in [*per_host, 1, 1][:3])
        return {
            "TPU_SKIP_MDS_QUERY": "true",
            "TPU_RUNTIME_METRICS_PORTS": ",".join(str(8431 + i) for i in range(chips_per_host)),
            "TPU_TOPOLOGY": topology,
            "TPU_ACCELERATOR_TYPE": f"{generation}-{cores}",
            "VBAR_CONTROL_SERVICE_URL": "unix:///var/run/tpu-plugin/vbar.sock",
            "TPU_TOPOLOGY_WRAP": wrap,
            "WRAP": wrap,
            "TPU_TOPOLOGY_ALT": "false",
            "ALT": "false",
            "TPU_HOST_BOUNDS": host_bounds,
            "HOST_BOUNDS": host_bounds,
            "TPU_CHIPS_PER_HOST_BOUNDS": chip_bounds,
            "CHIPS_PER_HOST_BOUNDS": chip_bounds,
        }

    @staticmethod
    def devices(generation: str, chips: int) -> list[str]:
        """The chips' device files: /dev/accelN on v4, IOMMU groups under /dev/vfio from v5 on."""
        if generation == "v4":
            return [f"/dev/accel{i}" for i in range(chips)]
        return [f"/dev/vfio/{i}" for i in range(chips)] + ["/dev/vfio/vfio"]


def _chips_per_host_bounds(dims: Sequence[int], chips_per_host: int) -> list[int]:
    """A host's chips as a box: 4 chips on a 3-D slice are 2x2x1, on a 2-D one 2x2."""
    box = {4: [2, 2], 8: [2, 4]}.get(chips_per_host, [chips_per_host])
    return [*box, *[1] * len(dims)][: len(dims)]


@dataclass(frozen=True)
class NodeProfile:
    """One cloud's worker node: its GPU side, TPU side and fabric devices."""

    name: str
    gpu: GpuProfile | None = None
    tpu: TpuProfile | None = None
    efa: bool = False
    """EFA's device plugin gives ``vpc.amazonaws.com/efa`` containers one uverbs device per interface."""


PROFILES: dict[str, NodeProfile] = {
    "gcp": NodeProfile("GKE", gpu=GKE_GPU, tpu=TpuProfile()),
    "aws": NodeProfile("EKS", gpu=EKS_GPU, efa=True),
    "local": NodeProfile("local (kind, k3d...: no accelerators)"),
}


@dataclass
class GpuNode:
    """The GPU side of one worker pod: its stand-in's profile file, planted faults included."""

    profile_path: Path
    gpus: int
    faults: dict[int, list[str]] = field(default_factory=dict)
    missing: int = 0

    def write(self) -> None:
        """(Re)write the profile in place: the container sees it at its next NVML initialisation."""
        nvml.write_profile(self.profile_path, gpus=self.gpus, faults=self.faults, missing=self.missing)


def nvml_profile_name() -> str:
    """The profile's file name in its directory (the stand-in's fixed path's last part)."""
    return nvml.DEFAULT_PROFILE_PATH.name


def char_device(path: Path, major: int, minor: int) -> Path:
    """A character device file (never opened by anything in the pod)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return path


def gpu_mounts(
    profile: GpuProfile, library: Path, node: GpuNode, workdir: Path, declared: frozenset[str] = frozenset()
) -> list[str]:
    """podman arguments giving a container ``node.gpus`` GPUs the way ``profile``'s node does; ``declared``:
    the variables the pod spec sets, which replace an image's own (the profile's are the CUDA image's)."""
    args: list[str] = []
    for i in range(node.gpus):
        args += ["--volume", f"{char_device(workdir / f'nvidia{i}', NVIDIA_MAJOR, i)}:/dev/nvidia{i}"]
    args += ["--volume", f"{char_device(workdir / 'nvidiactl', NVIDIA_MAJOR, 255)}:/dev/nvidiactl"]
    smi = workdir / "nvidia-smi"
    smi.write_text(NVIDIA_SMI, encoding="utf-8")
    os.chmod(smi, 0o755)
    node.write()
    args += ["--volume", f"{library}:{profile.library_dir}/libnvidia-ml.so.1:ro"]
    args += ["--volume", f"{smi}:{profile.bin_dir}/nvidia-smi:ro"]
    args += ["--volume", f"{node.profile_path.parent}:{STANDIN_PROFILE_DIR}:ro"]
    for key, value in profile.env.items():
        if key not in declared:
            args += ["--env", f"{key}={value}"]
    return args


def tpu_mounts(profile: TpuProfile, generation: str, env: Mapping[str, str], chips: int, workdir: Path) -> list[str]:
    """podman arguments giving a container a TPU host's chips, the libtpu log directory and the device
    plugin's variables."""
    args: list[str] = []
    for i, dev in enumerate(profile.devices(generation, chips)):
        args += ["--volume", f"{char_device(workdir / f'tpu{i}', ACCEL_MAJOR, i)}:{dev}"]
    logs = workdir / "tpu_logs"
    logs.mkdir(parents=True, exist_ok=True)
    os.chmod(logs, 0o777)  # the plugin empties it and makes it world-writable at every allocation
    args += ["--volume", f"{logs}:/tmp/tpu_logs"]
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]
    return args


def efa_mounts(interfaces: int, workdir: Path) -> list[str]:
    """podman arguments giving a container EFA's uverbs devices, as the EFA device plugin does."""
    args: list[str] = []
    for i in range(interfaces):
        args += ["--volume", f"{char_device(workdir / f'uverbs{i}', UVERBS_MAJOR, 192 + i)}:/dev/infiniband/uverbs{i}"]
    return args


__all__ = [
    "EKS_GPU",
    "GKE_GPU",
    "PROFILES",
    "GpuNode",
    "GpuProfile",
    "NodeProfile",
    "TpuProfile",
    "efa_mounts",
    "gpu_mounts",
    "tpu_mounts",
]
