"""slurmrestd beside a running :class:`~testing.slurmlab.SlurmLab`, with JWT auth.

::

    with SlurmLab(files, flavor, tmp_path / "lab") as lab, RestD(lab) as rest:
        rest.url        # http://127.0.0.1:PORT (host flavor) or unix:/short/path (chroot flavor)
        rest.jwt_key    # the HS256 key slurmctld checks tokens with (the lab's generated key)

The rendered slurm.conf must enable ``AuthAltTypes=auth/jwt`` (the declaration's ``slurm.restApi``);
the lab then generates the key (its documented ``AuthAltParameters`` override).

slurmrestd refuses to run as root or as SlurmUser (root in the lab), so it drops to uid/gid 65534
(nobody) after opening its socket; it reads a copy of slurm.conf that nobody can read. On 22.05 only
the slurmctld plugins are loaded (``-s``, the catalog's list the rendered Deployment uses too): the
default set includes the slurmdbd ones, which are fatal without accounting.

* host flavor: started directly, listening on 127.0.0.1 and a free port; stopped by PID.
* chroot flavor: the lab's private network namespace is unreachable from the test, so slurmrestd
  listens on a unix socket inside the lab's work directory (which is bind-mounted into the
  namespace); it is started and stopped with :meth:`SlurmLab.run` and dies with the namespace
  anyway. The test reaches the socket through a short symlink (unix socket paths are limited to
  108 bytes).
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from slonk_infra.catalog.slurm_versions import SlurmVersion, restd_slurmctld_plugins

from .lab import SlurmLab, SlurmLabError, flavor_version
from .procs import alive, free_ports, stop_pids, tail

NOBODY = 65534
_CHROOT_ROOT_RE = re.compile(r"^(?P<root>.*)/etc/slurm\.conf$")


class RestD:
    """One slurmrestd for one lab; use as a context manager."""

    def __init__(self, lab: SlurmLab, start_timeout: float = 30.0) -> None:
        self.lab = lab
        self.start_timeout = start_timeout
        self.url = ""
        self.pid = 0
        self._popen: subprocess.Popen[bytes] | None = None
        self._short: Path | None = None
        self._dir = lab.workdir / "restd"
        self.log_path = self._dir / "slurmrestd.log"

    @property
    def jwt_key(self) -> bytes:
        """The key slurmctld verifies tokens with."""
        for candidate in (self.lab.conf_dir / "jwt_hs256.key", self.lab.workdir / "state" / "jwt_hs256.key"):
            if candidate.exists():
                return candidate.read_bytes()
        raise SlurmLabError("the lab has no JWT key: does slurm.conf set AuthAltTypes=auth/jwt?")

    def __enter__(self) -> RestD:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _args(self, conf: str) -> list[str]:
        args = ["slurmrestd", "-f", conf, "-a", "rest_auth/jwt", "-u", str(NOBODY)]
        version = flavor_version(self.lab.flavor).split()[-1]
        # The list the rendered Deployment gives an older slurmrestd without slurmdbd (the lab has none).
        plugins = restd_slurmctld_plugins(SlurmVersion.parse(version))
        if plugins:
            args += ["-s", ",".join(plugins)]
        if not version.startswith("22."):
            args += ["-g", str(NOBODY)]
        return args

    def start(self) -> None:
        """Starts slurmrestd and waits until it answers HTTP."""
        self._dir.mkdir(mode=0o755, exist_ok=True)
        os.chown(self._dir, NOBODY, NOBODY)  # a unix socket is created after the uid change
        if self.lab.flavor == "host":
            self._start_host()
        else:
            self._start_chroot()
        self._wait()

    def _start_host(self) -> None:
        # pytest's tmp dirs are 0700: nobody could not read slurm.conf there.
        self._short = Path(tempfile.mkdtemp(prefix="restd-"))
        self._short.chmod(0o755)
        conf = self._short / "slurm.conf"
        shutil.copyfile(self.lab.conf_dir / "slurm.conf", conf)
        conf.chmod(0o644)
        (port,) = free_ports(1)
        log = self.log_path.open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env["SLURM_JWT"] = "daemon"
        self._popen = subprocess.Popen(
            [*self._args(str(conf)), f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        self.pid = self._popen.pid
        self.url = f"http://127.0.0.1:{port}"

    def _start_chroot(self) -> None:
        m = _CHROOT_ROOT_RE.match(self.lab.slurm_conf)
        if m is None:
            raise SlurmLabError(f"unexpected lab slurm.conf path {self.lab.slurm_conf}")
        inside = f"{m.group('root')}/restd"
        shutil.copyfile(self.lab.conf_dir / "slurm.conf", self._dir / "slurm.conf")
        (self._dir / "slurm.conf").chmod(0o644)
        self.lab.workdir.chmod(self.lab.workdir.stat().st_mode | 0o011)  # nobody must pass through it
        cmd = (
            f"SLURM_JWT=daemon {' '.join(self._args(inside + '/slurm.conf'))} unix:{inside}/restd.sock"
            f" >>{inside}/slurmrestd.log 2>&1 </dev/null & echo $!"
        )
        res = self.lab.run(["sh", "-c", cmd], check=True)
        self.pid = int(res.stdout.strip())  # a PID inside the lab's namespace
        self._short = Path(tempfile.mkdtemp(prefix="restd-"))
        (self._short / "s").symlink_to(self._dir / "restd.sock")
        self.url = f"unix:{self._short / 's'}"

    def _connection(self) -> http.client.HTTPConnection:
        if self.url.startswith("unix:"):
            path = self.url.removeprefix("unix:")

            class Unix(http.client.HTTPConnection):
                def connect(self) -> None:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.settimeout(5)
                    s.connect(path)
                    self.sock = s

            return Unix("localhost", timeout=5)
        host, port = self.url.removeprefix("http://").split(":")
        return http.client.HTTPConnection(host, int(port), timeout=5)

    def _running(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return self.lab.run(["kill", "-0", str(self.pid)]).returncode == 0

    def _wait(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if not self._running():
                self.stop()
                raise SlurmLabError(f"slurmrestd exited during start-up:\n{tail(self.log_path)}")
            conn = self._connection()
            try:
                conn.request("GET", "/openapi/v3")
                conn.getresponse().read()
                return  # any HTTP answer (401 without a token) means it serves
            except OSError:
                time.sleep(0.05)
            finally:
                conn.close()
        self.stop()
        raise SlurmLabError(f"slurmrestd not answering after {self.start_timeout}s:\n{tail(self.log_path)}")

    def stop(self) -> None:
        """Stops this slurmrestd by PID (TERM, then KILL)."""
        if self._popen is not None:
            if alive(self._popen.pid):
                stop_pids([self._popen.pid], timeout=10.0)
            self._popen.wait(timeout=5)
            self._popen = None
        elif self.pid and self.lab.flavor == "chroot":
            self.lab.run(["kill", str(self.pid)])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self._running():
                time.sleep(0.05)
            if self._running():
                self.lab.run(["kill", "-KILL", str(self.pid)])
        self.pid = 0
        if self._short is not None:
            shutil.rmtree(self._short, ignore_errors=True)
            self._short = None
