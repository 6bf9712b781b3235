"""Storage limits in the catalog: Filestore tiers, FSx for Lustre sizes, EFS modes, block StorageClasses."""

from __future__ import annotations

import pytest

from slonk_infra.catalog import load_catalog

CATALOG = load_catalog()
STORAGE = CATALOG.storage


@pytest.mark.parametrize(
    ("tier", "gib", "ok"),
    [
        ("BASIC_HDD", 1024, True),
        ("BASIC_HDD", 1023, False),
        ("BASIC_HDD", 1025, True),
        ("BASIC_HDD", 65433, True),
        ("BASIC_HDD", 65434, False),
        ("STANDARD", 1024, True),
        ("BASIC_SSD", 2559, False),
        ("BASIC_SSD", 2560, True),
        ("PREMIUM", 2560, True),
        ("ZONAL", 1024, True),
        ("ZONAL", 1280, True),
        ("ZONAL", 1300, False),
        ("ZONAL", 9984, True),
        ("ZONAL", 10000, False),
        ("ZONAL", 10240, True),
        ("ZONAL", 12800, True),
        ("ZONAL", 11264, False),
        ("ZONAL", 102400, True),
        ("ZONAL", 104960, False),
        ("REGIONAL", 10240, True),
        ("ENTERPRISE", 10240, True),
        ("ENTERPRISE", 10496, False),
        ("HIGH_SCALE_SSD", 9984, False),
        ("HIGH_SCALE_SSD", 10240, True),
        ("zonal", 1024, True),
    ],
)
def test_filestore_tier_bands(tier: str, gib: int, ok: bool) -> None:
    spec = STORAGE.filestore.tier(tier)
    assert spec is not None
    assert spec.accepts(gib) is ok


def test_filestore_nearest_valid_size() -> None:
    zonal = STORAGE.filestore.tier("ZONAL")
    assert zonal is not None
    assert zonal.nearest(1000) == 1024
    assert zonal.nearest(1300) == 1536
    assert zonal.nearest(10000) == 10240
    assert zonal.nearest(11000) == 12800
    assert zonal.nearest(200000) is None
    assert STORAGE.filestore.tier("NOPE") is None


@pytest.mark.parametrize(
    ("deployment", "gib", "ok", "rounded"),
    [
        ("SCRATCH_1", 1200, True, 1200),
        ("SCRATCH_1", 3600, True, 3600),
        ("SCRATCH_1", 4800, False, 7200),
        ("SCRATCH_2", 4800, True, 4800),
        ("SCRATCH_2", 3600, False, 4800),
        ("PERSISTENT_2", 38400, True, 38400),
        ("PERSISTENT_2", 1000, False, 1200),
        ("PERSISTENT_1", 2401, False, 4800),
    ],
)
def test_fsx_capacities(deployment: str, gib: int, ok: bool, rounded: int) -> None:
    spec = STORAGE.fsx_lustre.deployment_types[deployment]
    assert spec.accepts(gib) is ok
    assert spec.round_up(gib) == rounded
    assert spec.accepts(spec.round_up(gib))


def test_fsx_throughputs_and_efs_modes() -> None:
    fsx = STORAGE.fsx_lustre.deployment_types
    assert fsx["PERSISTENT_2"].throughputs == (125, 250, 500, 1000)
    assert fsx["PERSISTENT_1"].throughputs == (50, 100, 200)
    assert not fsx["SCRATCH_2"].persistent
    modes = STORAGE.efs.throughput_modes
    assert set(modes) == {"elastic", "bursting", "provisioned"}
    assert modes["elastic"].needs_performance_mode == "generalPurpose"
    assert modes["provisioned"].needs_provisioned_mibps


def test_block_classes_per_cloud() -> None:
    classes = STORAGE.block_classes
    assert classes["gcp"].name == "standard-rwo" and classes["gcp"].builtin
    assert classes["aws"].provisioner == "ebs.csi.aws.com" and not classes["aws"].builtin
    assert classes["aws"].addon == "aws-ebs-csi-driver"
    assert classes["local"].name is None
    hyperdisk_only = {m.name for m in CATALOG.machines.values() if m.hyperdisk_only}
    # Exactly these: a machine added to the catalog must be looked up in GCP's disk tables, not forgotten.
    assert hyperdisk_only == {
        "a3-ultragpu-8g",
        "a4-highgpu-8g",
        "a4x-highgpu-4g",
        "ct6e-standard-4t",
        "tpu7x-standard-4t",
    }
    assert not CATALOG.machines["n2-standard-8"].hyperdisk_only


def test_platform_facts() -> None:
    gcp = CATALOG.platform.clouds["gcp"]
    assert "roles/container.defaultNodeServiceAccount" in gcp.node_service_account_roles
    aws = CATALOG.platform.clouds["aws"]
    assert aws.network_policy_addon == "vpc-cni"
    assert aws.network_policy_configuration == {"enableNetworkPolicy": "true"}
