"""The test image: a debootstrap'd Debian base imported into podman, then images/Dockerfile built on it.

The base root filesystem is cached as a tarball in ``~/.cache/slonk-infra/e2e`` (it pins the base
between runs); the built image is tagged with a hash of everything that went into it, so an unchanged
checkout reuses it. The Dockerfile and images/install.sh are the production ones: only the base
differs (``BASE_IMAGE``), see docs/containers.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testing.e2e.podman import Podman, PodmanError

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SLONK_E2E_CACHE", str(Path.home() / ".cache" / "slonk-infra" / "e2e")))
# The Slurm release the test image carries unless SLONK_E2E_SLURM names another (a key of SUITES).
SLURM_VERSION = os.environ.get("SLONK_E2E_SLURM", "26.05")
# The Debian suite whose own packages carry each Slurm release (install.sh installs from packages
# when the base's registry has the declared major.minor).
SUITES = {"26.05": "sid", "24.11": "trixie", "22.05": "bookworm"}
# What the image build copies of the project: enough for `pip install` of the package.
PROJECT_FILES = ("pyproject.toml", "README.md", "constraints.txt", "slonk_infra")


@dataclass(frozen=True)
class BuiltImage:
    """A built test image and how long each step took (0 when cached)."""

    reference: str
    slurm_version: str
    suite: str
    rootfs_s: float
    import_s: float
    build_s: float


def _log(msg: str) -> None:
    print(f"  image: {msg}", flush=True)


def base_rootfs(suite: str) -> Path:
    """A minbase root filesystem of ``suite`` as a tarball, made once with debootstrap and cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"rootfs-{suite}.tar"
    if tarball.exists():
        return tarball
    work = Path(tempfile.mkdtemp(prefix=f"rootfs-{suite}-", dir=CACHE))
    root = work / "root"
    try:
        _log(f"debootstrap --variant=minbase {suite} (once; cached as {tarball.name})")
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", suite, str(root)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise PodmanError(f"debootstrap {suite} failed:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
        # A frozen package snapshot's Release file may be past its Valid-Until date; apt refuses such files.
        (root / "etc/apt/apt.conf.d/99no-valid-until").write_text('Acquire::Check-Valid-Until "false";\n')
        for deb in (root / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        partial = work / "rootfs.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."], check=True)
        partial.rename(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tarball


def _digest(paths: list[Path], extra: str) -> str:
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if "__pycache__" in f.parts:
                continue
            digest.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _pip_conf(workdir: Path) -> list[str]:
    """buildah volume flags handing the build this machine's pip index settings and CA bundle, if any.

    Package installs inside the build go through the same index and TLS trust as this machine's own pip;
    on a machine with no such settings nothing is passed.
    """

    def pip_get(key: str) -> str:
        proc = subprocess.run(["python3", "-m", "pip", "config", "get", key], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    cert = os.environ.get("PIP_CERT") or pip_get("global.cert") or os.environ.get("SSL_CERT_FILE", "")
    index = os.environ.get("PIP_INDEX_URL") or pip_get("global.index-url")
    lines, flags = ["[global]"], []
    if cert and Path(cert).is_file():
        lines.append("cert = /run/slonk-build/ca.crt")
        flags += ["--volume", f"{cert}:/run/slonk-build/ca.crt:ro"]
    if index and not index.startswith("file:"):
        lines.append(f"index-url = {index}")
    if len(lines) == 1:
        return []
    conf = workdir / "pip.conf"
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [*flags, "--volume", f"{conf}:/etc/pip.conf:ro"]


def build_image(podman: Podman, slurm_version: str) -> BuiltImage:
    """The test image for ``slurm_version`` (built, or reused when nothing that goes into it changed)."""
    if slurm_version not in SUITES:
        raise PodmanError(f"no Debian suite packages Slurm {slurm_version}; known: {', '.join(SUITES)}")
    suite = SUITES[slurm_version]
    pinned = os.environ.get("SLONK_E2E_IMAGE")
    if pinned:  # an image built earlier, reused as it is: comparable runs while the tree changes
        if podman.run("image", "exists", pinned, check=False).returncode != 0:
            raise PodmanError(f"SLONK_E2E_IMAGE={pinned}: no such image")
        if not pinned.rsplit(":", 1)[-1].startswith(f"{slurm_version}-"):
            raise PodmanError(f"SLONK_E2E_IMAGE={pinned} is not a Slurm {slurm_version} image (SLONK_E2E_SLURM)")
        _log(f"{pinned} reused as it is (SLONK_E2E_IMAGE): the pods' own Python may be older than the tree")
        return BuiltImage(pinned, slurm_version, suite, 0.0, 0.0, 0.0)
    t0 = time.monotonic()
    cached_rootfs = (CACHE / f"rootfs-{suite}.tar").exists()
    tarball = base_rootfs(suite)
    rootfs_s = 0.0 if cached_rootfs else time.monotonic() - t0
    stat = tarball.stat()
    base = f"localhost/slonk-e2e/base:{suite}-{int(stat.st_mtime)}-{stat.st_size}"
    t1 = time.monotonic()
    import_s = 0.0
    if podman.run("image", "exists", base, check=False).returncode != 0:
        _log(f"podman import {tarball.name} -> {base}")
        podman.run("import", str(tarball), base, timeout=600)
        import_s = time.monotonic() - t1
    images = REPO / "images"
    tag = _digest([images / "Dockerfile", images / "install.sh", *(REPO / p for p in PROJECT_FILES)], base)
    reference = f"localhost/slonk-e2e/slurm:{slurm_version}-{tag}"
    build_s = 0.0
    if podman.run("image", "exists", reference, check=False).returncode != 0:
        t2 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="ctx-", dir=podman.workdir) as tmp:
            ctx = Path(tmp)
            shutil.copy2(images / "install.sh", ctx / "install.sh")
            (ctx / "src").mkdir()
            for name in PROJECT_FILES:
                src = REPO / name
                if src.is_dir():
                    shutil.copytree(src, ctx / "src" / name, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(src, ctx / "src" / name)
            _log(f"buildah bud images/Dockerfile FROM {base} (SLURM_VERSION={slurm_version}) -> {reference}")
            cmd = [
                "buildah", "bud", "--layers=false", "--network=host", *_pip_conf(podman.workdir),
                "-f", str(images / "Dockerfile"),
                "--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"SLURM_VERSION={slurm_version}",
                "-t", reference, str(ctx),
            ]  # fmt: skip
            log = podman.workdir / "image-build.log"
            with log.open("w", encoding="utf-8") as out:
                proc = subprocess.run(cmd, env=podman.env, stdout=out, stderr=subprocess.STDOUT, check=False)
            if proc.returncode != 0:
                tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
                raise PodmanError(f"image build failed (rc {proc.returncode}); log {log}:\n{tail}")
        build_s = time.monotonic() - t2
    return BuiltImage(reference, slurm_version, suite, rootfs_s, import_s, build_s)


def ssh_keygen(podman: Podman, image: str, keys: Path) -> Callable[[list[str]], None]:
    """ssh-keygen of the test image, with ``keys`` at /keys."""

    def run(args: list[str]) -> None:
        keys.mkdir(parents=True, exist_ok=True)
        podman.run("run", "--rm", "--network", "none", "--volume", f"{keys}:/keys", image, "ssh-keygen", *args)

    return run
