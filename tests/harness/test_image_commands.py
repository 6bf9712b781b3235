"""The container tier's image check: which commands the rendered containers of the cluster's image name."""

from __future__ import annotations

from testing.e2e.commands import image_commands, shipped_stack_commands
from tests.kube_support import objects, plan_for


def test_commands_of_the_cluster_image_without_mounted_scripts_or_other_images() -> None:
    plan = plan_for("gcp")
    found = image_commands(objects(plan), plan.declaration.image.reference)
    # slurmrestd runs under catatonit; the operations controller is a console script; the entrypoints
    # (/opt/slonk/scripts/*.sh) come from a ConfigMap and the TCPXO daemon from another image. With its own
    # slurmdbd (accounting kind cloud): slurmdbd, the shell of the init that assembles its config, and the
    # pods' venv Python running the accounting reconciler.
    assert set(found) == {"catatonit", "slurmrestd", "slonk-ops", "slurmdbd", "sh", "/opt/slonk/venv/bin/python3"}, (
        found
    )
    assert found["slonk-ops"] == "Deployment/slonk-ops slonk-ops"


def test_every_shipped_stack_is_looked_at() -> None:
    assert "slonk-ops" in shipped_stack_commands()
