"""Two controllers (controller.replicas: 2) and state archives (controller.backup): what is rendered and
what is refused. The tier runs them (testing/e2e, scenarios 16-18)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from slonk_infra import vocab
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.kube import controller, state_backup
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.plan import naming
from slonk_infra.policy.slurmconf import lines
from tests.kube_support import container, files_for, find, matches, mounts, objects, plan_for


def ha(raw: dict[str, Any]) -> None:
    """Declaration edit: a backup controller with its state on the /home filesystem, archives there too."""
    raw["controller"] = {"replicas": 2, "stateStorage": "home", "backup": {"storage": "home", "keep": 5}}


def test_two_controllers_are_named_in_slurm_conf_by_their_own_services() -> None:
    plan = plan_for("gcp", ha)
    ns = plan.namespace
    conf = files_for(plan).config["slurm.conf"]
    hosts = [line.split("=", 1)[1] for line in conf.splitlines() if line.startswith("SlurmctldHost=")]
    assert hosts == [
        f"slurmctld-0(slurmctld-0.{ns}.svc.cluster.local.)",
        # The backup's Service keeps the name of the days its pod was slurmctld-1: running workers keep
        # the slurm.conf they fetched, and its address must still lead to the backup.
        f"slurmctld-standby-0(slurmctld-1.{ns}.svc.cluster.local.)",
    ]
    # The backup takes over after controller.takeoverSeconds, not the single-controller 120 s.
    assert "SlurmctldTimeout=15" in conf.splitlines()
    objs = objects(plan)
    pods = {
        f"{name}-0": {**find(objs, "StatefulSet", name)["spec"]["template"]["metadata"]["labels"],
                      controller.POD_NAME_LABEL: f"{name}-0"}
        for name in (naming.CONTROLLER, naming.CONTROLLER_STANDBY)
    }  # fmt: skip
    assert list(pods) == [naming.controller_pod(0), naming.controller_pod(1)]
    for i, pod in enumerate(pods):
        svc = find(objs, "Service", f"slurmctld-{i}")
        # A ClusterIP Service: its name resolves with no pod behind it (Slurm 22.05 clients stop at a name
        # that does not resolve instead of trying the backup).
        assert svc["spec"]["type"] == "ClusterIP" and "clusterIP" not in svc["spec"]
        assert [p for p, lab in pods.items() if matches(svc["spec"]["selector"], lab)] == [pod]
        assert svc["spec"]["ports"][0]["port"] == vocab.SLURMCTLD_PORT
    # Workers fetch their config from either controller, primary first.
    worker = next(
        o
        for o in objs
        if o["kind"] == "StatefulSet"
        and o["metadata"]["name"] not in (naming.CONTROLLER, naming.CONTROLLER_STANDBY, "login")
    )
    env = {e["name"]: e.get("value") for e in container(worker["spec"]["template"]["spec"], "slurmd")["env"]}
    # Absolute names: no search-domain lookups before each connection (ndots:5).
    assert env["SLONK_CONTROLLER"] == (f"slurmctld-0.{ns}.svc.cluster.local.,slurmctld-1.{ns}.svc.cluster.local.")


def test_one_controller_renders_as_before() -> None:
    plan = plan_for("gcp")
    conf = files_for(plan).config["slurm.conf"].splitlines()
    assert [line for line in conf if line.startswith("SlurmctldHost=")] == [
        f"SlurmctldHost=slurmctld-0(slurmctld-0.{plan.namespace}.svc.cluster.local.)"
    ]
    assert "SlurmctldTimeout=120" in conf
    objs = objects(plan)
    # Its own ClusterIP Service, as each of two has; no backup's Service and no state archive job.
    assert [
        (o["kind"], o["metadata"]["name"])
        for o in objs
        if o["kind"] in ("Service", "CronJob") and o["metadata"]["name"].startswith("slurmctld-")
    ] == [("Service", "slurmctld-0")]
    spec = find(objs, "StatefulSet", naming.CONTROLLER)["spec"]
    # Parallel with one controller too: the field is immutable, and 1 -> 2 must not replace the StatefulSet.
    assert spec["replicas"] == 1 and spec["podManagementPolicy"] == "Parallel"
    assert "affinity" not in spec["template"]["spec"]
    assert [c["name"] for c in spec["template"]["spec"]["initContainers"]] == ["munged"]


def test_controllers_share_state_on_the_filesystem_and_never_share_a_node() -> None:
    plan = plan_for("aws", ha)
    primary, standby = controller.statefulsets(plan, files_for(plan), KubeInputs())
    assert [s["metadata"]["name"] for s in (primary, standby)] == [naming.CONTROLLER, naming.CONTROLLER_STANDBY]
    # One pod each; the same pod otherwise, but for its role.
    for sts, role in ((primary, "primary"), (standby, "standby")):
        assert sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == naming.CONTROLLER
        assert sts["spec"]["template"]["metadata"]["labels"][vocab.CONTROLLER_ROLE_LABEL] == role
    assert primary["spec"]["template"]["spec"] == standby["spec"]["template"]["spec"]
    spec = primary["spec"]
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]
    [required] = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["topologyKey"] == "kubernetes.io/hostname"
    # The two never share a node: the anti-affinity selects both pods.
    for sts in (primary, standby):
        assert matches(required["labelSelector"]["matchLabels"], sts["spec"]["template"]["metadata"]["labels"])
    [zone] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert zone["podAffinityTerm"]["topologyKey"] == "topology.kubernetes.io/zone"
    ctld = container(pod, "slurmctld")
    state = next(m for m in ctld["volumeMounts"] if m["mountPath"] == vocab.STATE_DIR)
    assert state == {"name": "shared-home", "mountPath": vocab.STATE_DIR, "subPath": f".slurm/{plan.name}/state"}
    assert "state" not in {v["name"] for v in pod["volumes"]}
    # Each pod's probes ask about its own daemon: "is UP" alone passes while the other one answers.
    for probe in ("startupProbe", "readinessProbe"):
        assert "at $(hostname) is UP" in ctld[probe]["exec"]["command"][-1]
    # Liveness is the daemon's own port: a ping also waits on the other controller.
    assert ctld["livenessProbe"]["tcpSocket"] == {"port": vocab.SLURMCTLD_PORT}
    # The init container makes the shared directories slurm's before slurmctld starts, as root with
    # three capabilities; the state it leaves to slurmctld.
    init = pod["initContainers"][0]
    assert init["name"] == "state-dirs"
    assert init["command"][1:] == ["prepare", f"/home/.slurm/{plan.name}/state", f"/home/.slurm/{plan.name}/backups"]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]}
    assert "runAsUser" not in init["securityContext"]
    assert {"name": "SLONK_BACKUPS", "value": f"/home/.slurm/{plan.name}/backups"} in ctld["env"]
    # The claim of a single controller's state stays declared: going from 1 to 2 never deletes that state.
    assert find(objects(plan), "PersistentVolumeClaim", vocab.CONTROLLER_STATE_CLAIM)


def test_two_controllers_change_no_immutable_field_of_the_primarys_statefulset() -> None:
    """Going from one controller to two, or from the earlier single StatefulSet of two replicas, updates the
    primary's StatefulSet in place (only replicas and the template change) and adds the standby's; the two
    StatefulSets never count each other's pod."""
    one, two = plan_for("aws"), plan_for("aws", ha)
    [single] = controller.statefulsets(one, files_for(one), KubeInputs())
    primary, standby = controller.statefulsets(two, files_for(two), KubeInputs())
    immutable = ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates")
    assert {k: single["spec"].get(k) for k in immutable} == {k: primary["spec"].get(k) for k in immutable}
    assert primary["spec"]["selector"]["matchLabels"] == vocab.selector(vocab.CONTROLLER_COMPONENT)
    labels = {s["metadata"]["name"]: s["spec"]["template"]["metadata"]["labels"] for s in (primary, standby)}
    assert not matches(standby["spec"]["selector"]["matchLabels"], labels[naming.CONTROLLER])
    assert matches(standby["spec"]["selector"]["matchLabels"], labels[naming.CONTROLLER_STANDBY])
    # The primary's selector also matches the standby's pod; Kubernetes' StatefulSet controller takes only
    # pods it owns or orphans named as its own replicas (<name>-<ordinal>), which the standby's is not.
    assert not naming.controller_pod(1).removeprefix(f"{naming.CONTROLLER}-").isdigit()
    # A worker group may not take the standby's name (its StatefulSet would clash).
    assert naming.CONTROLLER_STANDBY in naming.RESERVED


def test_the_backup_job_reads_the_state_read_only_and_writes_archives_as_slurm() -> None:
    plan = plan_for("gcp", ha)
    [job] = state_backup.cronjob(plan, KubeInputs(system_selector={"role": "system"}))
    assert job["spec"]["schedule"] == "*/30 * * * *" and job["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [ctr] = pod["containers"]
    assert ctr["command"][1:] == ["backup", "/state", f"/home/.slurm/{plan.name}/backups", "5"]
    assert ctr["securityContext"]["runAsUser"] == vocab.SLURM_UID
    assert ctr["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    src = next(m for m in ctr["volumeMounts"] if m["mountPath"] == "/state")
    assert src["readOnly"] is True and src["subPath"] == f".slurm/{plan.name}/state"
    assert mounts(ctr)["/home"] == "shared-home"
    assert pod["nodeSelector"] == {"role": "system"} and "affinity" not in pod
    # Its pods are not controller pods: no Service, budget or anti-affinity of the controller selects them.
    labels = job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert labels[vocab.COMPONENT] == vocab.STATE_BACKUP_COMPONENT
    assert not matches(vocab.selector(vocab.CONTROLLER_COMPONENT), labels)


def test_with_one_controller_the_backup_job_runs_beside_it_to_read_its_volume() -> None:
    def backup_only(raw: dict[str, Any]) -> None:
        raw["controller"] = {"backup": {"storage": "home", "schedule": "15 * * * *"}}

    plan = plan_for("local", backup_only)
    [job] = state_backup.cronjob(plan, KubeInputs())
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {"name": "state", "persistentVolumeClaim": {"claimName": vocab.CONTROLLER_STATE_CLAIM}} in pod["volumes"]
    [term] = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == vocab.selector(vocab.CONTROLLER_COMPONENT)
    sts = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
    init = sts["spec"]["template"]["spec"]["initContainers"][0]
    assert init["command"][2:] == [f"/home/.slurm/{plan.name}/backups"]
    assert sts["spec"]["replicas"] == 1
    assert lines(files_for(plan).config["slurm.conf"])  # still a parseable file


@pytest.mark.parametrize(
    ("controller_spec", "kubernetes", "path", "words"),
    [
        ({"replicas": 2}, {}, "controller.stateStorage", "shared filesystem"),
        ({"replicas": 2, "stateStorage": "scratch"}, {}, "controller.stateStorage", "'scratch' is not a known storage"),
        ({"backup": {"storage": "hom"}}, {}, "controller.backup.storage", "did you mean 'home'"),
        ({"replicas": 2, "stateStorage": "home"}, {"systemNodes": 1}, "kubernetes.systemNodes", "never share a node"),
        ({"replicas": 3}, {}, "controller.replicas", "less than or equal to 2"),
        ({"backup": {"storage": "home", "schedule": "every hour"}}, {}, "controller.backup.schedule", "cron"),
        ({"replicas": 2, "stateStorage": "home", "takeoverSeconds": 2}, {}, "controller.takeoverSeconds", "10"),
    ],
)
def test_bad_controller_declarations_are_refused_by_field(
    controller_spec: dict[str, Any], kubernetes: dict[str, Any], path: str, words: str
) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["controller"] = controller_spec
        raw["kubernetes"] = {**raw.get("kubernetes", {}), **kubernetes}

    with pytest.raises(DeclarationError) as err:
        plan_for("gcp", edit)
    found = [p for p in err.value.problems if p.path == path]
    assert found, [(p.path, p.message) for p in err.value.problems]
    assert words in found[0].message, found[0].message


@pytest.mark.parametrize("edit", [None, ha], ids=["one controller", "two controllers"])
def test_each_controller_is_probed_over_the_loopback(edit: Any, tmp_path: Path) -> None:
    """slurm.conf names each controller by its ClusterIP Service; the probes ask the pod's own slurmctld
    through slurmctld.sh's copy of slurm.conf, which names this pod at 127.0.0.1 and no other controller, so
    no probe depends on a pod reaching itself through its own Service, or waits on the other controller."""
    plan = plan_for("gcp", edit) if edit else plan_for("gcp")
    conf = tmp_path / "slurm.conf"
    conf.write_text(files_for(plan).config["slurm.conf"])
    script = files_for(plan).scripts["slurmctld.sh"]
    start = script.index("sed ")
    end = script.index("\n", script.index("mv -f", start))
    lines_ = script[start:end].replace('"$SLURM_CONF"', str(conf))
    lines_ = lines_.replace(vocab.SELF_CONF, str(tmp_path / "self.conf"))
    original = _ctld_hosts(conf.read_text())
    assert len(original) == plan.declaration.controller.replicas
    for host in (naming.controller_pod(i) for i in range(len(original))):
        run = subprocess.run(
            ["sh", "-euc", f"hostname() {{ echo {host}; }}\n{lines_}"], check=True, capture_output=True, text=True
        )
        got = _ctld_hosts((tmp_path / "self.conf").read_text())
        # Only this controller: a ping would otherwise also wait on the other one.
        assert got == [f"{host}(127.0.0.1)"] and run.stderr == ""
    # A pod whose hostname slurm.conf does not name says so instead of probing through its Service unseen.
    run = subprocess.run(
        ["sh", "-euc", f"hostname() {{ echo other-0; }}\n{lines_}"], check=True, capture_output=True, text=True
    )
    assert "no SlurmctldHost line names other-0" in run.stderr
    sts = controller.statefulsets(plan, files_for(plan), KubeInputs())[0]
    ctld = container(sts["spec"]["template"]["spec"], "slurmctld")
    for probe in ("startupProbe", "readinessProbe"):
        assert ctld[probe]["exec"]["command"][-1].startswith(f"SLURM_CONF={vocab.SELF_CONF} scontrol ping ")
    assert f"SLURM_CONF={vocab.SELF_CONF} " in script  # push-config.sh asks this pod too


def _ctld_hosts(conf: str) -> list[str]:
    return [line.split("=", 1)[1] for line in conf.splitlines() if line.startswith("SlurmctldHost=")]


def test_a_controller_runs_the_config_its_pod_was_made_with(tmp_path: Path) -> None:
    """kubelet rewrites a mounted ConfigMap in a running pod; slurmctld reads its files again on a takeover and
    on a reconfigure. slurmctld.sh copies the files once per pod and runs slurmctld on the copy."""
    plan = plan_for("gcp", ha)
    script = files_for(plan).scripts["slurmctld.sh"]
    assert script.rstrip().endswith('exec slurmctld -D -f "$SLURM_CONF"')
    start = script.index(f"if [ ! -f {vocab.PINNED_CONF_DIR}/slurm.conf ]")
    end = script.index("\n", script.index("export SLURM_CONF=", start))
    # A projected volume as kubelet lays it out: the files are links into a timestamped directory.
    mounted, pinned = tmp_path / "etc-slurm", tmp_path / "run" / "etc"
    data = mounted / "..2026_11_27_02_00_00.1"
    (data / "jwt").mkdir(parents=True)
    for name, text in (("slurm.conf", "ClusterName=a\n"), ("gres.conf", "g\n"), ("jwt/jwt.key", "secret")):
        (data / name).write_text(text)
    (mounted / "..data").symlink_to(data.name)
    for name in ("slurm.conf", "gres.conf", "jwt"):
        (mounted / name).symlink_to(f"..data/{name}")
    section = (
        script[start:end].replace(f"{vocab.CONF_DIR}/*", f"{mounted}/*").replace(vocab.PINNED_CONF_DIR, str(pinned))
    )

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "-euc", f'{section}\necho "$SLURM_CONF"'], check=True, capture_output=True, text=True
        )

    assert run().stdout.strip() == f"{pinned}/slurm.conf"
    assert sorted(p.name for p in pinned.iterdir()) == ["gres.conf", "slurm.conf"]  # no key, no kubelet links
    assert not (pinned / "slurm.conf").is_symlink() and (pinned / "slurm.conf").read_text() == "ClusterName=a\n"
    # The ConfigMap changes under the running pod; a container restart keeps the pod's config.
    (data / "slurm.conf").write_text("ClusterName=b\n")
    run()
    assert (pinned / "slurm.conf").read_text() == "ClusterName=a\n"
