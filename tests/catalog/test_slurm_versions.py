"""The Slurm release switches of catalog/slurm_versions.py."""

from __future__ import annotations

from slonk_infra.catalog import slurm_versions
from slonk_infra.catalog.slurm_versions import MIN_SUPPORTED, RECONFIG_ON_RESTART, SlurmVersion


def test_no_rendered_key_is_gated_on_a_release_after_reconfig_on_restart() -> None:
    """From 25.11 a restarted slurmctld pushes its files to every slurmd (reconfig_on_restart), also to the
    older slurmd of workers not yet replaced in an upgrade. A key gated on a later release would reach a
    slurmd that may refuse it (as 22.05 refuses ForceRequeueOnFail): such a gate needs an upgrade path
    first (render for the oldest slurmd running, or leave the option off while releases are mixed)."""
    gates = {
        name: value
        for name, value in vars(slurm_versions).items()
        if isinstance(value, SlurmVersion) and value not in (MIN_SUPPORTED, RECONFIG_ON_RESTART)
    }
    assert gates, "no release switches found"
    later = {name: str(v) for name, v in gates.items() if v > RECONFIG_ON_RESTART}
    assert not later, f"keys gated after {RECONFIG_ON_RESTART}, pushed to older slurmd by reconfig_on_restart: {later}"


def test_versions_parse_and_print() -> None:
    assert SlurmVersion.parse("25.11.2") == RECONFIG_ON_RESTART
    assert str(SlurmVersion.parse("22.05")) == "22.05"
