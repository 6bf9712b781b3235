"""The container tier: the rendered Kubernetes objects of a stack, run as podman pods, and driven.

``python3 -m testing.e2e`` (what ``bash tools/e2e.sh`` runs) builds the image from ``images/`` on a
debootstrap'd Debian base, renders a declaration with the library's own builders, turns every
StatefulSet replica into a podman pod (hostname, Service DNS names, ConfigMap / Secret / claim volumes,
init containers, sidecars, preStop hooks) and runs the scenarios of docs/containers.md against it.

The names below are the harness's API for programs built on it (benchmarks/e2e.py): build the image,
render a declaration, bring its pods up as a :class:`Cluster` on its cloud's node profile, and drive it
(jobs, pod deletion, loss and recreation, GPU faults). The modules' other names are its internals.
"""

from testing.e2e.accounting_scenarios import accounting_ready, no_in_cluster_accounting
from testing.e2e.cluster import ApplyResult, Cluster, sinfo_state
from testing.e2e.controller_scenarios import (
    failover,
    no_backup_controller,
    no_state_backup,
    primary_back_seconds,
    restore_drill,
)
from testing.e2e.image import SLURM_VERSION, BuiltImage, build_image, ssh_keygen
from testing.e2e.jobs import LOGIN, job_state, read, submit, time_to_running, wait_done, wait_job
from testing.e2e.node_scenarios import no_gpus, prolog_seconds
from testing.e2e.nodes import PROFILES, GpuNode, NodeProfile
from testing.e2e.podman import Podman, PodmanError, interrupt_on_sigterm, wait_for
from testing.e2e.pods import DeleteResult, PodInstance, PodOptions
from testing.e2e.scenarios import SCENARIOS, Scenario, with_partition
from testing.e2e.stack import DECLARATIONS, ClusterSecrets, Rendered, cloud_result, render, render_raw, rerender

__all__ = [
    "DECLARATIONS",
    "LOGIN",
    "PROFILES",
    "SCENARIOS",
    "SLURM_VERSION",
    "ApplyResult",
    "BuiltImage",
    "Cluster",
    "ClusterSecrets",
    "DeleteResult",
    "GpuNode",
    "NodeProfile",
    "PodInstance",
    "PodOptions",
    "Podman",
    "PodmanError",
    "Rendered",
    "Scenario",
    "accounting_ready",
    "build_image",
    "cloud_result",
    "failover",
    "interrupt_on_sigterm",
    "job_state",
    "no_backup_controller",
    "no_gpus",
    "no_in_cluster_accounting",
    "no_state_backup",
    "primary_back_seconds",
    "prolog_seconds",
    "read",
    "render",
    "render_raw",
    "rerender",
    "restore_drill",
    "sinfo_state",
    "ssh_keygen",
    "submit",
    "time_to_running",
    "wait_done",
    "wait_for",
    "wait_job",
    "with_partition",
]
