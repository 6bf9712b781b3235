"""The README's quick start, read from the README itself, and a check that its main command works as written.

    python3 tools/quickstart.py print        # the Quick start section's commands, one per line
    python3 tools/quickstart.py check        # run the first one in a fresh copy of the repository

``check`` copies the working tree (tracked and untracked, not ignored files) into a temporary folder and runs
the main command there with ``bash``, with ``python3`` on PATH being ``$PYTHON`` (default ``/usr/bin/python3``,
Debian's own). It then checks that the command made its own virtual environment, rendered the ``local`` stack
(summary, manifests, the munge-key Secret with its real key name and no key material), and left the system
interpreter without slonk-infra. It prints the time taken and the disk used. Standard library only: it runs
before any virtual environment exists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Quick start"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def quickstart_commands(readme: str) -> list[str]:
    """Each ``sh`` code block of the Quick start section, as the one command line it must be."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else len(readme)]
    commands = []
    for lang, body in FENCE.findall(section):
        if lang != "sh":
            continue
        lines = [line.split(" #", 1)[0].strip() for line in body.splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        if len(lines) != 1:
            raise ValueError(f"a Quick start block must hold one command line, found {lines}")
        commands.append(lines[0])
    return commands


def working_tree_files() -> list[str]:
    """Paths git would carry: tracked files and untracked files that are not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    return sorted({p for p in out.decode().split("\0") if p})


def copy_tree(dest: Path) -> None:
    """Copy the working tree's files into ``dest`` (links stay links)."""
    for rel in working_tree_files():
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)


def disk_mib(path: Path) -> float:
    """Disk used under ``path`` in MiB (du's figure, counting hard links once)."""
    out = subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0]) / 1024


def check(python: str) -> int:
    """Run the main command on ``python`` in a fresh copy; return a process exit status."""
    command = quickstart_commands((ROOT / "README.md").read_text(encoding="utf-8"))[0]
    with tempfile.TemporaryDirectory(prefix="slonk-quickstart-") as tmp:
        work, shims = Path(tmp) / "slonk-infra", Path(tmp) / "bin"
        copy_tree(work)
        shims.mkdir()
        (shims / "python3").symlink_to(python)
        env = {**os.environ, "PATH": f"{shims}{os.pathsep}/usr/sbin:/usr/bin:/sbin:/bin"}
        for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "SLONK_VENV"):
            env.pop(key, None)
        print(f"quickstart: running the README's main command with python3 = {python}:\n  {command}", flush=True)
        started = time.monotonic()
        proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, check=False)
        seconds = time.monotonic() - started
        problems = [] if proc.returncode == 0 else [f"the command exited with status {proc.returncode}"]
        if proc.returncode == 0:
            problems += _check_result(work, python)
        print(
            f"quickstart: {seconds:.0f} s, {disk_mib(work):.0f} MiB in the copy ({disk_mib(work / '.venv'):.0f} MiB .venv)"
        )
    for problem in problems:
        print(f"quickstart: FAILED: {problem}", file=sys.stderr)
    if not problems:
        print("quickstart: OK")
    return 1 if problems else 0


def _check_result(work: Path, python: str) -> list[str]:
    problems = []
    if not (work / ".venv" / "bin" / "slonk-infra").exists():
        problems.append("the command did not make ./.venv with the slonk-infra command in it")
    summary_file = work / "out" / "local" / "summary.json"
    if not summary_file.exists():
        return [*problems, "no out/local/summary.json"]
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    if summary.get("resources", 0) <= 0 or summary.get("stack") != "local":
        problems.append(f"unexpected summary: {summary}")
    secrets = sorted((work / "out" / "local" / "kubernetes").glob("*-secret-munge-key.yaml"))
    text = secrets[0].read_text(encoding="utf-8") if secrets else ""
    wire_envelope = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")  # Pulumi's secret
    if "munge.key: '<secret:" not in text or any(sig in text for sig in wire_envelope):
        problems.append(f"the munge-key Secret does not show munge.key with a placeholder: {text!r}")
    system = subprocess.run([python, "-c", "import slonk_infra"], cwd="/", capture_output=True, check=False)
    if system.returncode == 0:
        problems.append(f"slonk_infra is importable from the system interpreter {python}")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["print"]:
        print("\n".join(quickstart_commands((ROOT / "README.md").read_text(encoding="utf-8"))))
        return 0
    if argv == ["check"]:
        return check(os.environ.get("PYTHON") or "/usr/bin/python3")
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
