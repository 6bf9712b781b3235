"""The controller builder: slurmctld's StatefulSet, headless Service and state claim."""

from __future__ import annotations

from typing import Any

from slonk_infra import vocab
from slonk_infra.kube import controller
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import config_hash
from slonk_infra.plan import naming
from tests.kube_support import (
    container,
    files_for,
    matches,
    mounts,
    plan_for,
    with_rest_api,
    with_slurm,
    without_rest_api,
)


def test_one_replica_rolled_on_config_change_with_the_config_hash() -> None:
    plan = plan_for("gcp")
    files = files_for(plan)
    sts = controller.statefulsets(plan, files, KubeInputs())[0]
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    assert sts["spec"]["template"]["metadata"]["annotations"] == {vocab.CONFIG_HASH: config_hash(files)}

    def more_nodes(raw: dict[str, Any]) -> None:
        raw["pools"][0]["maxNodes"] = raw["pools"][0]["nodes"] + 3

    bigger = plan_for("gcp", more_nodes)
    assert config_hash(files_for(bigger)) != config_hash(files)


def test_the_service_gives_the_host_slurm_conf_names() -> None:
    plan = plan_for("aws")
    svc = controller.service(plan)
    sts = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
    # The headless Service gives the StatefulSet's pods their own DNS names (serviceName).
    assert svc["metadata"]["name"] == sts["metadata"]["name"] == sts["spec"]["serviceName"] == naming.CONTROLLER
    assert svc["spec"]["clusterIP"] == "None"
    # slurm.conf names the pod's own ClusterIP Service, absolutely: an address that stays while the pod
    # is replaced, so a client retrying it reaches the new pod.
    (own,) = controller.pod_services(plan)
    assert own["spec"]["type"] == "ClusterIP" and own["metadata"]["name"] == "slurmctld-0"
    assert (
        f"SlurmctldHost={naming.CONTROLLER}-0(slurmctld-0.{plan.namespace}.svc.cluster.local.)"
        in files_for(plan).config["slurm.conf"].splitlines()
    )
    assert own["spec"]["selector"] == {**svc["spec"]["selector"], controller.POD_NAME_LABEL: "slurmctld-0"}
    assert own["spec"]["ports"] == svc["spec"]["ports"]
    assert svc["spec"]["ports"][0]["port"] == vocab.SLURMCTLD_PORT
    assert matches(svc["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])
    assert matches(sts["spec"]["selector"]["matchLabels"], sts["spec"]["template"]["metadata"]["labels"])


def test_slurmctld_runs_as_slurm_with_state_on_its_own_claim() -> None:
    plan = plan_for("local")
    sts = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
    spec = sts["spec"]["template"]["spec"]
    ctld = container(spec, "slurmctld")
    ctx = ctld["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["runAsNonRoot"]) == (vocab.SLURM_UID, vocab.SLURM_UID, True)
    assert ctx["capabilities"] == {"drop": ["ALL"]} and ctx["allowPrivilegeEscalation"] is False
    assert spec["securityContext"]["fsGroup"] == vocab.SLURM_UID
    assert mounts(ctld)[vocab.STATE_DIR] == "state"
    state = next(v for v in spec["volumes"] if v["name"] == "state")
    assert state["persistentVolumeClaim"]["claimName"] == vocab.CONTROLLER_STATE_CLAIM
    assert f"StateSaveLocation={vocab.STATE_DIR}" in files_for(plan).config["slurm.conf"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert "scontrol ping" in " ".join(ctld[probe]["exec"]["command"])
    assert ctld["command"] == [f"{vocab.SCRIPTS_DIR}/slurmctld.sh"]
    assert "slurmctld.sh" in files_for(plan).scripts


def test_state_claim_size_and_storage_class_come_from_the_declaration() -> None:
    plan = plan_for("local")
    claim = controller.state_claim(plan)
    assert claim["metadata"]["name"] == vocab.CONTROLLER_STATE_CLAIM
    assert claim["spec"]["resources"]["requests"]["storage"] == f"{plan.declaration.controller.state_gib}Gi"
    assert "storageClassName" not in claim["spec"]

    def fast(raw: dict[str, Any]) -> None:
        raw["controller"]["storageClass"] = "fast-ssd"

    assert controller.state_claim(plan_for("local", fast))["spec"]["storageClassName"] == "fast-ssd"


def test_jwt_key_projected_only_with_the_rest_api() -> None:
    plain = plan_for("gcp", without_rest_api)
    vol = next(
        v
        for v in controller.statefulsets(plain, files_for(plain), KubeInputs())[0]["spec"]["template"]["spec"][
            "volumes"
        ]
        if v["name"] == "slurm-config"
    )
    assert [next(iter(s)) for s in vol["projected"]["sources"]] == ["configMap", "configMap"]
    rest = plan_for("gcp", with_rest_api)
    vol = next(
        v
        for v in controller.statefulsets(rest, files_for(rest), KubeInputs())[0]["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "slurm-config"
    )
    [secret] = [s["secret"] for s in vol["projected"]["sources"] if "secret" in s]
    # Projected under /etc/slurm at exactly the path slurm.conf gives slurmctld.
    assert f"{vocab.CONF_DIR}/{secret['items'][0]['path']}" == vocab.JWT_KEY
    assert secret["items"][0]["mode"] == 0o440


def test_system_selector_pins_the_controller_only_when_given() -> None:
    plan = plan_for("gcp")
    free = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
    assert "nodeSelector" not in free["spec"]["template"]["spec"]
    pinned = controller.statefulsets(plan, files_for(plan), KubeInputs(system_selector={"slonk.dev/role": "system"}))[0]
    assert pinned["spec"]["template"]["spec"]["nodeSelector"] == {"slonk.dev/role": "system"}


def test_before_23_11_the_controller_pushes_the_files_to_the_workers_itself() -> None:
    def env(version: str) -> dict[str, str]:
        plan = plan_for("gcp", with_slurm(version))
        sts = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
        return {e["name"]: e["value"] for e in container(sts["spec"]["template"]["spec"], "slurmctld").get("env", [])}

    # Before 23.11 push-config.sh runs `scontrol reconfigure`; from 23.11 a reconfigure restarts slurmctld and
    # pushes to no idle node (24.11); from 25.11 SlurmctldParameters=reconfig_on_restart pushes.
    assert env("22.05").get("SLONK_PUSH_CONFIG") == env("23.02").get("SLONK_PUSH_CONFIG") == "1"
    for version in ("23.11", "25.05", "25.11", "26.05"):
        assert "SLONK_PUSH_CONFIG" not in env(version), version
