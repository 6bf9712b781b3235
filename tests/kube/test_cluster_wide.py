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


def test_each_worker_group_has_its_own_budget_of_one_pod() -> None:
    plan = plan_for("gcp")
    objs = build_manifests(plan, files_for(plan))
    pods = _pod_labels(objs)
    budgets = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    workers = [b for b in budgets if b["metadata"]["labels"][vocab.COMPONENT] == vocab.WORKER_COMPONENT]
    # One per group (pool or TPU slice), each selecting exactly that group's StatefulSet pods.
    assert len(workers) == len(plan.groups) > 2
    assert {b["spec"]["maxUnavailable"] for b in workers} == {1, 16}  # GPU/CPU pools; the v5p 4x4x4 slices
    for group, budget in zip(plan.groups, workers, strict=True):
        # A multi-host TPU slice is atomic: its budget admits the whole slice (GKE's slice operations).
        whole_slice = group.kind == "tpu" and group.replicas > 1
        assert budget["spec"] == {
            "maxUnavailable": group.replicas if whole_slice else 1,
            "selector": {"matchLabels": budget["spec"]["selector"]["matchLabels"]},
        }
        chosen = [n for n, lab in pods.items() if matches(budget["spec"]["selector"]["matchLabels"], lab)]
        assert chosen == [group.name]


def test_one_controller_has_no_budget_that_would_block_a_node_drain() -> None:
    # minAvailable: 1 over one pod forbids every eviction: an EKS node group update fails after 15 minutes.
    one = [
        o for o in cluster_wide.disruption_budgets(plan_for("gcp")) if o["metadata"]["name"] == vocab.CONTROLLER_BUDGET
    ]
    assert one == []


def test_two_controllers_keep_one_available() -> None:
    plan = plan_for("local", lambda r: r["controller"].update(replicas=2, stateStorage="home"))
    objs = build_manifests(plan, files_for(plan))
    [ctld] = [o for o in cluster_wide.disruption_budgets(plan) if o["metadata"]["name"] == vocab.CONTROLLER_BUDGET]
    assert ctld["spec"]["minAvailable"] == 1
    selected = [n for n, lab in _pod_labels(objs).items() if matches(ctld["spec"]["selector"]["matchLabels"], lab)]
    assert selected == ["slurmctld", "slurmctld-standby"]


def test_internal_policy_admits_only_the_namespaces_pods() -> None:
    deny, internal, _ = cluster_wide.network_policies(plan_for("gcp"))
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


def test_the_nodes_may_mount_an_in_cluster_nfs_server() -> None:
    # The kubelet mounts the export from the node's network, which the default deny blocks on an
    # enforcing CNI: an ingress rule admits every source on the NFS ports, for the NFS pods only.
    plan = plan_for("local")
    policies = cluster_wide.network_policies(plan)
    [nfs] = [p for p in policies if p["metadata"]["name"] == cluster_wide.NFS_POLICY]
    assert nfs["spec"]["policyTypes"] == ["Ingress"]
    [rule] = nfs["spec"]["ingress"]
    assert "from" not in rule  # every source: nodes are no pods
    assert {(p["protocol"], p["port"]) for p in rule["ports"]} == {
        (proto, port) for port in (2049, 111, 20048) for proto in ("TCP", "UDP")
    }
    objs = build_manifests(plan, files_for(plan))
    pods = _pod_labels(objs)
    selected = [n for n, lab in pods.items() if matches(nfs["spec"]["podSelector"]["matchLabels"], lab)]
    assert selected == [vocab.nfs_server(v.name) for v in plan.declaration.storage if v.kind == "nfs-server"]
    # The ports are the ones the NFS server listens on.
    server = find(objs, "StatefulSet", selected[0])
    listening = {p["containerPort"] for p in server["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert listening == {2049, 111, 20048}


def test_no_nfs_rule_without_an_in_cluster_nfs_server() -> None:
    names = [p["metadata"]["name"] for p in cluster_wide.network_policies(plan_for("gcp"))]
    assert cluster_wide.NFS_POLICY not in names and len(names) == 3
