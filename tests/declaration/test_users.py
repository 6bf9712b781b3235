"""Declared users, the directory settings and the login Service's source ranges: what the declaration
accepts, and what every pod is given.

The container tier (testing/e2e, scenario 2) logs in as these users over SSH and runs their jobs.
"""

from __future__ import annotations

import base64
import configparser
from typing import Any

import pytest

from slonk_infra import vocab
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.users import DirectorySpec, UserSpec, sssd_conf, user_files
from slonk_infra.kube import login, worker
from slonk_infra.kube.cluster_wide import secrets
from slonk_infra.kube.inputs import KubeInputs
from slonk_infra.kube.pod import common_mounts, common_volumes
from slonk_infra.plan import PRIVATE_RANGES
from tests.support import declaration

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOaTqJ8m9xX0p9f2bYk2ZVZ3V3FvZ0h0d2xQ alice@laptop"
ALICE: dict[str, Any] = {"name": "alice", "uid": 2001, "sshAuthorizedKeys": [KEY]}
BOB: dict[str, Any] = {"name": "bob", "uid": 2002, "gid": 2000, "group": "research", "sudo": True}


def _plan(stack: str = "local", **changes: Any) -> Any:
    raw = declaration(stack)
    if "users" in changes:
        # The stack's accounts name its own users (a declared user in no account, or an account naming an
        # undeclared one, is refused): users are what these tests change, so accounting goes with them.
        (raw.get("slurm") or {}).pop("accounting", None)
    raw.update(changes)
    return build_plan(raw)


def _problems(**changes: Any) -> str:
    with pytest.raises(DeclarationError) as info:
        _plan(**changes)
    return str(info.value)


@pytest.mark.parametrize(
    ("users", "fragments"),
    [
        ([{**ALICE, "name": "Alice"}], ["users[0].name", "'Alice' is not a POSIX name"]),
        ([{**ALICE, "name": "slurm"}], ["users[0].name", "system account"]),
        ([{**ALICE, "uid": 401}], ["users[0].uid", "401", "1000"]),
        ([{**ALICE, "uid": 65534}], ["users[0].uid", "65534"]),
        ([{**ALICE, "sshAuthorizedKeys": ["AAAAC3Nz no type"]}], ["sshAuthorizedKeys", "not an OpenSSH public key"]),
        ([ALICE, {**BOB, "uid": 2001}], ["users", "two users have uid 2001"]),
        ([ALICE, {**BOB, "name": "alice"}], ["users", "two users have name 'alice'"]),
        ([{**ALICE, "gid": 2000}, BOB], ["gid 2000 is named both 'alice' and 'research'"]),
        ([{**ALICE, "shell": "/bin/zsh"}], ["users[0].shell"]),
    ],
)
def test_bad_users_are_refused_naming_the_field(users: list[dict[str, Any]], fragments: list[str]) -> None:
    text = _problems(users=users)
    for fragment in fragments:
        assert fragment in text


def test_user_files_are_what_nss_sshd_and_sudo_read() -> None:
    users = [UserSpec.model_validate(ALICE), UserSpec.model_validate(BOB)]
    files = user_files(users)
    assert files["passwd"].splitlines() == [
        "alice:*:2001:2001:alice:/home/alice:/bin/bash",
        "bob:*:2002:2000:bob:/home/bob:/bin/bash",
    ]
    assert files["group"].splitlines() == ["alice:*:2001:", "research:*:2000:"]
    assert files["authorized_keys.alice"] == KEY + "\n"
    assert files["authorized_keys.bob"] == ""
    assert [line for line in files["sudoers"].splitlines() if not line.startswith("#")] == [
        "bob ALL=(ALL:ALL) NOPASSWD: ALL"
    ]


def test_every_pod_role_mounts_the_same_users_secret() -> None:
    plan = _plan(users=[ALICE, BOB])
    [users_secret] = [s for s in secrets(plan, KubeInputs()) if s["metadata"]["name"] == vocab.USERS_SECRET]
    passwd = base64.b64decode(users_secret["data"]["passwd"]).decode()
    assert passwd.startswith("alice:*:2001:2001:")
    assert {"name": "users", "mountPath": vocab.USERS_DIR, "readOnly": True} in common_mounts()
    [vol] = [v for v in common_volumes() if v["name"] == "users"]
    assert vol["secret"]["secretName"] == vocab.USERS_SECRET
    # Login and workers (where people run commands) also get the sudoers drop-in, root-only.
    login_spec = login.statefulset(plan, _files(plan), KubeInputs())["spec"]["template"]["spec"]
    worker_spec = worker.statefulset(plan, plan.groups[0], KubeInputs())["spec"]["template"]["spec"]
    for spec in (login_spec, worker_spec):
        mounts = [m["mountPath"] for m in spec["containers"][0]["volumeMounts"]]
        assert vocab.USERS_DIR in mounts and vocab.SUDOERS_FILE in mounts
        [sudoers] = [v for v in spec["volumes"] if v["name"] == "sudoers"]
        assert sudoers["secret"]["items"] == [{"key": "sudoers", "path": "sudoers", "mode": 0o440}]
    # sudo is setuid: the login container allows escalation only when someone is declared with sudo.
    assert login_spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is True
    no_sudo = _plan(users=[ALICE])
    spec = login.statefulset(no_sudo, _files(no_sudo), KubeInputs())["spec"]["template"]["spec"]
    assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def _files(plan: Any) -> Any:
    from slonk_infra.slurm import render_slurm_files

    return render_slurm_files(plan)


def test_login_host_key_is_a_secret_mounted_where_sshd_reads_it() -> None:
    plan = _plan()
    [host] = [
        s
        for s in secrets(plan, KubeInputs(login_host_key_b64="a2V5"))
        if s["metadata"]["name"] == vocab.LOGIN_HOST_KEYS_SECRET
    ]
    assert host["data"] == {vocab.LOGIN_HOST_KEY_FILE: "a2V5"}
    spec = login.statefulset(plan, _files(plan), KubeInputs())["spec"]["template"]["spec"]
    [vol] = [v for v in spec["volumes"] if v["name"] == "host-keys"]
    assert vol["secret"] == {"secretName": vocab.LOGIN_HOST_KEYS_SECRET, "defaultMode": 0o600}
    [mount] = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "host-keys"]
    assert f"{mount['mountPath']}/{vocab.LOGIN_HOST_KEY_FILE}" == vocab.LOGIN_HOST_KEY
    assert vocab.LOGIN_HOST_KEY in _files(plan).scripts["login.sh"]


def test_load_balancer_is_not_open_to_the_world_unless_declared() -> None:
    gcp = build_plan(declaration("gcp"))
    assert gcp.declaration.login.service_type == "LoadBalancer"
    assert login.service(gcp)["spec"]["loadBalancerSourceRanges"] == list(PRIVATE_RANGES)
    raw = declaration("aws")
    # A public range on EKS needs public subnets for the internet-facing load balancer.
    raw["aws"]["publicSubnetIds"] = ["subnet-0ccccccccccccccccc"]
    raw["login"] = {"serviceType": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/24"]}
    assert login.service(build_plan(raw))["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    raw["login"]["loadBalancerSourceRanges"] = ["0.0.0.0/0"]  # open on purpose
    assert login.service(build_plan(raw))["spec"]["loadBalancerSourceRanges"] == ["0.0.0.0/0"]
    # A ClusterIP Service has no load balancer to restrict.
    assert "loadBalancerSourceRanges" not in login.service(build_plan(declaration("local")))["spec"]
    raw["login"]["loadBalancerSourceRanges"] = ["203.0.113.7/24"]
    with pytest.raises(DeclarationError, match=r"login.loadBalancerSourceRanges\[0\].*203.0.113.7/24"):
        build_plan(raw)


def test_directory_settings_are_checked_and_rendered_for_sssd() -> None:
    text = _problems(directory={"uris": ["http://ldap.example.org"], "searchBase": "dc=example,dc=org"})
    assert "directory.uris" in text and "not an LDAP server URI" in text
    text = _problems(directory={"uris": ["ldaps://ldap.example.org"], "searchBase": "example.org"})
    assert "directory.searchBase" in text and "distinguished name" in text
    text = _problems(directory={"uris": ["ldaps://l.example.org"], "searchBase": "dc=x", "bindPasswordSecret": "s"})
    assert "bindPasswordSecret needs bindDn" in text
    spec = DirectorySpec.model_validate(
        {"uris": ["ldaps://ldap.example.org:636"], "searchBase": "dc=example,dc=org",
         "bindDn": "cn=reader,dc=example,dc=org", "bindPasswordSecret": "ldap-bind"}
    )  # fmt: skip
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.read_string(sssd_conf(spec, "/etc/slonk/directory/ca.crt", "@BIND_PASSWORD@"))
    domain = parsed["domain/directory"]
    assert parsed["sssd"]["domains"] == "directory"
    assert domain["ldap_uri"] == "ldaps://ldap.example.org:636"
    assert domain["ldap_default_authtok"] == "@BIND_PASSWORD@"
    assert domain["ldap_tls_cacert"] == "/etc/slonk/directory/ca.crt"
