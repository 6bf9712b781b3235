"""Who can use the cluster: the declaration's ``users`` (and optional ``directory``), and the files every
Slurm pod reads them from.

Every pod (login, controller, workers) mounts the same ``slurm-users`` Secret at
:data:`~slonk_infra.vocab.USERS_DIR`; the image's NSS reads ``passwd`` and ``group``
there through libnss-extrausers, so a declared user has the same name, UID and GID everywhere, the
non-root controller included, and nothing is written into a container's /etc. The login pod's sshd
takes a user's keys from ``authorized_keys.<name>`` (AuthorizedKeysCommand, so a key change needs no
restart) and creates missing home directories on the shared /home. ``sudo: true`` puts the user in
``sudoers`` (login and workers).

Sites with a directory declare ``directory`` instead of (or besides) ``users``: LDAP through SSSD,
rendered into ``sssd.conf`` here and checked against SSSD's own schema by the container tier.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# OpenSSH public key line: type, base64 blob, optional comment.
SSH_KEY = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n]*)?$"
)
# Names the image and its packages already use (Debian base accounts and the daemons' own users).
RESERVED_NAMES = frozenset(
    {"root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
     "www-data", "backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "sshd", "messagebus",
     "munge", "slurm", "slurmrestd", "statd", "_rpc", "systemd-network", "systemd-timesync"}
)  # fmt: skip
DN = re.compile(r"^[A-Za-z][A-Za-z0-9-]*=[^,]+(,\s*[A-Za-z][A-Za-z0-9-]*=[^,]+)*$")
MIN_ID = 1000  # below: system accounts (the image's munge 400, slurm 401, slurmrestd 402)
MAX_ID = 2**31 - 2
NOBODY_ID = 65534


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _id(value: int) -> int:
    if not MIN_ID <= value <= MAX_ID or value == NOBODY_ID:
        raise ValueError(f"{value} is not a user id for people: use {MIN_ID}..{MAX_ID} (not {NOBODY_ID})")
    return value


AccountId = Annotated[int, AfterValidator(_id)]


class UserSpec(_Model):
    """A person who logs in to the login pods and runs jobs, the same UID/GID on every pod."""

    name: str = Field(description="Login name (lowercase POSIX name, at most 32 characters).")
    uid: AccountId = Field(description=f"User id ({MIN_ID} and up), identical on login, controller and workers.")
    gid: AccountId | None = Field(default=None, description="Primary group id (default: the uid).")
    group: str | None = Field(default=None, description="Primary group name (default: the user name).")
    ssh_authorized_keys: list[str] = Field(
        default_factory=list, description="OpenSSH public keys (one 'type base64 [comment]' line each)."
    )
    sudo: bool = Field(
        default=False,
        description="Passwordless sudo on the login and worker pods (the login container then allows "
        "privilege escalation, which setuid sudo needs).",
    )
    shell: Literal["/bin/bash", "/bin/sh"] = Field(default="/bin/bash", description="Login shell.")

    @field_validator("name", "group")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not USER_NAME.match(value):
            raise ValueError(f"{value!r} is not a POSIX name: lowercase letters, digits, '_' and '-', at most 32")
        if value in RESERVED_NAMES:
            raise ValueError(f"{value!r} is a system account of the image; choose another name")
        return value

    @field_validator("ssh_authorized_keys")
    @classmethod
    def _keys(cls, keys: list[str]) -> list[str]:
        for i, key in enumerate(keys):
            if not SSH_KEY.match(key.strip()):
                raise ValueError(
                    f"key {i} ({key[:30]!r}...) is not an OpenSSH public key line "
                    "('ssh-ed25519 AAAA... comment', as in id_ed25519.pub)"
                )
        return [k.strip() for k in keys]

    @property
    def primary_gid(self) -> int:
        """The primary group id."""
        return self.gid if self.gid is not None else self.uid

    @property
    def primary_group(self) -> str:
        """The primary group name."""
        return self.group or self.name

    @property
    def home(self) -> str:
        """Home directory, on the shared /home."""
        return f"/home/{self.name}"


def _consistent(users: list[UserSpec]) -> list[UserSpec]:
    """Names and UIDs unique; a GID always has the same group name."""
    for attr in ("name", "uid"):
        seen: set[object] = set()
        for u in users:
            value = getattr(u, attr)
            if value in seen:
                raise ValueError(f"two users have {attr} {value!r}")
            seen.add(value)
    groups: dict[int, str] = {}
    for u in users:
        name = groups.setdefault(u.primary_gid, u.primary_group)
        if name != u.primary_group:
            raise ValueError(f"gid {u.primary_gid} is named both {name!r} and {u.primary_group!r}")
    return users


Users = Annotated[list[UserSpec], AfterValidator(_consistent)]


class DirectorySpec(_Model):
    """An LDAP directory the pods resolve users from through SSSD (for sites that have one)."""

    uris: list[str] = Field(min_length=1, description="LDAP servers, ldaps://host[:port] or ldap://host[:port].")
    search_base: str = Field(description="Base DN of users and groups, e.g. dc=example,dc=org.")
    start_tls: bool = Field(default=True, description="StartTLS on ldap:// servers (ldaps:// is TLS already).")
    bind_dn: str | None = Field(default=None, description="DN to bind as (default: anonymous bind).")
    bind_password_secret: str | None = Field(
        default=None,
        description="Name of an existing Secret in the namespace whose 'password' key is the bind password.",
    )
    ca_secret: str | None = Field(
        default=None, description="Name of an existing Secret whose 'ca.crt' key is the directory's CA certificate."
    )
    min_id: int = Field(default=MIN_ID, ge=MIN_ID, description="Lowest UID/GID SSSD returns.")

    @field_validator("uris")
    @classmethod
    def _uris(cls, uris: list[str]) -> list[str]:
        for uri in uris:
            if not re.match(r"^ldaps?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$", uri):
                raise ValueError(f"{uri!r} is not an LDAP server URI (ldaps://host[:port] or ldap://host[:port])")
        return uris

    @field_validator("search_base", "bind_dn")
    @classmethod
    def _dn(cls, value: str | None) -> str | None:
        if value is not None and not DN.match(value):
            raise ValueError(f"{value!r} is not a distinguished name like dc=example,dc=org")
        return value

    @model_validator(mode="after")
    def _bind(self) -> DirectorySpec:
        if self.bind_password_secret and not self.bind_dn:
            raise ValueError("bindPasswordSecret needs bindDn (the DN the password belongs to)")
        return self


# ------------------------------------------------------------------------------------------- files
def user_files(users: Sequence[UserSpec]) -> dict[str, str]:
    """The ``slurm-users`` Secret's keys: passwd, group, sudoers, and authorized_keys.<name> per user."""
    groups: dict[int, str] = {}
    for u in users:
        groups.setdefault(u.primary_gid, u.primary_group)
    out = {
        # '*' in the password field: no password ever matches (people log in with their keys), and PAM
        # looks for no shadow entry, which only 'x' would send it to.
        "passwd": "".join(f"{u.name}:*:{u.uid}:{u.primary_gid}:{u.name}:{u.home}:{u.shell}\n" for u in users),
        "group": "".join(f"{name}:*:{gid}:\n" for gid, name in groups.items()),
        "sudoers": "# Declared users with sudo: true (slonk-infra).\n"
        + "".join(f"{u.name} ALL=(ALL:ALL) NOPASSWD: ALL\n" for u in users if u.sudo),
    }
    for u in users:
        out[f"authorized_keys.{u.name}"] = "".join(f"{k}\n" for k in u.ssh_authorized_keys)
    return out


def sssd_conf(directory: DirectorySpec, ca_path: str | None, password_placeholder: str) -> str:
    """sssd.conf for ``directory``. The bind password is not in it: the pod writes it in place of
    ``password_placeholder`` from the Secret the declaration names, in its private copy of the file."""
    lines = [
        "[sssd]",
        "services = nss, pam",
        "domains = directory",
        "",
        "[nss]",
        "filter_users = root,slurm,munge,slurmrestd",
        "filter_groups = root,slurm,munge,slurmrestd",
        "",
        "[domain/directory]",
        "id_provider = ldap",
        "auth_provider = ldap",
        f"ldap_uri = {', '.join(directory.uris)}",
        f"ldap_search_base = {directory.search_base}",
        f"ldap_id_use_start_tls = {'true' if directory.start_tls else 'false'}",
        "ldap_tls_reqcert = demand",
        f"min_id = {directory.min_id}",
        "cache_credentials = false",
        "enumerate = false",
    ]
    if ca_path:
        lines.append(f"ldap_tls_cacert = {ca_path}")
    if directory.bind_dn:
        lines.append(f"ldap_default_bind_dn = {directory.bind_dn}")
        if directory.bind_password_secret:
            lines += ["ldap_default_authtok_type = password", f"ldap_default_authtok = {password_placeholder}"]
    return "\n".join(lines) + "\n"


__all__ = ["DirectorySpec", "UserSpec", "Users", "sssd_conf", "user_files"]
