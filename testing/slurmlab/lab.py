"""A real Slurm cluster on localhost, started from rendered config files.

Two flavors:

* ``host``: the host's Slurm (Debian bookworm's slurm-wlm 22.05), processes
  started directly.
* ``chroot``: Slurm from a Debian sid chroot (26.05 at the time of writing)
  at ``$SLONK_SLURM_CHROOT`` (default ``~/.cache/slonk-infra/slurm-sid``),
  made by ``tools/install-slurm.sh``.  Everything runs inside
  ``unshare --mount --pid --uts --ipc --net --fork --kill-child``; daemons
  and client commands enter that namespace with ``nsenter`` and ``chroot``.

The rendered files are rewritten only as listed in
:data:`testing.slurmlab.confrewrite.OVERRIDES` (re-exported here), so what is
tested is what would be deployed.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, get_args

from .confrewrite import (
    OVERRIDES,
    ConfigError,
    LabContext,
    Override,
    RenderedLab,
    parse_node_names,
    render_lab_config,
)
from .procs import alive, children, descendants, free_ports, leftover_pids, stop_pids, tail

__all__ = [
    "CHROOT_ENV",
    "FLAVORS",
    "OVERRIDES",
    "ConfigError",
    "ConfigVerdict",
    "Flavor",
    "Override",
    "SlurmLab",
    "SlurmLabError",
    "available_flavors",
    "check_config",
    "chroot_path",
    "flavor_version",
    "leaked_mounts",
    "missing_reason",
]

Flavor = Literal["host", "chroot"]
FLAVORS: tuple[Flavor, ...] = get_args(Flavor)
CHROOT_ENV = "SLONK_SLURM_CHROOT"

# Where the work directory is bind-mounted inside the chroot.  It lives on
# the namespace's private /run tmpfs, so nothing is created in the chroot.
_CHROOT_ROOT = "/run/slonk-lab"
# The compiled-in default socket, on the private /run: tools that ignore
# AuthInfo (e.g. a configless slurmd) still find the lab's munged.
_CHROOT_MUNGE_SOCKET = "/run/munge/munge.socket.2"

_TERMINAL_JOB_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
# Node state flags that still count as "idle and usable".
_OK_NODE_FLAGS = frozenset({"CLOUD", "DYNAMIC_NORM", "POWERED_UP"})
_SBIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_CLIENT_ENV_PREFIXES = ("SLURM_", "SQUEUE_", "SINFO_", "SBATCH_", "SRUN_", "SALLOC_", "SCONTROL_", "SACCT_")


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # If the test process is SIGKILLed, its daemons (and, through
    # unshare --kill-child, the whole chroot namespace) go with it.  The signal
    # fires when the forking *thread* exits, so start labs from a long-lived thread.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class SlurmLabError(RuntimeError):
    """Slurm did not do what the lab expected; the message carries log tails."""


def chroot_path() -> Path:
    """The sid chroot used by the ``chroot`` flavor."""
    env = os.environ.get(CHROOT_ENV)
    if env:
        return Path(env)
    return Path.home() / ".cache" / "slonk-infra" / "slurm-sid"


def _missing_for(flavor: Flavor) -> list[str]:
    missing: list[str] = []
    if os.geteuid() != 0:
        missing.append("root")
    if flavor == "host":
        missing += [c for c in ("slurmctld", "slurmd", "sinfo", "scontrol", "munged", "munge") if not shutil.which(c)]
    else:
        missing += [c for c in ("unshare", "nsenter", "chroot", "ip") if not shutil.which(c)]
        root = chroot_path()
        for rel in ("usr/sbin/slurmctld", "usr/sbin/slurmd", "usr/bin/sinfo", "usr/sbin/munged", "usr/bin/env"):
            if not os.access(root / rel, os.X_OK):
                missing.append(str(root / rel))
    return missing


@functools.cache
def available_flavors() -> list[Flavor]:
    """Flavors whose Slurm is installed here (run tools/install-slurm.sh to get both)."""
    return [f for f in FLAVORS if not _missing_for(f)]


def missing_reason(flavor: Flavor) -> str:
    """Why ``flavor`` is unavailable ('' if it is available)."""
    missing = _missing_for(flavor)
    if not missing:
        return ""
    return f"Slurm flavor {flavor!r} unavailable (missing: {', '.join(missing)}); run tools/install-slurm.sh as root"


@functools.cache
def flavor_version(flavor: Flavor) -> str:
    """``slurmctld -V`` of a flavor, e.g. ``slurm-wlm 22.05.8``."""
    argv = ["slurmctld", "-V"] if flavor == "host" else ["chroot", str(chroot_path()), "/usr/sbin/slurmctld", "-V"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise SlurmLabError(f"{argv} failed: {proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


def leaked_mounts(flavor: Flavor = "chroot") -> list[str]:
    """Lines of this process's mountinfo that lie under the chroot (should be empty)."""
    if flavor != "chroot":
        return []
    root = str(chroot_path().resolve())
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line for line in lines if f" {root}/" in line or f" {root} " in line]


class Daemon:
    """A process the lab started: ``popen`` is what it spawned, ``pid`` the real daemon."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], pid: int, out: IO[bytes]) -> None:
        self.name = name
        self.popen = popen
        self.pid = pid
        self.out = out

    def running(self) -> bool:
        """Whether the spawned process and the daemon both still run."""
        return self.popen.poll() is None and alive(self.pid)

    def exit_code(self) -> int | None:
        """The spawned process's exit status, None while it runs."""
        return self.popen.poll()

    def stop(self, timeout: float = 15.0) -> None:
        """Stops the daemon, then what was spawned for it, by PID."""
        stop_pids([self.pid], timeout=timeout)
        stop_pids([self.popen.pid, *descendants(self.popen.pid)], timeout=5.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5.0)
        self.out.close()


class _Backend:
    """How processes are started for one flavor."""

    root: str
    munge_socket: str
    cgroup_plugin: str

    def __init__(self, workdir: Path, env_tag: str) -> None:
        self.workdir = workdir
        self.env_tag = env_tag

    def setup(self) -> None:
        """Prepares the environment; must be undone by :meth:`teardown`."""

    def teardown(self) -> None:
        """Undoes :meth:`setup`; safe to call more than once."""

    def cleanup_dirs(self) -> list[Path]:
        """Host paths whose users are leftovers of this lab."""
        return [self.workdir]

    def argv(
        self, args: Sequence[str], env: Mapping[str, str], cwd: str
    ) -> tuple[list[str], dict[str, str], str | None]:
        """argv, environment and cwd for Popen so that ``args`` runs in this flavor."""
        raise NotImplementedError

    def daemon_pid(self, popen: subprocess.Popen[bytes]) -> int:
        return popen.pid


class _HostBackend(_Backend):
    cgroup_plugin = "autodetect"

    def __init__(self, workdir: Path, env_tag: str) -> None:
        super().__init__(workdir, env_tag)
        self.rundir: Path | None = None
        self.root = ""
        self.munge_socket = ""

    def setup(self) -> None:
        # A short private dir: unix socket paths are limited to 108 bytes
        # (slurmd puts step sockets in its spool dir), and munged insists that
        # every directory above its socket is o+x, which pytest's 0700
        # tmp dirs are not.  The work dir is reached through a symlink in it.
        self.rundir = Path(tempfile.mkdtemp(prefix="slurmlab-"))
        self.rundir.chmod(0o711)
        (self.rundir / "munge").mkdir(mode=0o711)
        (self.rundir / "munge").chmod(0o711)
        (self.rundir / "w").symlink_to(self.workdir.resolve())
        self.root = str(self.rundir / "w")
        self.munge_socket = str(self.rundir / "munge" / "munge.sock")

    def teardown(self) -> None:
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)
            self.rundir = None

    def cleanup_dirs(self) -> list[Path]:
        return [self.workdir] + ([self.rundir] if self.rundir else [])

    def argv(
        self, args: Sequence[str], env: Mapping[str, str], cwd: str
    ) -> tuple[list[str], dict[str, str], str | None]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(_CLIENT_ENV_PREFIXES)}
        base.update(env)
        return list(args), base, cwd


_HOLDER_SETUP = r"""
set -eu
C=$1 W=$2 PY=$3 REAPER=$4 ROOT=$5
ip link set lo up
# glibc's getaddrinfo(AI_ADDRCONFIG) fails with only loopback up, and then
# slurmctld cannot bind.  The "dummy" link type may be missing; a bridge works.
ip link add slurmlab0 type bridge
ip addr add 192.0.2.1/32 dev slurmlab0
ip link set slurmlab0 up
mount --make-rprivate /
mount -t proc proc "$C/proc"
mount -t sysfs sysfs "$C/sys"
mount -t tmpfs -o mode=0755 tmpfs "$C/run"
mkdir -p "$C$ROOT" "$C/run/munge" "$C/run/lock"
mount --bind "$W" "$C$ROOT"
mount -t tmpfs -o mode=1777 tmpfs "$C/tmp"
mount -t tmpfs -o mode=1777 tmpfs "$C/dev/shm"
exec "$PY" -I -c "$REAPER"
"""

# PID 1 of the namespace: reaps re-parented processes (double-forked
# slurmstepd) and, on SIGTERM, signals everything else before exiting.
_HOLDER_REAPER = r"""
import os, signal, sys, time
sigs = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
print("ready", flush=True)
while True:
    info = signal.sigwaitinfo(sigs)
    reap()
    if info.si_signo != signal.SIGCHLD:
        break
def others(sig):
    # kill(-1) from a namespace's init reaches everything else in it; ESRCH
    # means nothing is left.
    try:
        os.kill(-1, sig)
        return True
    except ProcessLookupError:
        return False
others(signal.SIGTERM)
deadline = time.monotonic() + 3
while others(0) and time.monotonic() < deadline:
    reap()
    time.sleep(0.02)
others(signal.SIGKILL)
"""


class _ChrootBackend(_Backend):
    root = _CHROOT_ROOT
    munge_socket = _CHROOT_MUNGE_SOCKET
    # The namespace has no cgroup fs mounted; 23.11+ can skip cgroups entirely.
    cgroup_plugin = "disabled"

    def __init__(self, workdir: Path, env_tag: str) -> None:
        super().__init__(workdir, env_tag)
        self.chroot = chroot_path().resolve()
        self.unshare: subprocess.Popen[bytes] | None = None
        self.holder_pid = 0
        self.holder_log: IO[bytes] | None = None

    def setup(self, timeout: float = 20.0) -> None:
        log_path = self.workdir / "log" / "nsholder.log"
        self.holder_log = log_path.open("ab")
        self.unshare = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--pid",
                "--uts",
                "--ipc",
                "--net",
                "--fork",
                "--kill-child",
                "--",
                "/bin/sh",
                "-c",
                _HOLDER_SETUP,
                "slurmlab-holder",
                str(self.chroot),
                str(self.workdir.resolve()),
                sys.executable,
                _HOLDER_REAPER,
                _CHROOT_ROOT,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.holder_log,
            env={**os.environ, "PATH": _SBIN_PATH + ":" + os.environ.get("PATH", "")},
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert self.unshare.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.unshare.stdout, selectors.EVENT_READ)
        line = b""
        if sel.select(timeout):
            line = self.unshare.stdout.readline()
        sel.close()
        self.unshare.stdout.close()
        kids = children(self.unshare.pid)
        if line.strip() != b"ready" or not kids:
            self.teardown()
            raise SlurmLabError(
                f"namespace holder did not start (rc={self.unshare.poll() if self.unshare else None}):\n"
                + tail(log_path)
            )
        self.holder_pid = kids[0]

    def teardown(self) -> None:
        if self.unshare is not None:
            if self.holder_pid:
                stop_pids([self.holder_pid], timeout=10.0)
            try:
                self.unshare.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                # --kill-child makes the kernel SIGKILL the namespace's PID 1.
                self.unshare.kill()
                self.unshare.wait(timeout=10.0)
            self.unshare = None
            self.holder_pid = 0
        if self.holder_log is not None:
            self.holder_log.close()
            self.holder_log = None

    def argv(
        self, args: Sequence[str], env: Mapping[str, str], cwd: str
    ) -> tuple[list[str], dict[str, str], str | None]:
        if not self.holder_pid:
            raise SlurmLabError("chroot namespace is not running")
        full_env = {"PATH": _SBIN_PATH, "HOME": "/root", "LANG": "C.UTF-8", **env}
        argv = [
            "nsenter",
            f"--target={self.holder_pid}",
            "--mount",
            "--pid",
            "--net",
            "--uts",
            "--ipc",
            "--",
            "chroot",
            str(self.chroot),
            "/usr/bin/env",
            "-i",
            f"--chdir={cwd}",
            *(f"{k}={v}" for k, v in full_env.items()),
            *args,
        ]
        return argv, {"PATH": _SBIN_PATH + ":" + os.environ.get("PATH", "")}, None

    def daemon_pid(self, popen: subprocess.Popen[bytes]) -> int:
        # nsenter forks to enter the PID namespace; the child becomes the daemon.
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            kids = children(popen.pid)
            if kids:
                return kids[0]
            if popen.poll() is not None:
                return popen.pid
            time.sleep(0.005)
        raise SlurmLabError(f"nsenter (pid {popen.pid}) did not fork")


class SlurmLab:
    """A Slurm cluster on localhost built from rendered config files.

    ``conf_files`` maps file names (relative paths, e.g. ``slurm.conf``,
    ``gres.conf``, ``topology.yaml``, ``prolog.d/10-x.sh``) to contents.  They
    are rewritten into ``workdir/etc`` with only the documented
    :data:`OVERRIDES`.  ``gpu_files_per_node`` (node name or hostlist ->
    count) adds fake GPU files for nodes whose gres.conf relies on
    AutoDetect.  ``initial_nodes`` limits which slurmd start with the lab
    (default: all).

    Use as a context manager; :meth:`stop` always runs and stops only the
    processes this lab started.
    """

    def __init__(
        self,
        conf_files: Mapping[str, str],
        flavor: Flavor,
        workdir: Path,
        gpu_files_per_node: Mapping[str, int] | None = None,
        *,
        initial_nodes: Iterable[str] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"unknown flavor {flavor!r}; expected one of {FLAVORS}")
        self.flavor: Flavor = flavor
        self.conf_files = dict(conf_files)
        self.workdir = Path(workdir).absolute()
        self.gpu_files_per_node = dict(gpu_files_per_node or {})
        self.start_timeout = start_timeout
        self._node_names = parse_node_names(self.conf_files)
        if not self._node_names:
            raise ConfigError("slurm.conf defines no NodeName")
        self._initial = list(initial_nodes) if initial_nodes is not None else list(self._node_names)
        unknown = set(self._initial) - set(self._node_names)
        if unknown:
            raise ValueError(f"initial_nodes not in slurm.conf: {sorted(unknown)}")
        self.env_tag = f"SLURMLAB_TAG={uuid.uuid4().hex}"
        self._backend: _Backend = (
            _HostBackend(self.workdir, self.env_tag) if flavor == "host" else _ChrootBackend(self.workdir, self.env_tag)
        )
        self._procs: dict[str, Daemon] = {}
        self._started = False
        self.rendered: RenderedLab | None = None
        self.hostname = socket.gethostname().split(".")[0]
        self.ctld_port = 0
        self.node_ports: dict[str, int] = {}

    # --- public API --------------------------------------------------------

    @property
    def node_names(self) -> list[str]:
        """Every node defined by slurm.conf NodeName lines, hostlists expanded."""
        return list(self._node_names)

    @property
    def conf_dir(self) -> Path:
        """Host path of the rewritten config directory."""
        return self.workdir / "etc"

    @property
    def slurm_conf(self) -> str:
        """Path of slurm.conf as Slurm commands see it (the value of SLURM_CONF)."""
        return f"{self._backend.root}/etc/slurm.conf"

    def __enter__(self) -> SlurmLab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Starts munged, slurmctld and the initial slurmd; waits until those nodes are idle."""
        self.setup()
        try:
            self._start_ctld()
            for name in self._initial:
                self._spawn_slurmd(name)
            self.wait_nodes(self._initial, timeout=self.start_timeout)
        except BaseException:
            self.stop()
            raise

    def setup(self) -> None:
        """Everything before slurmctld: the rewritten files, the flavor's root, munged.

        For checks of the config itself (does slurmctld accept it, how long does it take to load),
        follow with :meth:`spawn_controller`; :meth:`start` does both and starts the nodes.
        :meth:`stop` undoes it, whatever was started.
        """
        if self._started:
            raise SlurmLabError("lab already started")
        self._started = True
        atexit.register(self.stop)
        try:
            self._prepare()
            self._backend.setup()
            self._render()
            self._start_munged()
        except BaseException:
            self.stop()
            raise

    def spawn_controller(self, wrapper: Sequence[str] = ()) -> Daemon:
        """Starts ``slurmctld -D`` with the lab's config after :meth:`setup`, without waiting for it.

        ``wrapper``: a command slurmctld runs under (``strace -f -o FILE``), found in the flavor's root. The
        daemon's PID is then slurmctld's own, not the wrapper's: strace ignores SIGTERM while its command
        runs, and killing it would orphan slurmctld."""
        if not self._started:
            raise SlurmLabError("setup() first")
        proc = self._spawn("slurmctld", [*wrapper, "slurmctld", "-D", "-f", self.slurm_conf])
        if wrapper:
            proc.pid = self._named_process(proc, "slurmctld")
        return proc

    @staticmethod
    def _named_process(proc: Daemon, comm: str, timeout: float = 10.0) -> int:
        """The PID of ``proc`` or of its first descendant whose command name is ``comm`` (once exec'd)."""
        deadline = time.monotonic() + timeout
        while True:
            for pid in (proc.pid, *descendants(proc.pid)):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                        return pid
            if proc.popen.poll() is not None or time.monotonic() > deadline:
                raise SlurmLabError(f"no {comm} process under pid {proc.pid} after {timeout} s")
            time.sleep(0.005)

    def stop_controller(self) -> None:
        """Stops slurmctld by PID (SIGTERM, then SIGKILL after 15 s); returns once it has exited."""
        proc = self._procs.pop("slurmctld", None)
        if proc is not None:
            proc.stop()

    def wait_controller(self, timeout: float = 30.0) -> None:
        """Waits until slurmctld answers ``scontrol ping``; raises if it exits or does not answer in time."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(["slurmctld"])
            if self.ping():
                return
            if time.monotonic() > deadline:
                raise SlurmLabError(f"slurmctld not answering ping after {timeout}s\n{self.log('slurmctld')}")
            time.sleep(0.05)

    def ping(self) -> bool:
        """Whether slurmctld answers ``scontrol ping``."""
        res = self.run(["scontrol", "ping"], timeout=15.0)
        return res.returncode == 0 and " is UP" in res.stdout

    def stop(self) -> None:
        """Stops everything this lab started (by PID) and removes private runtime dirs."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        errors: list[str] = []

        def attempt(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except Exception as e:
                errors.append(f"{what}: {e!r}")

        ctld = self._procs.get("slurmctld")
        if ctld is not None and ctld.running():
            attempt("cancel jobs", self._cancel_all_jobs)
        slurmds = [p for n, p in self._procs.items() if n not in {"slurmctld", "munged"}]
        stop_pids([p.pid for p in slurmds], timeout=15.0)
        for p in slurmds:
            attempt(f"stop {p.name}", p.stop)
        if ctld is not None:
            attempt("stop slurmctld", ctld.stop)
        attempt("leftovers", self._kill_leftovers)
        munged = self._procs.get("munged")
        if munged is not None:
            attempt("stop munged", munged.stop)
        self._procs.clear()
        attempt("teardown", self._backend.teardown)
        attempt("leftovers", self._kill_leftovers)
        if errors:
            raise SlurmLabError("errors while stopping the lab: " + "; ".join(errors))

    def run(
        self,
        args: Sequence[str],
        *,
        check: bool = False,
        timeout: float = 30.0,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Runs a Slurm client command against this lab (SLURM_CONF set).

        For the chroot flavor it runs inside the namespace and chroot.  The
        default cwd is ``<workdir>/home``, so batch output lands there.  On
        timeout the command and its descendants are killed and
        :class:`SlurmLabError` is raised.  ``check=True`` raises on rc != 0.
        """
        argv, penv, pcwd = self._backend.argv(args, self._env(env), cwd or f"{self._backend.root}/home")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=penv,
            cwd=pcwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_pids([*reversed(descendants(proc.pid)), proc.pid], timeout=2.0)
            out, err = proc.communicate()
            raise SlurmLabError(f"{list(args)} timed out after {timeout}s\nstdout: {out}\nstderr: {err}") from None
        result = subprocess.CompletedProcess(list(args), proc.returncode, out, err)
        if check and proc.returncode != 0:
            raise SlurmLabError(
                f"{list(args)} failed with rc {proc.returncode}\nstdout: {out}\nstderr: {err}\n"
                f"--- slurmctld log ---\n{self.log('slurmctld', 30)}"
            )
        return result

    def sbatch(self, script: str, *args: str) -> int:
        """Submits a batch script (its text, with or without ``#!``) and returns the job id."""
        if not script.startswith("#!"):
            script = "#!/bin/sh\n" + script
        out = self.run(["sbatch", "--parsable", *args], input=script, check=True).stdout
        return int(out.strip().split(";")[0])

    def node_states(self) -> dict[str, tuple[str, str]]:
        """Node name -> (State, Reason) from ``scontrol show nodes``."""
        res = self.run(["scontrol", "show", "nodes", "-o"], timeout=15.0)
        out: dict[str, tuple[str, str]] = {}
        for line in res.stdout.splitlines():
            name = re.search(r"NodeName=(\S+)", line)
            state = re.search(r"\bState=(\S+)", line)
            reason = re.search(r"\bReason=(.*?)(?: \w+=|$)", line)
            if name and state:
                out[name.group(1)] = (state.group(1), reason.group(1) if reason else "")
        return out

    @staticmethod
    def is_idle(state: str) -> bool:
        """True for IDLE (possibly +CLOUD/+DYNAMIC_NORM), false if drained, down or not responding."""
        if "*" in state:
            return False
        base, *flags = state.upper().split("+")
        return base == "IDLE" and set(flags) <= _OK_NODE_FLAGS

    @staticmethod
    def is_responding(state: str) -> bool:
        """True for a node that answers and may run jobs: idle, allocated, mixed or completing."""
        if "*" in state:
            return False
        base, *flags = state.upper().split("+")
        return base in ("IDLE", "ALLOCATED", "MIXED", "COMPLETING") and set(flags) <= _OK_NODE_FLAGS

    def wait_nodes(self, names: Iterable[str] | None = None, timeout: float = 30.0, busy_ok: bool = False) -> None:
        """Waits until every node in ``names`` (default: running slurmd) is idle (or busy, if ``busy_ok``)."""
        ok = self.is_responding if busy_ok else self.is_idle
        want = list(names) if names is not None else self._running_nodes()
        deadline = time.monotonic() + timeout
        states: dict[str, tuple[str, str]] = {}
        while True:
            self._check_alive(["slurmctld", *want])
            states = self.node_states()
            bad = [n for n in want if not ok(states.get(n, ("MISSING", ""))[0])]
            if not bad:
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        details = "\n".join(f"  {n}: {states.get(n, ('MISSING', ''))}" for n in bad)
        logs = "".join(f"\n--- {n} log ---\n{self.log(n, 30)}" for n in bad[:3])
        raise SlurmLabError(
            f"nodes not idle after {timeout}s:\n{details}\n--- slurmctld log ---\n{self.log('slurmctld', 40)}{logs}"
        )

    def restart_controller(self, timeout: float = 30.0, wait: bool = True) -> None:
        """Stops slurmctld by PID (SIGTERM), starts it again and waits for ping and responding nodes."""
        self.stop_controller()
        self._start_ctld(timeout=timeout)
        # Nodes running jobs across the restart are allocated, not idle: they only need to answer.
        if wait:
            self.wait_nodes(timeout=timeout, busy_ok=True)

    def signal_slurmd(self, name: str, sig: int) -> None:
        """Sends ``sig`` to the slurmd of node ``name`` (as a pod's entrypoint would)."""
        proc = self._procs.get(name)
        if proc is None:
            raise SlurmLabError(f"slurmd {name} is not running")
        os.kill(proc.pid, sig)

    def stop_slurmd(self, name: str, timeout: float = 15.0) -> None:
        """Stops the slurmd of node ``name`` by PID (SIGTERM, then SIGKILL after ``timeout``)."""
        proc = self._procs.pop(name, None)
        if proc is None:
            raise SlurmLabError(f"slurmd {name} is not running")
        proc.stop(timeout=timeout)

    def start_slurmd(self, name: str, wait: bool = True, timeout: float = 30.0) -> None:
        """Starts the slurmd of node ``name``; by default waits until the node is idle."""
        if name not in self._node_names:
            raise ValueError(f"{name!r} is not a node of this lab ({self._node_names})")
        if name in self._procs and self._procs[name].running():
            raise SlurmLabError(f"slurmd {name} is already running")
        self._spawn_slurmd(name)
        if wait:
            self.wait_nodes([name], timeout=timeout)

    def wait_job(
        self,
        jobid: int | str,
        states: Iterable[str] = frozenset({"COMPLETED"}),
        timeout: float = 30.0,
    ) -> str:
        """Polls ``scontrol show job`` until the job reaches one of ``states``; returns that state.

        Raises :class:`SlurmLabError` if it reaches another terminal state or
        ``timeout`` passes (the job record and slurmctld log are included).
        """
        want = {s.upper() for s in states}
        deadline = time.monotonic() + timeout
        record = ""
        state = ""
        while time.monotonic() < deadline:
            res = self.run(["scontrol", "show", "job", "-o", str(jobid)], timeout=15.0)
            record = res.stdout.strip() or res.stderr.strip()
            m = re.search(r"\bJobState=(\S+)", record)
            state = m.group(1) if m else ""
            if state in want:
                return state
            if state in _TERMINAL_JOB_STATES or (res.returncode != 0 and "Invalid job id" in record):
                break
            time.sleep(0.1)
        raise SlurmLabError(
            f"job {jobid} is {state or 'unknown'}, wanted {sorted(want)} (timeout {timeout}s)\n{record}\n"
            f"--- slurmctld log ---\n{self.log('slurmctld', 40)}"
        )

    def log(self, name: str, lines: int = 60) -> str:
        """Tail of the log of ``slurmctld``, ``munged`` or a node's slurmd (plus its captured stdout/stderr)."""
        logdir = self.workdir / "log"
        if name == "slurmctld":
            path = logdir / "slurmctld.log"
        elif name == "munged":
            path = self.workdir / "munge" / "munged.log"
        else:
            path = logdir / f"slurmd-{name}.log"
        text = tail(path, lines)
        out = tail(logdir / f"{name}.out", lines)
        # In -D mode stderr mirrors the log file, but errors from before the
        # log file is opened (config parsing) exist only on stderr.
        last = out.strip().splitlines()[-1].split(": ", 1)[-1] if out.strip() else ""
        if last and last not in text:
            text += f"\n--- {name} stdout/stderr ---\n{out}"
        return text

    # --- internals ---------------------------------------------------------

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        tag_key, _, tag_value = self.env_tag.partition("=")
        env = {"SLURM_CONF": self.slurm_conf, tag_key: tag_value}
        env.update(extra or {})
        return env

    def _prepare(self) -> None:
        for sub in ("etc", "state", "run", "log", "dev", "munge", "home", "spool"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        (self.workdir / "munge").chmod(0o700)
        for name in self._node_names:
            # slurmd does not create its own spool dir.
            (self.workdir / "spool" / name).mkdir(exist_ok=True)
        key = self.workdir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)

    def _render(self) -> None:
        ports = free_ports(2 + len(self._node_names))
        self.ctld_port = ports[0]
        self.node_ports = dict(zip(self._node_names, ports[2:], strict=True))
        ctx = LabContext(
            root=self._backend.root,
            hostname=self.hostname,
            munge_socket=self._backend.munge_socket,
            ctld_port=ports[0],
            slurmd_port=ports[1],
            node_ports=self.node_ports,
            cgroup_plugin=self._backend.cgroup_plugin,
        )
        rendered = render_lab_config(self.conf_files, ctx, self.gpu_files_per_node)
        etc = self.conf_dir
        for name, text in rendered.files.items():
            path = etc / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o755 if name in rendered.executables else 0o644)
        for dev in rendered.devices:
            path = self.workdir / dev.relpath
            if not path.exists():
                # NVIDIA's major number; Slurm only stats these, never opens them.
                os.mknod(path, 0o666 | 0o020000, os.makedev(195, dev.minor))
        for rel in rendered.secret_files:
            path = self.workdir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(1024))
            path.chmod(0o600)
        self.rendered = rendered

    def _spawn(self, name: str, args: Sequence[str]) -> Daemon:
        root = self._backend.root
        argv, env, cwd = self._backend.argv(args, self._env(), f"{root}/home")
        out = (self.workdir / "log" / f"{name}.out").open("ab")
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        try:
            pid = self._backend.daemon_pid(popen)
        except BaseException:
            stop_pids([popen.pid, *descendants(popen.pid)])
            out.close()
            raise
        proc = Daemon(name, popen, pid, out)
        self._procs[name] = proc
        return proc

    def _start_munged(self, timeout: float = 15.0) -> None:
        r = self._backend.root
        sock = self._backend.munge_socket
        self._spawn(
            "munged",
            [
                "munged",
                "-F",
                f"--key-file={r}/munge/munge.key",
                f"--socket={sock}",
                f"--pid-file={r}/munge/munged.pid",
                f"--log-file={r}/munge/munged.log",
                f"--seed-file={r}/munge/munged.seed",
                # The chroot's private network has no name for this host; an
                # unresolved origin makes Slurm log "Lookup failed for 0.0.0.0".
                "--origin=127.0.0.1",
            ],
        )
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(["munged"])
            if self.run(["munge", "-n", "-S", sock], timeout=10.0).returncode == 0:
                return
            if time.monotonic() > deadline:
                raise SlurmLabError(f"munged not answering after {timeout}s\n{self.log('munged')}")
            time.sleep(0.05)

    def _start_ctld(self, timeout: float = 30.0) -> None:
        self.spawn_controller()
        self.wait_controller(timeout)

    def _spawn_slurmd(self, name: str) -> None:
        self._spawn(name, ["slurmd", "-D", "-f", self.slurm_conf, "-N", name])

    def _running_nodes(self) -> list[str]:
        return [n for n in self._node_names if n in self._procs and self._procs[n].running()]

    def _check_alive(self, names: Iterable[str]) -> None:
        for name in names:
            proc = self._procs.get(name)
            if proc is not None and not proc.running():
                rc = proc.popen.poll()
                raise SlurmLabError(f"{name} exited (rc={rc})\n{self.log(name)}")

    def _cancel_all_jobs(self) -> None:
        ids = self.run(["squeue", "-h", "-o", "%i"], timeout=15.0).stdout.split()
        if not ids:
            return
        self.run(["scancel", *ids], timeout=15.0)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if not self.run(["squeue", "-h", "-o", "%i"], timeout=15.0).stdout.split():
                return
            time.sleep(0.1)

    def _kill_leftovers(self) -> None:
        ours = {p.pid for p in self._procs.values()} | {p.popen.pid for p in self._procs.values()}
        pids = [p for p in leftover_pids(self._backend.cleanup_dirs(), self.env_tag) if p not in ours]
        if pids:
            # Orphaned slurmstepd ignores SIGTERM once slurmd is gone.
            stop_pids(pids, timeout=3.0)


@dataclass(frozen=True)
class ConfigVerdict:
    """What slurmctld made of a set of files (see :func:`check_config`)."""

    accepted: bool
    """slurmctld kept running: it answered a ping (the config fully loaded), or was still loading at the timeout."""
    answered: bool
    """slurmctld answered a ping before the verdict."""
    exit_code: int | None
    """slurmctld's exit status when it stopped; None while it ran."""
    output: str
    """slurmctld's stdout/stderr and the end of its log file."""


def check_config(
    conf_files: Mapping[str, str],
    flavor: Flavor,
    workdir: Path,
    timeout: float = 20.0,
) -> ConfigVerdict:
    """Starts only munged and ``slurmctld -D`` with the (overridden) files and says whether slurmctld
    accepted them: it still runs once it answers a ping or after ``timeout``. A rejected config is one
    slurmctld exits on, with the reason in ``output``."""
    lab = SlurmLab(conf_files, flavor, workdir)
    try:
        lab.setup()
        proc = lab.spawn_controller()
        deadline = time.monotonic() + timeout
        rc: int | None = None
        answered = False
        while time.monotonic() < deadline:
            rc = proc.exit_code()
            if rc is not None:
                break
            if lab.ping():
                answered = True
                # Config parsing and plugin setup finish before the RPC port
                # opens; give late errors a moment anyway.
                time.sleep(0.5)
                rc = proc.exit_code()
                break
            time.sleep(0.05)
        output = tail(workdir / "log" / "slurmctld.out", 400) + "\n" + tail(workdir / "log" / "slurmctld.log", 400)
        return ConfigVerdict(accepted=rc is None, answered=answered, exit_code=rc, output=output)
    finally:
        lab.stop()
