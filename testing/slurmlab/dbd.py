"""A real MariaDB and a real slurmdbd on localhost, private to one test: temp dirs, free ports, PIDs.

* ``mariadbd`` (Debian's mariadb-server) on a datadir made by ``mariadb-install-db``, its own socket, TCP port
  (127.0.0.1 only), pid file and error log; no system service, no option file read (``--no-defaults``).
* its own ``munged`` with a fresh key: :meth:`SlurmDbd.share_munge_key` writes the same key where a
  :class:`~testing.slurmlab.lab.SlurmLab` looks for it, so the lab's slurmctld and client commands are
  trusted by this slurmdbd.
* ``slurmdbd -D`` with a generated ``slurmdbd.conf`` (mode 0600, owned by the SlurmUser, root here as in the
  lab: slurmdbd.conf(5) "should be ... readable only by SlurmUser"), ``StorageType=accounting_storage/mysql``
  on that MariaDB, ``DbdPort`` a free port.

A lab's slurmctld points at it with the declaration's ``slurm.accounting.database``
(:meth:`SlurmDbd.database`: ``kind: external``, 127.0.0.1 and the port), which the lab's rewrite leaves as
rendered, and ``AccountingStoragePass`` naming this munged's socket; :func:`accounting_lab` starts both
(an :class:`AccountingLab`). Only the host flavor (Debian bookworm: slurmdbd 22.05, MariaDB 10.11) is provided: the chroot
flavor's slurmctld lives in a private network namespace that does not reach this one.

Start it before the lab (22.05's slurmctld exits when slurmdbd is not up at its start) and stop it after.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .lab import SlurmLab
from .procs import alive, free_ports, stop_pids, tail

if TYPE_CHECKING:
    from slonk_infra.accounting.records import State

__all__ = [
    "DBD_COMMANDS",
    "MEMBER",
    "MEMBER_UID",
    "OUTSIDER",
    "OUTSIDER_UID",
    "AccountingLab",
    "SlurmDbd",
    "SlurmDbdError",
    "accounting_declaration",
    "accounting_lab",
    "dbd_missing",
    "require_dbd",
]

DBD_COMMANDS = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr", "sacct", "munged", "setpriv")
"""What the host needs (tools/install-slurm.sh installs mariadb-server, slurmdbd and the clients)."""
_STORAGE_USER = "slurm"
_STORAGE_LOC = "slurm_acct_db"
# Slurm's accounting.html recommends innodb_lock_wait_timeout=900 and a larger buffer pool than MariaDB's
# 128M default; 22.05 still logs "Database settings not recommended values: innodb_buffer_pool_size" at
# 256M, which is only a warning: the lab stays small.
_MARIADB_TUNING = ("--innodb-buffer-pool-size=256M", "--innodb-lock-wait-timeout=900")


class SlurmDbdError(RuntimeError):
    """MariaDB or slurmdbd did not start or answer; the message carries log tails."""


def dbd_missing() -> list[str]:
    """What this host lacks to run :class:`SlurmDbd` (empty when it can)."""
    missing = [] if os.geteuid() == 0 else ["root"]
    missing += [c for c in DBD_COMMANDS if not shutil.which(c)]
    if not Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so").exists() and not list(
        Path("/usr/lib").glob("*/slurm-wlm/accounting_storage_mysql.so")
    ):
        missing.append("accounting_storage_mysql.so (slurmdbd's MySQL plugin)")
    return missing


def require_dbd() -> None:
    """Fails the test (CI=true) or skips it (otherwise) when MariaDB or slurmdbd is not installed."""
    import pytest

    missing = dbd_missing()
    if not missing:
        return
    reason = f"slurmdbd lab unavailable (missing: {', '.join(missing)}); run tools/install-slurm.sh as root"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


class _Proc:
    def __init__(self, name: str, popen: subprocess.Popen[bytes], out: IO[bytes]) -> None:
        self.name, self.popen, self.out = name, popen, out

    def running(self) -> bool:
        return self.popen.poll() is None and alive(self.popen.pid)

    def stop(self, timeout: float = 20.0) -> None:
        stop_pids([self.popen.pid], timeout=timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5.0)
        self.out.close()


class SlurmDbd:
    """MariaDB, munged and slurmdbd in ``workdir``; a context manager that stops only what it started."""

    def __init__(self, workdir: Path, *, start_timeout: float = 90.0) -> None:
        self.workdir = Path(workdir).absolute()
        self.start_timeout = start_timeout
        self.munge_key = os.urandom(1024)
        self.storage_pass = secrets.token_hex(16)
        self.port = 0
        self.db_port = 0
        self.rundir: Path | None = None
        self._procs: dict[str, _Proc] = {}
        self._started = False

    # --- paths --------------------------------------------------------------

    @property
    def datadir(self) -> Path:
        return self.workdir / "mysql"

    @property
    def db_socket(self) -> str:
        assert self.rundir is not None
        return str(self.rundir / "mysqld.sock")

    @property
    def munge_socket(self) -> str:
        assert self.rundir is not None
        return str(self.rundir / "munge" / "munge.sock")

    @property
    def conf_path(self) -> Path:
        return self.workdir / "etc" / "slurmdbd.conf"

    def database(self) -> dict[str, Any]:
        """``slurm.accounting.database`` of a declaration whose slurmctld uses this slurmdbd."""
        return {"kind": "external", "host": "127.0.0.1", "port": self.port}

    # --- lifecycle ----------------------------------------------------------

    def __enter__(self) -> SlurmDbd:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """MariaDB (datadir, storage user), munged, then slurmdbd; returns once slurmdbd listens."""
        if self._started:
            raise SlurmDbdError("already started")
        self._started = True
        atexit.register(self.stop)
        try:
            for sub in ("etc", "log", "run", "munge"):
                (self.workdir / sub).mkdir(parents=True, exist_ok=True)
            # munged wants every directory above its socket o+x, and a socket path under 108 bytes.
            self.rundir = Path(tempfile.mkdtemp(prefix="slurmdbd-"))
            self.rundir.chmod(0o711)
            (self.rundir / "munge").mkdir(mode=0o711)
            self.db_port, self.port = free_ports(2)
            self._start_mariadb()
            self._start_munged()
            self._write_conf()
            self._start_slurmdbd()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops slurmdbd, munged and mariadbd, by PID, and removes the private socket dir."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        for name in ("slurmdbd", "munged", "mariadbd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                proc.stop()
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)
            self.rundir = None

    def share_munge_key(self, lab_workdir: Path) -> None:
        """Writes this munged's key where a SlurmLab in ``lab_workdir`` reads its own (before it starts)."""
        key = Path(lab_workdir) / "munge" / "munge.key"
        key.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            key.unlink()
        key.write_bytes(self.munge_key)
        key.chmod(0o400)

    def sql(self, query: str, *, timeout: float = 120.0) -> str:
        """Runs SQL as MariaDB's root on the private socket; tab-separated rows without a header."""
        res = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={self.db_socket}", "-uroot", "-N", "-B", "-e", query],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if res.returncode != 0:
            raise SlurmDbdError(f"SQL failed (rc {res.returncode}): {query[:200]}\n{res.stderr}")
        return res.stdout

    def log(self, name: str = "slurmdbd", lines: int = 60) -> str:
        """Tail of ``slurmdbd``'s, ``mariadbd``'s or ``munged``'s log and captured output."""
        files = {
            "slurmdbd": [self.workdir / "log" / "slurmdbd.log", self.workdir / "log" / "slurmdbd.out"],
            "mariadbd": [self.workdir / "log" / "mariadbd.err", self.workdir / "log" / "mariadbd.out"],
            "munged": [self.workdir / "munge" / "munged.log", self.workdir / "log" / "munged.out"],
        }[name]
        return "\n".join(f"--- {f.name} ---\n{tail(f, lines)}" for f in files if f.exists())

    def running(self) -> bool:
        """Whether slurmdbd still runs."""
        proc = self._procs.get("slurmdbd")
        return proc is not None and proc.running()

    def stop_slurmdbd(self) -> None:
        """Stops slurmdbd only (MariaDB stays), e.g. to see a client wait for it."""
        proc = self._procs.pop("slurmdbd", None)
        if proc is not None:
            proc.stop()

    def start_slurmdbd(self) -> None:
        """Starts slurmdbd again after :meth:`stop_slurmdbd`."""
        self._start_slurmdbd()

    # --- internals ----------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> _Proc:
        out = (self.workdir / "log" / f"{name}.out").open("ab")
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=self.workdir,
            start_new_session=True,
        )
        proc = _Proc(name, popen, out)
        self._procs[name] = proc
        return proc

    def _wait(self, name: str, ready: Any, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            proc = self._procs[name]
            if not proc.running():
                raise SlurmDbdError(f"{name} exited (rc={proc.popen.poll()}) before {what}\n{self.log(name)}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise SlurmDbdError(f"{name}: not {what} after {self.start_timeout}s\n{self.log(name)}")
            time.sleep(0.1)

    def _start_mariadb(self) -> None:
        log = self.workdir / "log" / "install-db.log"
        with log.open("wb") as out:
            res = subprocess.run(
                [
                    "mariadb-install-db",
                    "--no-defaults",
                    "--user=root",
                    f"--datadir={self.datadir}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=self.start_timeout,
                check=False,
            )
        if res.returncode != 0:
            raise SlurmDbdError(f"mariadb-install-db failed (rc {res.returncode})\n{tail(log)}")
        self._spawn(
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                "--user=root",
                f"--datadir={self.datadir}",
                f"--socket={self.db_socket}",
                f"--port={self.db_port}",
                "--bind-address=127.0.0.1",
                f"--pid-file={self.workdir / 'run' / 'mariadbd.pid'}",
                f"--log-error={self.workdir / 'log' / 'mariadbd.err'}",
                "--skip-name-resolve",
                *_MARIADB_TUNING,
            ],
        )

        def answers() -> bool:
            try:
                self.sql("SELECT 1", timeout=10.0)
            except SlurmDbdError:
                return False
            return True

        self._wait("mariadbd", answers, "answering on its socket")
        # slurmdbd connects over TCP (StorageHost/StoragePort) as its own user, with every right on its
        # database only (accounting.html: "grant all on slurm_acct_db.* to 'slurm'@...").
        self.sql(
            f"CREATE USER '{_STORAGE_USER}'@'127.0.0.1' IDENTIFIED BY '{self.storage_pass}';"
            f"GRANT ALL ON {_STORAGE_LOC}.* TO '{_STORAGE_USER}'@'127.0.0.1';"
        )

    def _start_munged(self) -> None:
        key = self.workdir / "munge" / "munge.key"
        key.write_bytes(self.munge_key)
        key.chmod(0o400)
        (self.workdir / "munge").chmod(0o700)
        m = self.workdir / "munge"
        self._spawn(
            "munged",
            [
                "munged",
                "-F",
                f"--key-file={key}",
                f"--socket={self.munge_socket}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={m / 'munged.log'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
        )

        def answers() -> bool:
            res = subprocess.run(["munge", "-n", "-S", self.munge_socket], capture_output=True, timeout=10)
            return res.returncode == 0

        self._wait("munged", answers, "answering")

    def _write_conf(self) -> None:
        w = self.workdir
        lines = {
            "AuthType": "auth/munge",
            "AuthInfo": f"socket={self.munge_socket}",
            # slurmdbd.conf(5): DbdHost is the name of the machine slurmdbd runs on; "localhost" is accepted.
            "DbdHost": "localhost",
            "DbdAddr": "127.0.0.1",
            "DbdPort": str(self.port),
            "SlurmUser": "root",
            "DebugLevel": "info",
            "LogFile": str(w / "log" / "slurmdbd.log"),
            "PidFile": str(w / "run" / "slurmdbd.pid"),
            "StorageType": "accounting_storage/mysql",
            "StorageHost": "127.0.0.1",
            "StoragePort": str(self.db_port),
            "StorageUser": _STORAGE_USER,
            "StoragePass": self.storage_pass,
            "StorageLoc": _STORAGE_LOC,
        }
        # The purge settings the shipped default renders (retainMonths), so real slurmdbd reads them too.
        from slonk_infra.declaration.accounting import DEFAULT_RETAIN_MONTHS
        from slonk_infra.kube.accounting import purge_lines

        purges = purge_lines(DEFAULT_RETAIN_MONTHS)
        path = self.conf_path
        path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()) + "".join(f"{p}\n" for p in purges))
        # slurmdbd refuses a slurmdbd.conf others may read (it holds StoragePass).
        path.chmod(0o600)
        os.chown(path, 0, 0)

    def _start_slurmdbd(self) -> None:
        # slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF (slurmdbd(8)).
        self._spawn("slurmdbd", ["slurmdbd", "-D"], env={"SLURM_CONF": str(self.workdir / "etc" / "slurm.conf")})
        log = self.workdir / "log" / "slurmdbd.log"

        def listening() -> bool:
            return log.exists() and "slurmdbd version" in log.read_text(errors="replace") and self._port_open()

        self._wait("slurmdbd", listening, f"listening on 127.0.0.1:{self.port}")

    def _port_open(self) -> bool:
        import socket

        with socket.socket() as s:
            s.settimeout(1.0)
            return s.connect_ex(("127.0.0.1", self.port)) == 0


# --- a lab cluster that records and enforces through a SlurmDbd -------------------------------------------

# Real Unix users on every Debian system (base-passwd), so jobs run under their uids without adding users to
# the host: "daemon" (uid 1) is put in accounts, "nobody" (uid 65534) in none.
MEMBER, MEMBER_UID = "daemon", 1
OUTSIDER, OUTSIDER_UID = "nobody", 65534


def accounting_declaration(dbd: SlurmDbd) -> dict[str, Any]:
    """A small GCP declaration (two GPU pools: 2 L4 and 8 H100 per node, 2 nodes each; one 2-host TPU
    slice) for Slurm 22.05, enforcing accounting through ``dbd``. Accounts and QOS are left out: a
    declaration may not list system accounts such as ``daemon`` as users, so desired states are made from an
    ``AccountingSpec`` alone (:meth:`AccountingLab.desired`)."""
    from slonk_infra.declaration.stacks import load_declaration

    raw: dict[str, Any] = copy.deepcopy(load_declaration("gcp"))
    raw["image"]["slurmVersion"] = "22.05"
    raw["pools"] = [
        {"name": "l4", "kind": "gpu", "accelerator": {"type": "l4", "count": 2}, "nodes": 2, "maxNodes": 3},
        {"name": "h100", "kind": "gpu", "accelerator": {"type": "h100", "count": 8}, "nodes": 2},
    ]
    raw["tpuSlices"] = [{"name": "v6e", "generation": "v6e", "topology": "2x4"}]
    raw["slurm"] = {"topology": "tree", "accounting": {"database": dbd.database(), "priorityWeights": None}}
    raw.pop("operations", None)  # the operations controller needs slurmrestd, which this lab does not start
    return raw


@dataclass
class AccountingLab:
    """A running :class:`SlurmDbd` and :class:`~testing.slurmlab.lab.SlurmLab` (host flavor) whose slurmctld
    records and enforces (``associations,limits,qos,safe``) through it; ``cluster`` is its ClusterName."""

    dbd: SlurmDbd
    lab: SlurmLab
    cluster: str
    workdir: Path

    def env(self) -> dict[str, str]:
        """Environment of a client command on this host (sacctmgr, squeue, the reconciler)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SQUEUE_", "SACCT"))}
        return {**env, "SLURM_CONF": self.lab.slurm_conf}

    def desired(self, spec: Mapping[str, Any]) -> State:
        """The desired state of an ``AccountingSpec`` (its ``qos`` and ``accounts``) on this cluster."""
        from slonk_infra.accounting.desired import desired_state
        from slonk_infra.declaration.accounting import AccountingSpec

        return desired_state(AccountingSpec.model_validate(dict(spec)), self.cluster)

    def write_desired(self, spec: Mapping[str, Any], name: str = "desired.json") -> Path:
        """Writes :meth:`desired` as the reconciler reads it; returns the path."""
        from slonk_infra.accounting.wire import dump_state

        path = self.workdir / name
        path.write_text(dump_state(self.desired(spec)))
        return path

    def current(self) -> State:
        """What slurmdbd holds for this cluster, through the reconciler's own listings."""
        from slonk_infra.accounting.sacctmgr import read_state, show_commands

        outputs = {n: self.lab.run(list(argv), check=True).stdout for n, argv in show_commands(self.cluster).items()}
        return read_state(self.cluster, outputs)

    def reconciler(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """``python3 -m slonk_infra.accounting ARGS`` with this cluster's SLURM_CONF."""
        return subprocess.run(
            [sys.executable, "-m", "slonk_infra.accounting", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
            check=False,
        )

    def sbatch_as(
        self, uid: int, args: Sequence[str], script: str = "#!/bin/sh\nsleep 300\n"
    ) -> subprocess.CompletedProcess[str]:
        """``sbatch --parsable`` as ``uid`` (setpriv, its own group), output to /dev/null, in /tmp."""
        as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        return subprocess.run(
            [*as_uid, "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *args],
            input=script,
            capture_output=True,
            text=True,
            timeout=60,
            env=self.env(),
            check=False,
        )


@contextlib.contextmanager
def accounting_lab() -> Iterator[AccountingLab]:
    """slurmdbd on MariaDB, then a lab of :func:`accounting_declaration` whose slurmctld uses it. The work
    dir is o+x from / down, so jobs of other uids reach the lab's config and munge socket."""
    from slonk_infra.clouds import build_plan
    from slonk_infra.slurm import render_slurm_files

    from .health import stand_in_health_check

    workdir = Path(tempfile.mkdtemp(prefix="slonk-acct-"))
    workdir.chmod(0o711)
    try:
        with SlurmDbd(workdir / "dbd") as dbd:
            plan = build_plan(accounting_declaration(dbd))
            labdir = workdir / "lab"
            labdir.mkdir(mode=0o711)
            dbd.share_munge_key(labdir)
            started = [n for g in plan.groups for n in g.node_names[: g.replicas]]
            files = stand_in_health_check(render_slurm_files(plan).all())
            # Slurm reaches slurmdbd through the munged of AccountingStoragePass (slurm.conf(5): "an
            # alternate Munge daemon socket"), by default /run/munge/munge.socket.2, which the lab has not;
            # slurmdbd's munged holds the lab's key, so slurmctld and the clients use it.
            files["slurm.conf"] += f"\nAccountingStoragePass={dbd.munge_socket}\n"
            with SlurmLab(files, "host", labdir, initial_nodes=started) as lab:
                yield AccountingLab(dbd, lab, plan.name, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
