"""A declaration rendered into the objects the harness runs, by the library's own builders.

The objects are what ``build_manifests`` returns for the validated plan and the rendered Slurm files,
with the inputs :func:`slonk_infra.kube.inputs.from_cloud` makes (the call the SlurmCluster component
makes) from the declared cloud layer's own result, run under the offline runner, and the secret values
the component would generate at deploy time (munge key, ...), supplied by the harness. Every change
the harness makes on top is a named stand-in, printed with the run, never a silent edit:

* ``image.slurmVersion`` is set to the Slurm the test image carries (the renderer is version-aware);
* where a declared node is larger than this machine (GPU-shaped pools), slurm.conf gets
  ``SlurmdParameters=config_overrides`` so slurmctld keeps the declared hardware rather than draining a
  2-core container that registers as a 208-core VM;
* GPUs and TPUs: what the declared cloud's node and device plugins add to a worker container
  (:mod:`testing.e2e.nodes`), the GPUs answering through the NVML stand-in (:mod:`testing.nvml`).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slonk_infra import vocab
from slonk_infra.binding import CloudResult, VolumeSource
from slonk_infra.clouds import build_plan, deploy_cloud
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.inputs import ClusterKeys, KubeInputs, from_cloud
from slonk_infra.kube.manifests import build_manifests
from slonk_infra.offline.runner import run_offline
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import SlurmFiles, render_slurm_files
from testing.e2e.kube import Obj, Objects
from testing.e2e.nodes import PROFILES

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LOGIN_HOST_ALIAS = "login"  # the name the researchers' known_hosts gives the login Service's host key
RESEARCHERS: list[dict[str, Any]] = [
    {"name": "alice", "uid": 2001, "gid": 2001},
    {"name": "bob", "uid": 2002, "gid": 2000, "group": "research", "sudo": True},
]
DECLARATIONS = {
    "local": REPO / "stacks" / "Pulumi.local.yaml",
    "gpu-shaped": HERE / "Pulumi.gpu-shaped.yaml",
    "gpu-eks": HERE / "Pulumi.gpu-eks.yaml",
    "tpu-gke": HERE / "Pulumi.tpu-gke.yaml",
    "accounting": HERE / "Pulumi.accounting.yaml",
}


@dataclass
class ClusterSecrets:
    """Secret values the component generates at deploy time (Pulumi random and tls resources), made here
    once per run, and the researchers' SSH key pair (what a person would bring)."""

    keys_dir: Path
    """Holds id_ed25519 (the researchers' private key) and known_hosts (the login host key's public half)."""
    login_host_key: str
    user_public_key: str
    munge_key: bytes = field(default_factory=lambda: secrets.token_bytes(1024))
    jwt_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    database_password: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """The in-cluster accounting database's password (the component's random.RandomPassword)."""

    @classmethod
    def make(cls, keys_dir: Path, ssh_keygen: Callable[[list[str]], None]) -> ClusterSecrets:
        """New secrets; SSH keys from ``ssh_keygen`` (a function running ssh-keygen with these arguments
        where ``keys_dir`` is /keys: the test image's, so this machine needs no OpenSSH)."""
        keys_dir.mkdir(parents=True, exist_ok=True)
        ssh_keygen(["-q", "-t", "ed25519", "-N", "", "-C", "researcher@e2e", "-f", "/keys/id_ed25519"])
        ssh_keygen(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", "/keys/login_host_key"])
        host_pub = (keys_dir / "login_host_key.pub").read_text().split()[:2]
        (keys_dir / "known_hosts").write_text(f"{LOGIN_HOST_ALIAS} {' '.join(host_pub)}\n")
        return cls(
            keys_dir=keys_dir,
            login_host_key=(keys_dir / "login_host_key").read_text(),
            user_public_key=(keys_dir / "id_ed25519.pub").read_text().strip(),
        )

    def keys(self) -> ClusterKeys:
        """These values in the form the SlurmCluster component hands over its generated ones."""
        return ClusterKeys(
            munge_key_b64=base64.b64encode(self.munge_key).decode(),
            login_host_key_b64=base64.b64encode(self.login_host_key.encode()).decode(),
            jwt_key_b64=base64.b64encode(self.jwt_key).decode(),
            database_password=self.database_password,
        )

    def kube_inputs(self, plan: ClusterPlan) -> KubeInputs:
        """The inputs SlurmCluster hands build_manifests: its own function, on the declared cloud layer's
        result (see :func:`cloud_result`) and these values."""
        return from_cloud(cloud_result(plan), self.keys())


def cloud_result(plan: ClusterPlan) -> CloudResult:
    """What the plan's cloud layer hands the Slurm layer, from the layer itself run under the offline
    runner (nothing is created), with its volume sources resolved to the fake clouds' answers.

    Pods here do not mount the sources (a shared claim is one directory for every pod), but the objects
    carry exactly what a deployed stack's would, down to the node selectors podman ignores.
    """
    run = run_offline(
        lambda: deploy_cloud(plan).result,
        lambda result: {name: dict(vol.pv_source) for name, vol in result.volumes.items()},
    )
    resolved: dict[str, dict[str, Any]] = run.resolved
    volumes = {name: VolumeSource(name, source) for name, source in resolved.items()}
    return dataclasses.replace(run.value, provider=None, volumes=volumes, node_pools={}, node_pool_names={})


@dataclass
class Rendered:
    """One render of a declaration: plan, Slurm files, objects, and the stand-ins applied."""

    name: str
    raw: dict[str, Any]
    plan: ClusterPlan
    files: SlurmFiles
    objects: Objects
    standins: list[str]

    def statefulsets(self) -> list[Obj]:
        """Worker, controller and login StatefulSets (the in-cluster NFS server is not run: see docs)."""
        return [s for s in self.objects.of_kind("StatefulSet") if not _is_nfs_server(s)]

    def deployments(self) -> list[Obj]:
        """The Deployments the harness runs: slurmrestd. The operations controller is not run (it needs a
        Kubernetes API server; benchmarks/sync.py and its tests drive it against real slurmrestd)."""
        return [d for d in self.objects.of_kind("Deployment") if _component(d) in RUNNABLE_DEPLOYMENTS]


RUNNABLE_DEPLOYMENTS = {vocab.RESTAPI_COMPONENT, vocab.SLURMDBD_COMPONENT}


def _component(workload: Obj) -> str:
    return str(workload["spec"]["template"]["metadata"].get("labels", {}).get(vocab.COMPONENT, ""))


def _is_nfs_server(sts: Obj) -> bool:
    return _component(sts) == vocab.NFS_COMPONENT


def _machine() -> tuple[int, int]:
    """CPUs and memory (MiB) of this machine."""
    with open("/proc/meminfo", encoding="utf-8") as f:
        kib = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
    return os.cpu_count() or 1, kib // 1024


# Lines appended to every render's slurm.conf (``\n`` between them), for a diagnostic run of the tier:
# "SlurmctldDebug=debug\nDebugFlags=Agent,Route" to trace slurmctld's slow exits (docs/containers.md,
# "The remaining slow exit").
CONF_EXTRA_ENV = "SLONK_E2E_SLURM_CONF_EXTRA"


def _diagnostic_conf(objects: Objects) -> list[str]:
    """Append :data:`CONF_EXTRA_ENV`'s lines to slurm.conf, where set; the stand-in said."""
    extra = os.environ.get(CONF_EXTRA_ENV, "").replace("\\n", "\n").strip()
    if not extra:
        return []
    _set_conf(objects, vocab.CONFIG_MAP, "slurm.conf", lambda t: f"{t}{extra}\n")
    return [f"slurm.conf + {extra!r} ({CONF_EXTRA_ENV}: a diagnostic run)"]


def _set_conf(objects: Objects, cm: str, key: str, edit: Callable[[str], str]) -> None:
    data = objects.get("ConfigMap", cm)["data"]
    data[key] = edit(data[key])


def render(
    name: str,
    slurm_version: str,
    cluster_secrets: ClusterSecrets,
    mutate: Callable[[dict[str, Any]], None] | None = None,
) -> Rendered:
    """Render declaration ``name`` (see :data:`DECLARATIONS`) for an image carrying ``slurm_version``."""
    return render_raw(name, load_declaration(str(DECLARATIONS[name])), slurm_version, cluster_secrets, mutate)


def rerender(rendered: Rendered, cluster_secrets: ClusterSecrets, mutate: Callable[[dict[str, Any]], None]) -> Rendered:
    """A new render of a running stack's current declaration, changed by ``mutate`` (what an edit of the
    stack file followed by ``pulumi up`` would apply)."""
    return render_raw(rendered.name, rendered.raw, rendered.raw["image"]["slurmVersion"], cluster_secrets, mutate)


def _older_topology(raw: dict[str, Any], slurm_version: str) -> list[str]:
    """topology.yaml came with 25.05: an older image gets the tree plugin (22.05 has it); the stand-in said."""
    slurm = raw.get("slurm") or {}
    if slurm.get("topology") != "yaml" or tuple(map(int, slurm_version.split("."))) >= (25, 5):
        return []
    raw["slurm"] = {**slurm, "topology": "tree"}
    return [f"slurm.topology yaml -> tree (Slurm {slurm_version} has no topology.yaml)"]


def render_raw(
    name: str,
    declaration: dict[str, Any],
    slurm_version: str,
    cluster_secrets: ClusterSecrets,
    mutate: Callable[[dict[str, Any]], None] | None = None,
) -> Rendered:
    """Render a raw declaration (see :func:`render`)."""
    raw = copy.deepcopy(declaration)
    standins: list[str] = []
    declared = raw["image"]["slurmVersion"]
    raw["image"] = {**raw["image"], "slurmVersion": slurm_version}
    if declared != slurm_version:
        standins.append(f"image.slurmVersion {declared} -> {slurm_version} (the Slurm the test image carries)")
    standins += _older_topology(raw, slurm_version)
    if not raw.get("users"):
        raw["users"] = copy.deepcopy(RESEARCHERS)
        standins.append(
            "users alice (uid 2001) and bob (uid 2002, group research, sudo) added: the stack declares none"
        )
    added = False
    for user in raw["users"]:
        keys = user.setdefault("sshAuthorizedKeys", [])
        if cluster_secrets.user_public_key not in keys:
            keys.append(cluster_secrets.user_public_key)
            added = True
    if added:
        standins.append("an SSH key made for this run added to every declared user's keys")
    if mutate:
        mutate(raw)
    plan = build_plan(raw)
    files = render_slurm_files(plan)
    objects = Objects(build_manifests(plan, files, cluster_secrets.kube_inputs(plan)))
    standins += _diagnostic_conf(objects)
    cpus, mem = _machine()
    big = [g.name for g in plan.groups if g.shape.cpus > cpus or g.shape.real_memory_mib > mem]
    if big:
        _set_conf(objects, vocab.CONFIG_MAP, "slurm.conf", lambda t: t + "SlurmdParameters=config_overrides\n")
        standins.append(
            f"slurm.conf + SlurmdParameters=config_overrides: {', '.join(big)} declare more CPUs/memory "
            f"than this {cpus}-CPU machine"
        )
    profile = PROFILES[plan.declaration.cloud]
    for kind, side in (("gpu", profile.gpu), ("tpu", profile.tpu)):
        groups = [g.name for g in plan.groups if g.kind == kind]
        if groups and side is not None:
            standins.append(f"{', '.join(groups)}: on the {side.name} profile (testing/e2e/nodes.py)")
    if any(g.kind == "gpu" for g in plan.groups):
        standins.append(
            "GPUs: character devices (major 195, never opened) and an NVML library answering like an idle "
            "H100 per GPU (testing/nvml), where the node profile puts the driver"
        )
    skipped = [
        d["metadata"]["name"] for d in objects.of_kind("Deployment") if _component(d) not in RUNNABLE_DEPLOYMENTS
    ]
    if skipped:
        standins.append(f"Deployment {', '.join(skipped)} not run: it needs a Kubernetes API server")
    return Rendered(name, raw, plan, files, objects, standins)
