"""The health checks' configuration: :class:`HealthSpec`, read from a small JSON/YAML file.

Slurm runs HealthCheckProgram, Prolog and Epilog with an environment of its own, not the
container's, so nothing here comes from environment variables: the Kubernetes layer renders this
file (default ``/etc/slonk/health.json``) from the declaration and the machine catalog, and flags can
override single values. The model is self-contained (it imports nothing from the declaration) so
the declaration can embed it as is. Keys are camelCase in the file, snake_case in Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from slonk_infra.health.result import Action

DEFAULT_SPEC_PATH = Path("/etc/slonk/health.json")

ThrottleReason = Literal[
    "gpuIdle",
    "applicationsClocksSetting",
    "swPowerCap",
    "hwSlowdown",
    "syncBoost",
    "swThermalSlowdown",
    "hwThermalSlowdown",
    "hwPowerBrakeSlowdown",
    "displayClockSetting",
]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class XidRule(_Model):
    """XID codes that call for one action (NVIDIA's XID catalog gives each code's meaning)."""

    codes: list[int] = Field(min_length=1, description="XID codes this rule covers.")
    action: Action = Field(description="What to do when one of them is reported.")
    meaning: str = Field(default="", description="What the codes mean, quoted in the failure reason.")


# Defaults from NVIDIA's XID catalog and its GPU memory error-management guide: errors a GPU reset
# clears mean replace-machine (a pod cannot reset a GPU; rebooting or replacing the VM does); a
# contained ECC error means restart-pod (the application's processes must go; the remap it leaves
# pending is the remapped-rows check's business); faults a user's program causes and the GPU
# survives (13, 31, 43) and informational codes mean none: reported, but no node is drained for a
# bug in a job.
DEFAULT_XID_RULES: tuple[XidRule, ...] = (
    XidRule(codes=[13, 31, 43], action="none", meaning="an application fault (engine exception, page fault)"),
    XidRule(codes=[45], action="none", meaning="preemptive cleanup after a killed application"),
    XidRule(codes=[94], action="restart-pod", meaning="contained ECC error: restart the application"),
    XidRule(codes=[48], action="replace-machine", meaning="double-bit ECC error"),
    XidRule(codes=[63, 64], action="replace-machine", meaning="row remapping recorded or failed: reset needed"),
    XidRule(codes=[74], action="replace-machine", meaning="NVLink error"),
    XidRule(codes=[79], action="replace-machine", meaning="GPU has fallen off the bus"),
    XidRule(codes=[92], action="replace-machine", meaning="high single-bit ECC error rate"),
    XidRule(codes=[95], action="replace-machine", meaning="uncontained ECC error"),
    XidRule(codes=[61, 62, 119, 120], action="replace-machine", meaning="GPU firmware (PMU/GSP) halted or timed out"),
    XidRule(codes=[140], action="replace-machine", meaning="unrecovered ECC error"),
)

DEFAULT_FATAL_THROTTLE: dict[ThrottleReason, Action] = {
    "hwSlowdown": "replace-machine",
    "hwThermalSlowdown": "replace-machine",
    "hwPowerBrakeSlowdown": "replace-machine",
    "swThermalSlowdown": "replace-machine",
}


class PcieSpec(_Model):
    """PCIe link expectations.

    An idle GPU lowers its link generation to save power, so the current generation is only compared
    with the link's maximum while the GPU is busy (NVML's clock-event reason ``gpuIdle`` clear). The
    width does not change with power state, so it is always compared.
    """

    require_max_width: bool = Field(
        default=True, description="Fail when the current link width is below the link's maximum width."
    )
    min_width: int | None = Field(
        default=None, ge=1, le=32, description="Lowest acceptable maximum link width (e.g. 16); unset: not checked."
    )
    min_generation: int | None = Field(
        default=None,
        ge=1,
        le=6,
        description="Lowest acceptable maximum link generation of GPU and slot together (e.g. 5 for H100 SXM hosts); unset: not checked.",
    )
    check_generation_when_busy: bool = Field(
        default=True, description="While the GPU is busy, fail when the current generation is below the link's maximum."
    )


class GpuHealthSpec(_Model):
    """GPU checks' thresholds. ``count`` 0 means the node has no GPUs and the GPU checks do not run."""

    count: int = Field(default=0, ge=0, le=64, description="GPUs this node must have (from the machine catalog).")
    require_ecc: bool = Field(default=True, description="Fail when ECC is disabled or unsupported.")
    max_volatile_uncorrectable_ecc: int = Field(
        default=0, ge=0, description="Uncorrectable ECC errors tolerated since the driver loaded."
    )
    max_aggregate_uncorrectable_ecc: int | None = Field(
        default=None,
        ge=0,
        description="Uncorrectable ECC errors tolerated over the GPU's lifetime; unset: not checked (row remapping repairs them, and its state is checked).",
    )
    max_volatile_correctable_ecc: int | None = Field(
        default=None, ge=0, description="Correctable ECC errors tolerated since the driver loaded; unset: not checked."
    )
    tolerate_remap_pending: bool = Field(
        default=False, description="Accept remapped rows waiting for a GPU reset (false: replace-machine)."
    )
    tolerate_remap_failure: bool = Field(
        default=False, description="Accept a failed row remapping (false: needs-person; the GPU is out of spare rows)."
    )
    xid_wait_ms: int = Field(
        default=1000,
        ge=0,
        le=30000,
        description="How long boot and interval runs listen for XID events (NVML delivers only events raised while listening).",
    )
    xid_rules: list[XidRule] = Field(
        default_factory=lambda: list(DEFAULT_XID_RULES), description="Which XID codes call for which action."
    )
    unknown_xid_action: Action = Field(default="needs-person", description="Action for an XID no rule names.")
    pcie: PcieSpec = Field(default_factory=PcieSpec, description="PCIe link expectations.")
    fatal_throttle_reasons: dict[ThrottleReason, Action] = Field(
        default_factory=lambda: dict(DEFAULT_FATAL_THROTTLE),
        description="Clock-event (throttle) reasons that fail the check, with their action.",
    )
    max_idle_processes: int = Field(default=0, ge=0, description="Compute processes tolerated on an idle GPU.")
    max_idle_memory_mib: int = Field(
        default=256,
        alias="maxIdleMemoryMiB",
        ge=0,
        description="GPU memory in use (the driver's reserve not counted) tolerated on an idle GPU; an idle H100 reads 0.",
    )
    idle_grace_seconds: float = Field(
        default=5.0, ge=0, le=60, description="How long an epilog waits for a finished job's processes to let go."
    )
    leftover_action: Action = Field(default="restart-pod", description="Action for leftover processes or memory.")

    @model_validator(mode="after")
    def _unique_xids(self) -> GpuHealthSpec:
        seen: dict[int, int] = {}
        for i, rule in enumerate(self.xid_rules):
            for code in rule.codes:
                if code in seen:
                    raise ValueError(f"XID {code} is in xidRules[{seen[code]}] and xidRules[{i}]; name each code once")
                seen[code] = i
        return self

    def xid_action(self, code: int) -> tuple[Action, str]:
        """The action for XID ``code`` and its meaning."""
        for rule in self.xid_rules:
            if code in rule.codes:
                return rule.action, rule.meaning
        return self.unknown_xid_action, "not in xidRules"


class TpuHealthSpec(_Model):
    """TPU checks. ``chipsPerHost`` 0 means the node has no TPU and the check does not run."""

    chips_per_host: int = Field(
        default=0, ge=0, le=16, description="TPU chips this slice host must see (4 on most multi-host slices)."
    )
    device_dir: str = Field(default="/dev", description="Where the TPU device nodes (accel*, vfio/*) appear.")


class DiskHealthSpec(_Model):
    """Scratch space and the shared home filesystem."""

    scratch_path: str | None = Field(default="/tmp", description="Node-local scratch; unset: not checked.")
    min_free_gib: float = Field(
        default=10.0, ge=0, alias="minFreeGiB", description="Least free space on scratch, in GiB."
    )
    min_free_percent: float = Field(default=5.0, ge=0, le=100, description="Least free space on scratch, in percent.")
    low_space_action: Action = Field(
        default="restart-pod", description="Action when scratch is short of space (a fresh pod gets a fresh emptyDir)."
    )
    home_path: str | None = Field(default="/home", description="The shared home filesystem; unset: not checked.")
    home_must_be_mount: bool = Field(
        default=True, description="Fail when home is a plain directory rather than a mounted filesystem."
    )
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="How long a filesystem may take to answer before it counts as hung."
    )


class HealthSpec(_Model):
    """Everything the node health checks need to know about a node, rendered per pool or slice."""

    gpu: GpuHealthSpec = Field(default_factory=GpuHealthSpec, description="GPU checks.")
    tpu: TpuHealthSpec = Field(default_factory=TpuHealthSpec, description="TPU checks.")
    disk: DiskHealthSpec = Field(default_factory=DiskHealthSpec, description="Scratch and home checks.")
    exclusive_nodes: bool = Field(
        default=True,
        description=(
            "Jobs get whole nodes on partitions of GPU pools alone (slurm.conf OverSubscribe=EXCLUSIVE); false: "
            "jobs may share GPU nodes. Either way prolog and epilog demand only the job's own GPUs idle."
        ),
    )
    interval_seconds: int = Field(
        default=300,
        gt=60,
        le=86400,
        description=(
            "Seconds between Slurm's runs of the health check on every node (slurm.conf HealthCheckInterval); "
            "a fault found between jobs drains the node within this time. Longer than the 60 s slurmd gives one "
            "run (Slurm 26.05 requires its HealthCheckTimeout below the interval)."
        ),
    )
    instance_id_file: str | None = Field(
        default=None, description="A file holding the cloud instance id, used for identity when NVML has no GPUs."
    )
    machine_id_file: str = Field(default="/etc/machine-id", description="The last resort for identity.")


class SpecError(ValueError):
    """A spec file that cannot be read or does not validate; the message names field, value and rule."""


def describe(error: ValidationError) -> str:
    """One line per problem: ``gpu.count: -1: Input should be greater than or equal to 0``."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"{where}: {item['input']!r}: {item['msg']}")
    return "; ".join(lines)


def load_spec(path: Path) -> HealthSpec:
    """Read a spec from a JSON or YAML file (YAML parses JSON too)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path} is not JSON or YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return HealthSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{path}: {describe(exc)}") from None
