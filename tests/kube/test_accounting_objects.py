"""Accounting in the namespace: slurmdbd, the reconciler and (kind in-cluster) MariaDB, as objects and as the
scripts their pods run.

The object tests read the builders' dicts. The script tests run the pods' scripts against a real mariadbd
and slurmdbd on this machine (skipped where either is missing), each in a private temp dir, on a free
loopback port, stopping only the processes they started.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from slonk_infra import vocab
from slonk_infra.accounting.desired import desired_state
from slonk_infra.accounting.wire import dump_state
from slonk_infra.binding import CloudResult
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube import accounting
from slonk_infra.kube.inputs import DatabaseConnection, KubeInputs
from slonk_infra.offline.runner import run_offline
from slonk_infra.plan import ClusterPlan
from slonk_infra.slurm import render_slurm_files
from slonk_infra.slurm_layer.slurm_cluster import SlurmCluster, stateful
from tests.kube_support import container, find, matches, objects

Obj = dict[str, Any]
PASSWORD = "Zq7_-.:+secretPW42"
CLOUD_PASSWORD = "Cl0ud_pw.+-"
CLOUD = DatabaseConnection(host="10.20.30.40", password=CLOUD_PASSWORD)
KUBE_VERSIONS = ["1.31.0", "1.33.0"]
DB_KINDS = {("Service", vocab.ACCOUNTING_DATABASE), ("NetworkPolicy", vocab.ACCOUNTING_DATABASE)}
DB_KINDS |= {("StatefulSet", vocab.ACCOUNTING_DATABASE)}
DBD_KINDS = {
    ("Secret", vocab.DATABASE_SECRET),
    ("Secret", vocab.SLURMDBD_CONF_SECRET),
    ("ConfigMap", vocab.ACCOUNTING_SCRIPTS_MAP),
    ("ConfigMap", vocab.ACCOUNTING_MAP),
    ("Service", vocab.SLURMDBD),
    ("Deployment", vocab.SLURMDBD),
}


def _with_accounting(kind: str, nodes: int | None = None, **database: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        if kind == "external":
            database.setdefault("host", "slurmdbd.example.org")
        raw.setdefault("slurm", {})["accounting"] = {
            "database": {"kind": kind, **database},
            "qos": [{"name": "high", "priority": 10}],
            "accounts": [{"name": "research", "users": [u["name"] for u in raw.get("users", [])]}],
        }
        if nodes is not None:
            for pool in raw["pools"]:
                pool["nodes"] = nodes
                pool["maxNodes"] = nodes

    return edit


def _plan(kind: str, stack: str = "gcp", nodes: int | None = None, **database: Any) -> ClusterPlan:
    raw: dict[str, Any] = copy.deepcopy(load_declaration(stack))
    _with_accounting(kind, nodes, **database)(raw)
    return build_plan(raw)


def _inputs(kind: str) -> KubeInputs:
    system = {vocab.SYSTEM_ROLE_LABEL: vocab.SYSTEM_ROLE}
    if kind == "cloud":
        return KubeInputs(cloud_database=CLOUD, system_selector=system)
    return KubeInputs(database_password=PASSWORD, system_selector=system)


def _objects(kind: str, stack: str = "gcp", **database: Any) -> list[Obj]:
    return objects(_plan(kind, stack, **database), _inputs(kind))


def _decoded(secret: Obj) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def _pod(obj: Obj) -> Obj:
    pod: Obj = obj["spec"]["template"]
    return pod


# ------------------------------------------------------------------------------------------------ objects
def test_external_and_no_accounting_have_no_accounting_objects() -> None:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["slurm"].pop("accounting", None)
    for plan in (_plan("external"), build_plan(raw)):
        assert accounting.accounting_objects(plan, KubeInputs()) == []
        names = {(o["kind"], o["metadata"]["name"]) for o in objects(plan)}
        assert not names & (DB_KINDS | DBD_KINDS)


def test_in_cluster_has_the_database_and_slurmdbd() -> None:
    plan = _plan("in-cluster")
    got = {(o["kind"], o["metadata"]["name"]) for o in accounting.accounting_objects(plan, _inputs("in-cluster"))}
    assert got == DB_KINDS | DBD_KINDS
    every = {(o["kind"], o["metadata"]["name"]) for o in objects(plan, _inputs("in-cluster"))}
    assert got <= every


def test_cloud_has_slurmdbd_only_pointed_at_the_clouds_database() -> None:
    objs = accounting.accounting_objects(_plan("cloud"), _inputs("cloud"))
    assert {(o["kind"], o["metadata"]["name"]) for o in objs} == DBD_KINDS
    conn = _decoded(find(objs, "Secret", vocab.DATABASE_SECRET))
    assert conn == {
        "host": CLOUD.host,
        "port": "3306",
        "user": "slurm",
        "database": "slurm_acct_db",
        "password": CLOUD_PASSWORD,
    }
    assert "mariadb-init.sh" not in find(objs, "ConfigMap", vocab.ACCOUNTING_SCRIPTS_MAP)["data"]


def test_cloud_without_the_cloud_layers_database_renders_a_placeholder_the_pod_refuses(workdir: Path) -> None:
    plan = _plan("cloud")
    secret = _decoded(find(accounting.accounting_objects(plan, KubeInputs()), "Secret", vocab.DATABASE_SECRET))
    assert secret["host"] == accounting.CLOUD_PLACEHOLDER.host
    conf, proc = _assemble(workdir, accounting.slurmdbd_conf(plan), secret, "slurm")
    assert proc.returncode != 0 and f"host '{accounting.CLOUD_PLACEHOLDER.host}'" in proc.stderr
    assert not conf.exists()


def test_in_cluster_connection_is_the_database_service_with_the_generated_password() -> None:
    plan = _plan("in-cluster")
    objs = accounting.accounting_objects(plan, _inputs("in-cluster"))
    conn = _decoded(find(objs, "Secret", vocab.DATABASE_SECRET))
    svc = find(objs, "Service", vocab.ACCOUNTING_DATABASE)
    assert conn["host"] == f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    assert conn["password"] == PASSWORD
    assert int(conn["port"]) == svc["spec"]["ports"][0]["port"] == vocab.MARIADB_PORT


@pytest.mark.parametrize("kind", ["in-cluster", "cloud"])
def test_the_password_is_in_the_database_secret_and_nowhere_else(kind: str) -> None:
    password = PASSWORD if kind == "in-cluster" else CLOUD_PASSWORD
    objs = _objects(kind)
    forms = {password, base64.b64encode(password.encode()).decode()}
    holders = [o for o in objs if any(f in json.dumps(o) for f in forms)]
    assert [(o["kind"], o["metadata"]["name"]) for o in holders] == [("Secret", vocab.DATABASE_SECRET)]
    conf = _decoded(find(objs, "Secret", vocab.SLURMDBD_CONF_SECRET))[accounting.SLURMDBD_CONF]
    assert not [line for line in conf.splitlines() if line.startswith("StoragePass")] and password not in conf
    for cm in (o for o in objs if o["kind"] == "ConfigMap"):
        assert not any(password in v for v in cm["data"].values())


def test_secret_values_of_an_output_go_through_its_apply() -> None:
    class FakeOutput:
        def __init__(self, value: str | None) -> None:
            self.value = value

        def apply(self, fn: Callable[[str | None], Any]) -> Any:
            return fn(self.value)

    assert accounting.secret_value(FakeOutput("pw")) == base64.b64encode(b"pw").decode()
    assert accounting.secret_value(FakeOutput(None)) is None  # unknown, as under the offline runner
    assert accounting.secret_value(3306) == base64.b64encode(b"3306").decode()


@pytest.mark.parametrize("kind", ["in-cluster", "cloud"])
def test_slurmdbd_is_one_replica_replaced_never_rolled_beside_another(kind: str) -> None:
    dep = find(_objects(kind), "Deployment", vocab.SLURMDBD)
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("kind", ["in-cluster", "cloud"])
def test_slurmdbd_pod_runs_slurmdbd_the_reconciler_and_munge_on_the_system_nodes(kind: str) -> None:
    plan = _plan(kind)
    objs = objects(plan, _inputs(kind))
    pod = _pod(find(objs, "Deployment", vocab.SLURMDBD))["spec"]
    ctl = _pod(find(objs, "StatefulSet", "slurmctld"))["spec"]
    assert pod["nodeSelector"] == ctl["nodeSelector"] == {vocab.SYSTEM_ROLE_LABEL: vocab.SYSTEM_ROLE}
    assert pod["priorityClassName"] == ctl["priorityClassName"]
    # munge as every Slurm pod has it: the sidecar, its key, the socket in the daemon's container.
    munged = container(pod, "munged")
    assert munged == container(ctl, "munged")
    assert {"name": "munge-socket", "mountPath": vocab.MUNGE_SOCKET_DIR} in container(pod, "slurmdbd")["volumeMounts"]
    # The conf is assembled before slurmdbd starts, as SlurmUser, into memory.
    init = container(pod, "slurmdbd-conf")
    assert pod["initContainers"][0] is init
    assert init["securityContext"]["runAsUser"] == vocab.SLURM_UID
    run_volume = next(v for v in pod["volumes"] if v["name"] == "slurmdbd-run")
    assert run_volume == {"name": "slurmdbd-run", "emptyDir": {"medium": "Memory"}}
    dbd = container(pod, "slurmdbd")
    assert dbd["command"] == ["slurmdbd", "-D"]
    assert dbd["env"] == [{"name": "SLURM_CONF", "value": f"{accounting.SLURMDBD_RUN_DIR}/slurm.conf"}]
    assert init["command"][-1] == f"{accounting.SLURMDBD_RUN_DIR}/{accounting.SLURMDBD_CONF}"
    rec = container(pod, "reconciler")
    desired = f"{vocab.ACCOUNTING_DIR}/{vocab.ACCOUNTING_DESIRED_FILE}"
    assert rec["command"] == [
        vocab.POD_PYTHON,
        "-m",
        "slonk_infra.accounting",
        "--desired",
        desired,
        "--interval",
        "30",
    ]
    rec_mounts = {m["mountPath"]: m["name"] for m in rec["volumeMounts"]}
    assert rec_mounts[vocab.ACCOUNTING_DIR] == "accounting" and rec_mounts[vocab.CONF_DIR] == "slurm-config"
    accounting_volume = next(v for v in pod["volumes"] if v["name"] == "accounting")
    assert accounting_volume["configMap"]["name"] == vocab.ACCOUNTING_MAP


def test_the_reconcilers_desired_state_is_the_declarations() -> None:
    plan = _plan("in-cluster")
    cm = find(_objects("in-cluster"), "ConfigMap", vocab.ACCOUNTING_MAP)
    spec = plan.declaration.slurm.accounting
    assert spec is not None
    assert cm["data"] == {vocab.ACCOUNTING_DESIRED_FILE: dump_state(desired_state(spec, plan.name))}
    assert json.loads(cm["data"][vocab.ACCOUNTING_DESIRED_FILE])["cluster"] == plan.name


def test_the_database_is_one_replica_with_a_retained_claim_of_the_declared_size() -> None:
    objs = _objects("in-cluster", storageGib=80)
    sts = find(objs, "StatefulSet", vocab.ACCOUNTING_DATABASE)
    assert sts["metadata"]["labels"][vocab.COMPONENT] == vocab.ACCOUNTING_DATABASE_COMPONENT
    spec = sts["spec"]
    assert spec["replicas"] == 1
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    [claim] = spec["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "80Gi"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    mariadb = container(spec["template"]["spec"], "mariadb")
    assert {"name": claim["metadata"]["name"], "mountPath": vocab.MARIADB_VOLUME_DIR} in mariadb["volumeMounts"]
    assert mariadb["image"] == _plan("in-cluster").declaration.image.reference
    assert mariadb["securityContext"]["runAsUser"] == vocab.MYSQL_UID
    assert {"startupProbe", "readinessProbe", "livenessProbe", "resources"} <= set(mariadb)
    assert spec["template"]["spec"]["securityContext"]["fsGroup"] == vocab.MYSQL_UID


def test_the_default_database_volume_is_the_declarations_default() -> None:
    spec = _plan("in-cluster").declaration.slurm.accounting
    assert spec is not None
    [claim] = find(_objects("in-cluster"), "StatefulSet", vocab.ACCOUNTING_DATABASE)["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == f"{spec.database.volume_gib}Gi"


def test_mysqld_gets_slurms_recommended_settings() -> None:
    cnf = accounting.my_cnf()
    for key, value in (
        ("innodb_buffer_pool_size", "2048M"),
        ("innodb_log_file_size", "64M"),
        ("innodb_lock_wait_timeout", "900"),
        ("loose-innodb_snapshot_isolation", "OFF"),
    ):
        assert f"\n{key} = {value}\n" in cnf
    assert "bind-address = 0.0.0.0" in cnf and f"port = {vocab.MARIADB_PORT}" in cnf


def test_only_the_slurmdbd_pod_reaches_the_database() -> None:
    objs = _objects("in-cluster")
    policy = find(objs, "NetworkPolicy", vocab.ACCOUNTING_DATABASE)
    db_labels = _pod(find(objs, "StatefulSet", vocab.ACCOUNTING_DATABASE))["metadata"]["labels"]
    assert matches(policy["spec"]["podSelector"]["matchLabels"], db_labels)
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": vocab.MARIADB_PORT}]
    [source] = rule["from"]
    admitted = source["podSelector"]["matchLabels"]
    pods = {
        (o["kind"], o["metadata"]["name"]): o["spec"]["template"]["metadata"]["labels"]
        for o in objs
        if o["kind"] in ("StatefulSet", "Deployment", "DaemonSet")
    }
    assert {name for name, labels in pods.items() if matches(admitted, labels)} == {("Deployment", vocab.SLURMDBD)}
    # No other policy of the namespace admits anything to the database pod.
    others = [o for o in objs if o["kind"] == "NetworkPolicy" and o is not policy and "ingress" in o["spec"]]
    assert not [
        o["metadata"]["name"] for o in others if matches(o["spec"]["podSelector"].get("matchLabels", {}), db_labels)
    ]
    svc = find(objs, "Service", vocab.ACCOUNTING_DATABASE)
    assert matches(svc["spec"]["selector"], db_labels)


@pytest.mark.parametrize("kind", ["in-cluster", "cloud"])
def test_slurm_conf_names_the_slurmdbd_service(kind: str) -> None:
    plan = _plan(kind, port=16819)
    objs = objects(plan, _inputs(kind))
    conf = render_slurm_files(plan).config["slurm.conf"]
    keys = dict(line.split("=", 1) for line in conf.splitlines() if line.startswith("AccountingStorage"))
    svc = find(objs, "Service", vocab.SLURMDBD)
    assert (
        keys["AccountingStorageHost"] == f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local."
    )
    dep = find(objs, "Deployment", vocab.SLURMDBD)
    assert matches(svc["spec"]["selector"], _pod(dep)["metadata"]["labels"])
    dbd = container(_pod(dep)["spec"], "slurmdbd")
    assert int(keys["AccountingStoragePort"]) == svc["spec"]["ports"][0]["targetPort"] == 16819
    assert dbd["ports"][0]["containerPort"] == 16819
    conf_text = _decoded(find(objs, "Secret", vocab.SLURMDBD_CONF_SECRET))[accounting.SLURMDBD_CONF]
    assert "DbdPort=16819" in conf_text.splitlines()


@pytest.mark.parametrize("kind", ["in-cluster", "cloud"])
def test_object_count_does_not_grow_with_nodes(kind: str) -> None:
    counts = [
        sorted((o["kind"], o["metadata"]["name"]) for o in objects(_plan(kind, nodes=n), _inputs(kind)))
        for n in (4, 4096)
    ]
    assert counts[0] == counts[1]


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize(("kind", "stack"), [("in-cluster", "gcp"), ("in-cluster", "local"), ("cloud", "aws")])
def test_every_object_validates(kind: str, stack: str, version: str) -> None:
    for obj in _objects(kind, stack):
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_database_statefulset_is_protected_and_kept_like_the_controllers_state() -> None:
    objs = _objects("in-cluster")
    assert stateful(find(objs, "StatefulSet", vocab.ACCOUNTING_DATABASE))
    assert stateful(find(objs, "PersistentVolumeClaim", vocab.CONTROLLER_STATE_CLAIM))
    assert not stateful(find(objs, "Deployment", vocab.SLURMDBD))
    assert not stateful(find(objs, "StatefulSet", "slurmctld"))


@pytest.mark.parametrize("kind", ["in-cluster", "external"])
def test_the_component_protects_the_database_and_its_generated_password(kind: str) -> None:
    plan = _plan(kind)
    run = run_offline(lambda: SlurmCluster(plan.name, plan, CloudResult(provider=None)))
    passwords = run.of_type("random:index/randomPassword:RandomPassword")
    if kind == "external":
        assert passwords == []
        return
    [password] = passwords
    assert password.protect
    assert password.inputs["overrideSpecial"] == vocab.DATABASE_PASSWORD_SPECIALS
    [sts] = [
        r
        for r in run.of_type("kubernetes:apps/v1:StatefulSet")
        if r.inputs["metadata"]["name"] == vocab.ACCOUNTING_DATABASE
    ]
    assert sts.protect and sts.retain_on_delete
    [dep] = [r for r in run.of_type("kubernetes:apps/v1:Deployment") if r.inputs["metadata"]["name"] == vocab.SLURMDBD]
    assert not dep.protect
    assert not run.output_leaks()


# ------------------------------------------------------------------------------------------------ scripts
MARIADBD = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin")
SLURMDBD = shutil.which("slurmdbd") or shutil.which("slurmdbd", path="/usr/sbin")
needs_mariadb = pytest.mark.skipif(MARIADBD is None, reason="mariadbd is not installed on this machine")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _as(user: str) -> list[str]:
    """Runs a command as ``user`` when the tests run as root (mariadbd refuses root), else as ourselves."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(user)
    except KeyError:
        pytest.skip(f"no {user} user on this machine to run as")
    return ["runuser", "-u", user, "--"]


def _owner(user: str) -> str:
    return user if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name


class Database:
    """A private mariadbd made by the pod's init script, stopped by its PID."""

    def __init__(self, root: Path, password: str) -> None:
        self.root = root
        self.port = _free_port()
        self.secret = root / "secret"
        self.secret.mkdir()
        self.volume = root / "volume"
        self.volume.mkdir()
        (root / "run").mkdir()
        self.datadir = self.volume / "data"
        self.cnf = root / "my.cnf"
        self.cnf.write_text(accounting.my_cnf(str(self.datadir), str(root / "run"), self.port, "127.0.0.1"))
        self.init = root / "mariadb-init.sh"
        self.init.write_text(accounting.MARIADB_INIT_SH)
        self.set_password(password)
        self.server: subprocess.Popen[bytes] | None = None
        if os.geteuid() == 0:
            shutil.chown(root, _owner("mysql"))
            for path in root.rglob("*"):
                shutil.chown(path, _owner("mysql"))
            root.chmod(0o755)

    def set_password(self, password: str) -> None:
        values = {"host": "127.0.0.1", "port": str(self.port), "user": "slurm", "database": "slurm_acct_db"}
        for key, value in {**values, "password": password}.items():
            (self.secret / key).write_text(value)

    def run_init(self) -> subprocess.CompletedProcess[str]:
        # As a pod runs it: no USER or LOGNAME in the environment (runuser sets them; a container does not).
        env = ["env", "-u", "USER", "-u", "LOGNAME"]
        cmd = [*_as("mysql"), *env, "sh", str(self.init), str(self.cnf), str(self.datadir), str(self.secret)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> None:
        log = (self.root / "mariadbd.log").open("wb")
        self.server = subprocess.Popen(
            [*_as("mysql"), str(MARIADBD), f"--defaults-file={self.cnf}"], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.sql("slurm", self.password(), "SELECT 1", check=False).returncode == 0:
                return
            assert self.server.poll() is None, (self.root / "mariadbd.log").read_text()
            time.sleep(0.3)
        raise AssertionError("mariadbd did not answer within 60 s")

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()  # mariadbd shuts down cleanly on SIGTERM
            try:
                self.server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.server = None

    def password(self) -> str:
        return (self.secret / "password").read_text()

    def sql(self, user: str, password: str, query: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.port), "-u", user, "-N", "-B"]
        proc = subprocess.run(
            [*cmd, "-e", query, "slurm_acct_db"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "MYSQL_PWD": password},
            check=False,
        )
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A private temp dir the mysql and slurm users can enter (pytest's tmp_path is root's alone, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="slonk-accounting-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def database(workdir: Path) -> Iterator[Database]:
    root = workdir / "database"
    root.mkdir()
    db = Database(root, PASSWORD)
    try:
        yield db
    finally:
        db.stop()


@needs_mariadb
def test_init_makes_the_database_and_a_restart_keeps_everything(database: Database) -> None:
    first = database.run_init()
    assert first.returncode == 0, first.stderr
    assert "creating the system tables" in first.stderr
    database.start()
    database.sql("slurm", PASSWORD, "CREATE TABLE jobs (id INT); INSERT INTO jobs VALUES (42)")
    database.stop()
    # The pod restarts: the init runs again on the existing datadir and changes nothing.
    again = database.run_init()
    assert again.returncode == 0, again.stderr
    assert "creating the system tables" not in again.stderr
    database.start()
    assert database.sql("slurm", PASSWORD, "SELECT id FROM jobs").stdout.split() == ["42"]
    # slurmdbd's user reaches its own database only.
    assert "slurm_acct_db" in database.sql("slurm", PASSWORD, "SHOW DATABASES").stdout.split()
    assert database.sql("slurm", PASSWORD, "CREATE DATABASE other", check=False).returncode != 0


@needs_mariadb
def test_the_documented_dump_and_restore_bring_the_records_back(database: Database) -> None:
    """docs/accounting.md's backup: mariadb-dump in the database container (its user, over the socket)."""
    assert database.run_init().returncode == 0
    database.start()
    database.sql("slurm", PASSWORD, "CREATE TABLE jobs (id INT); INSERT INTO jobs VALUES (7)")
    sock = f"--socket={database.root / 'run' / 'mysqld.sock'}"
    dump = [*_as("mysql"), "mariadb-dump", sock, "--single-transaction", "--routines", "--databases", "slurm_acct_db"]
    dumped = subprocess.run(dump, capture_output=True, timeout=60, check=False)
    assert dumped.returncode == 0, dumped.stderr
    database.sql("slurm", PASSWORD, "DROP TABLE jobs")
    restore = [*_as("mysql"), "mariadb", sock]
    loaded = subprocess.run(restore, input=dumped.stdout, capture_output=True, timeout=60, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert database.sql("slurm", PASSWORD, "SELECT id FROM jobs").stdout.split() == ["7"]


@needs_mariadb
def test_init_applies_a_changed_password_and_refuses_an_unsafe_one(database: Database) -> None:
    assert database.run_init().returncode == 0
    database.set_password("New_pw.2")
    assert database.run_init().returncode == 0
    database.start()
    assert database.sql("slurm", "New_pw.2", "SELECT 1").returncode == 0
    assert database.sql("slurm", PASSWORD, "SELECT 1", check=False).returncode != 0
    database.stop()
    database.set_password("it's#bad")
    refused = database.run_init()
    assert refused.returncode != 0
    assert "password holds a character other than letters, digits and _ . : + -" in refused.stderr


@needs_mariadb
def test_init_never_touches_a_datadir_without_system_tables(database: Database) -> None:
    database.datadir.mkdir()
    (database.datadir / "something").write_text("not ours")
    refused = database.run_init()
    assert refused.returncode != 0 and "holds files but no system tables" in refused.stderr
    assert (database.datadir / "something").read_text() == "not ours"


def _assemble(
    root: Path, base: str, secret: dict[str, str], user: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    (root / "secret").mkdir(exist_ok=True)
    for key, value in secret.items():
        (root / "secret" / key).write_text(value)
    (root / "base.conf").write_text(base)
    (root / "slurmdbd-conf.sh").write_text(accounting.SLURMDBD_CONF_SH)
    out = root / "run"
    out.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            shutil.chown(path, _owner(user))
        root.chmod(0o755)
    cmd = [*_as(user), "sh", str(root / "slurmdbd-conf.sh"), str(root / "base.conf"), str(root / "secret")]
    proc = subprocess.run([*cmd, str(out / "slurmdbd.conf")], capture_output=True, text=True, timeout=30, check=False)
    return out / "slurmdbd.conf", proc


def _secret(password: str, port: int = 3306) -> dict[str, str]:
    return {"host": "127.0.0.1", "port": str(port), "user": "slurm", "database": "slurm_acct_db", "password": password}


def test_slurmdbd_conf_is_the_secrets_conf_plus_the_connection_mode_0600(workdir: Path) -> None:
    base = accounting.slurmdbd_conf(_plan("in-cluster"))
    conf, proc = _assemble(workdir, base, _secret(PASSWORD), "slurm")
    assert proc.returncode == 0, proc.stderr
    assert conf.stat().st_mode & 0o777 == 0o600
    assert pwd.getpwuid(conf.stat().st_uid).pw_name == _owner("slurm")
    lines = conf.read_text().splitlines()
    assert lines[: len(base.splitlines())] == base.splitlines()
    assert lines[len(base.splitlines()) :] == [
        "StorageHost=127.0.0.1",
        "StoragePort=3306",
        "StorageUser=slurm",
        "StorageLoc=slurm_acct_db",
        f"StoragePass={PASSWORD}",
    ]
    assert [p.name for p in conf.parent.iterdir()] == ["slurmdbd.conf"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("password", "has space", "password holds a character other than"),
        ("password", "hash#comment", "password holds a character other than"),
        ("host", "db host", "host 'db host'"),
        ("port", "33o6", "port '33o6' is not a number"),
    ],
)
def test_slurmdbd_conf_refuses_what_slurmdbd_would_misread(workdir: Path, key: str, value: str, message: str) -> None:
    conf, proc = _assemble(workdir, "AuthType=auth/munge\n", {**_secret(PASSWORD), key: value}, "slurm")
    assert proc.returncode != 0 and message in proc.stderr
    assert not conf.exists() and not list(conf.parent.iterdir())


@needs_mariadb
@pytest.mark.skipif(SLURMDBD is None, reason="slurmdbd is not installed on this machine")
def test_real_slurmdbd_starts_on_the_assembled_conf_and_makes_its_tables(database: Database, workdir: Path) -> None:
    assert database.run_init().returncode == 0
    database.start()
    dbd_port = _free_port()
    plan = _plan("in-cluster", port=dbd_port)
    work = workdir / "slurmdbd"
    work.mkdir()
    base = accounting.slurmdbd_conf(plan).replace(f"{accounting.SLURMDBD_RUN_DIR}/", f"{work / 'run'}/")
    base = base.replace("SlurmUser=slurm", f"SlurmUser={_owner('slurm')}")
    conf, proc = _assemble(work, base, _secret(PASSWORD, database.port), "slurm")
    assert proc.returncode == 0, proc.stderr
    env = {**os.environ, "SLURM_CONF": str(conf.parent / "slurm.conf")}
    log = (work / "slurmdbd.log").open("wb")
    daemon = subprocess.Popen([*_as("slurm"), str(SLURMDBD), "-D"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", dbd_port)) == 0:
                    break
            assert daemon.poll() is None, (work / "slurmdbd.log").read_text()
            time.sleep(0.3)
        else:
            raise AssertionError((work / "slurmdbd.log").read_text())
        tables = database.sql("slurm", PASSWORD, "SHOW TABLES").stdout.split()
        assert {"cluster_table", "qos_table", "acct_table"} <= set(tables)
        text = (work / "slurmdbd.log").read_text()
        # DbdHost=localhost on a host of another name, and mysqld's settings as slurmdbd recommends them.
        assert "This host not configured" not in text
        assert "Database settings not recommended values" not in text
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def test_database_memory_sizes_the_buffer_pool_the_request_and_the_limit() -> None:
    """memoryMib: the buffer pool all but 1 GiB of it, the request 512 MiB below it; the default as before."""
    for memory, pool, request, limit in ((None, "2048M", "2560Mi", "3Gi"), (1536, "512M", "1024Mi", "1536Mi")):
        extra: dict[str, Any] = {} if memory is None else {"memoryMib": memory}
        objs = _objects("in-cluster", **extra)
        sts = next(o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "accounting-database")
        mariadb = container(_pod(sts)["spec"], "mariadb")
        assert mariadb["resources"] == {"requests": {"cpu": "500m", "memory": request}, "limits": {"memory": limit}}
        cnf = next(o for o in objs if o["kind"] == "ConfigMap" and accounting.MY_CNF in o.get("data", {}))
        assert f"innodb_buffer_pool_size = {pool}" in cnf["data"][accounting.MY_CNF]


@pytest.mark.parametrize(("months", "expected"), [(None, 12), (3, 3), ("null", None)])
def test_slurmdbd_purges_records_older_than_declared(months: Any, expected: int | None) -> None:
    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    _with_accounting("in-cluster", None)(raw)
    if months is not None:
        raw["slurm"]["accounting"]["retainMonths"] = None if months == "null" else months
    conf = accounting.slurmdbd_conf(build_plan(raw))
    purges = sorted(line for line in conf.splitlines() if line.startswith("Purge"))
    if expected is None:
        assert purges == []
        return
    kinds = ["Event", "Job", "Resv", "Step", "Suspend", "TXN"]
    assert purges == sorted(
        [*(f"Purge{k}After={expected}month" for k in kinds), f"PurgeUsageAfter={2 * expected}month"]
    )
