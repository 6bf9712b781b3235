"""The slurmrestd builder: present only when asked for, unprivileged, reached through its Service."""

from __future__ import annotations

from typing import Any

import pytest

from slonk_infra import vocab
from slonk_infra.kube import restapi
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.manifests import build_manifests
from tests.kube_support import (
    container,
    files_for,
    find,
    matches,
    mounts,
    objects,
    plan_for,
    with_rest_api,
    with_slurm,
    without_rest_api,
)


def test_nothing_without_the_rest_api() -> None:
    plan = plan_for("gcp", without_rest_api)
    assert restapi.rest_api(plan, files_for(plan)) == []
    assert not [o for o in build_manifests(plan, files_for(plan)) if o["metadata"]["name"] == vocab.RESTAPI]


def test_service_reaches_the_deployment_on_the_port_slurmrestd_listens_on() -> None:
    plan = plan_for("gcp", with_rest_api)
    svc, dep = restapi.rest_api(plan, files_for(plan))
    assert (svc["kind"], dep["kind"]) == ("Service", "Deployment")
    assert matches(svc["spec"]["selector"], dep["spec"]["template"]["metadata"]["labels"])
    assert matches(dep["spec"]["selector"]["matchLabels"], dep["spec"]["template"]["metadata"]["labels"])
    rest = container(dep["spec"]["template"]["spec"], "slurmrestd")
    # PID 1 is catatonit, which hands SIGTERM on: slurmrestd itself catches only SIGINT.
    assert rest["command"] == ["catatonit", "--", "slurmrestd", f"0.0.0.0:{vocab.SLURMRESTD_PORT}"]
    # ... and it serves a few seconds more after deletion starts, while its endpoint is being removed.
    assert rest["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert svc["spec"]["ports"][0]["targetPort"] == rest["ports"][0]["containerPort"] == vocab.SLURMRESTD_PORT


def test_runs_as_its_own_user_never_root_nor_slurm_user() -> None:
    plan = plan_for("aws", with_rest_api)
    dep = restapi.deployment(plan, files_for(plan))
    ctx = container(dep["spec"]["template"]["spec"], "slurmrestd")["securityContext"]
    assert ctx["runAsUser"] == vocab.SLURMRESTD_UID and ctx["runAsNonRoot"] is True
    assert vocab.SLURMRESTD_UID not in (0, vocab.SLURM_UID)
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert dep["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_reads_slurm_conf_in_daemon_jwt_mode_without_the_signing_key() -> None:
    plan = plan_for("aws", with_rest_api)
    spec = restapi.deployment(plan, files_for(plan))["spec"]["template"]["spec"]
    rest = container(spec, "slurmrestd")
    assert {"name": "SLURM_JWT", "value": "daemon"} in rest["env"]
    assert mounts(rest) == {vocab.CONF_DIR: "slurm-config"}
    [vol] = spec["volumes"]
    assert all("secret" not in s for s in vol["projected"]["sources"])
    assert "AuthAltTypes=auth/jwt" in files_for(plan).config["slurm.conf"]


def test_a_slurm_config_change_rolls_slurmrestd_which_reads_slurm_conf_once() -> None:
    plan = plan_for("gcp", with_rest_api)
    files = files_for(plan)
    hashes = []
    for text in (files.config["slurm.conf"], files.config["slurm.conf"] + "# changed\n"):
        changed = type(files)(config={**files.config, "slurm.conf": text}, scripts=files.scripts)
        dep = restapi.deployment(plan, changed)
        hashes.append(dep["spec"]["template"]["metadata"]["annotations"][vocab.CONFIG_HASH])
    assert hashes[0] != hashes[1]


def test_on_clouds_it_runs_on_the_system_nodes_like_the_controller() -> None:
    # On a worker node it would eat into the worker's share, and its class could preempt a worker.
    plan = plan_for("gcp", with_rest_api)
    objs = objects(plan, KubeInputs(system_selector={vocab.SYSTEM_ROLE_LABEL: vocab.SYSTEM_ROLE}))
    dep = find(objs, "Deployment", vocab.RESTAPI)
    ctld = find(objs, "StatefulSet", "slurmctld")
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"slonk.dev/role": "system"}
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == ctld["spec"]["template"]["spec"]["nodeSelector"]
    # A local cluster has no system pool: nothing pins it.
    local = find(objects(plan_for("local", with_rest_api)), "Deployment", vocab.RESTAPI)
    assert "nodeSelector" not in local["spec"]["template"]["spec"]


def _restd(version: str, accounting: bool = False) -> dict[str, Any]:
    """The slurmrestd container of the GCP stack (its accounting on Cloud SQL, or none) on Slurm ``version``."""

    def edit(raw: dict[str, Any]) -> None:
        with_rest_api(raw)
        with_slurm(version)(raw)
        if not accounting:
            raw["slurm"].pop("accounting", None)

    plan = plan_for("gcp", edit)
    assert (plan.declaration.slurm.accounting is not None) == accounting
    return container(restapi.deployment(plan, files_for(plan))["spec"]["template"]["spec"], "slurmrestd")


def _restd_env(version: str, accounting: bool = False) -> dict[str, str]:
    return {e["name"]: e["value"] for e in _restd(version, accounting)["env"]}


@pytest.mark.parametrize(
    ("version", "newest"),
    [("22.05", "openapi/v0.0.38"), ("23.02", "openapi/v0.0.39"), ("23.11", "openapi/slurmctld")],
)
def test_an_older_slurmrestd_without_slurmdbd_loads_only_its_slurmctld_plugins(version: str, newest: str) -> None:
    # Before 24.05 slurmrestd loads every plugin it has, and each slurmdbd one exits without slurmdbd
    # ("slurm not configured with slurmdbd", 22.05.8 in the container tier).
    plugins = _restd_env(version)["SLURMRESTD_OPENAPI_PLUGINS"].split(",")
    assert newest in plugins
    assert not [p for p in plugins if "db" in p], plugins
    # With slurmdbd the slurmdbd plugins load and serve; nothing is limited.
    assert "SLURMRESTD_OPENAPI_PLUGINS" not in _restd_env(version, accounting=True)


@pytest.mark.parametrize("version", ["24.05", "25.05", "26.05"])
def test_from_24_05_slurmrestd_skips_the_slurmdbd_plugins_itself(version: str) -> None:
    assert "SLURMRESTD_OPENAPI_PLUGINS" not in _restd_env(version)


@pytest.mark.parametrize("version", ["22.05", "25.05", "26.05"])
def test_it_starts_under_containerds_default_seccomp_filter(version: str) -> None:
    # slurmrestd unshares at start and exits when it cannot; containerd's RuntimeDefault filter (GKE, EKS)
    # allows unshare only with CAP_SYS_ADMIN, which the container has dropped. The container tier runs it
    # under that rule (testing/e2e/seccomp.py).
    rest = _restd(version, accounting=True)
    assert rest["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert rest["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = _restd_env(version, accounting=True)["SLURMRESTD_SECURITY"].split(",")
    assert sorted(security) == ["disable_unshare_files", "disable_unshare_sysv"]
