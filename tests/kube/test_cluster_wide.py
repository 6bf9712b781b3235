"""Objects of no single role: namespace, RBAC, priorities, network policies, disruption budgets, ConfigMaps
and Secrets."""

from __future__ import annotations

from slonk_infra import vocab
from slonk_infra.kube import cluster_wide
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.manifests import build_manifests
from slonk_infra.kube.pod import Obj
from tests.kube_support import files_for, find, matches, plan_for, with_rest_api, without_rest_api


def _pod_labels(objs: list[Obj]) -> dict[str, dict[str, str]]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"]
        for o in objs
        if o["kind"] in ("StatefulSet", "Deployment")
    }


def test_namespace_enforces_privileged_and_warns_baseline() -> None:
    plan = plan_for("gcp")
    ns = cluster_wide.namespace(plan)
    assert ns["metadata"]["name"] == plan.namespace
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "baseline"


def test_service_account_has_no_token_and_the_role_only_reads() -> None:
    sa, role = cluster_wide.rbac(plan_for("local"))
    assert sa["automountServiceAccountToken"] is False and sa["metadata"]["name"] == vocab.SERVICE_ACCOUNT
    assert {v for rule in role["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}


def test_priorities_let_production_preempt_workers_and_never_the_controller() -> None:
    plan = plan_for("aws")
    value = {p["metadata"]["name"]: p for p in cluster_wide.priority_classes(plan)}
    worker = value[vocab.worker_priority(plan.namespace)]
    control = value[vocab.control_priority(plan.namespace)]
    production = value[vocab.production_priority(plan.namespace)]
    assert worker["value"] < production["value"] < control["value"]
    assert worker["preemptionPolicy"] == "Never"
    assert not any(p["globalDefault"] for p in value.values())
    # Every pod of the layer uses one of these classes.
    for o in build_manifests(plan, files_for(plan)):
        if o["kind"] in ("StatefulSet", "Deployment") and "priorityClassName" in o["spec"]["template"]["spec"]:
            assert o["spec"]["template"]["spec"]["priorityClassName"] in value


def test_disruption_budgets_select_the_controller_and_every_worker() -> None:
    plan = plan_for("gcp")
    objs = build_manifests(plan, files_for(plan))
    pods = _pod_labels(objs)
    ctld, workers = cluster_wide.disruption_budgets(plan)
    assert ctld["spec"]["minAvailable"] == 1 and workers["spec"]["maxUnavailable"] == 1
    assert [n for n, lab in pods.items() if matches(ctld["spec"]["selector"]["matchLabels"], lab)] == ["slurmctld"]
    assert {n for n, lab in pods.items() if matches(workers["spec"]["selector"]["matchLabels"], lab)} == {
        g.name for g in plan.groups
    }


def test_internal_policy_admits_only_the_namespaces_pods() -> None:
    deny, internal, _ = cluster_wide.network_policies(plan_for("local"))
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert internal["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    assert internal["spec"]["podSelector"]["matchLabels"] == {vocab.NAME_LABEL: vocab.APP}


def test_config_maps_split_topology_from_config_and_hold_the_scripts() -> None:
    plan = plan_for("gcp")
    files = files_for(plan)
    maps = cluster_wide.config_maps(plan, files, KubeInputs(topology_labels=("a/b", "c/d")))
    config, topo, scripts = (
        find(maps, "ConfigMap", n) for n in (vocab.CONFIG_MAP, vocab.TOPOLOGY_MAP, vocab.SCRIPTS_MAP)
    )
    assert set(config["data"]) == {"slurm.conf", "gres.conf", "cgroup.conf"}
    assert set(topo["data"]) == {k for k in files.config if k.startswith("topology")} and topo["data"]
    assert scripts["data"] == files.scripts
    assert topo["metadata"]["annotations"] == {vocab.TOPOLOGY_LABELS: "a/b,c/d"}
    plain = find(cluster_wide.config_maps(plan, files, KubeInputs()), "ConfigMap", vocab.TOPOLOGY_MAP)
    assert "annotations" not in plain["metadata"]


def test_keys_only_in_secrets_and_the_jwt_key_only_with_the_rest_api() -> None:
    plan = plan_for("gcp", without_rest_api)
    munge, _users, host = cluster_wide.secrets(plan, KubeInputs(munge_key_b64="S0VZ", login_host_key_b64="SE9TVA=="))
    assert munge["metadata"]["name"] == vocab.MUNGE_SECRET and munge["data"] == {vocab.MUNGE_KEY_FILE: "S0VZ"}
    assert host["metadata"]["name"] == vocab.LOGIN_HOST_KEYS_SECRET
    assert host["data"] == {vocab.LOGIN_HOST_KEY_FILE: "SE9TVA=="}
    rest = plan_for("gcp", with_rest_api)
    names_ = [s["metadata"]["name"] for s in cluster_wide.secrets(rest, KubeInputs())]
    assert names_ == [vocab.MUNGE_SECRET, vocab.USERS_SECRET, vocab.LOGIN_HOST_KEYS_SECRET, vocab.JWT_SECRET]
    for cm in cluster_wide.config_maps(rest, files_for(rest), KubeInputs(munge_key_b64="S0VZ")):
        assert "S0VZ" not in str(cm)
