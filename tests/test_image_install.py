"""The image installs what its pod-side programs need: every library they import and their commands on PATH.

images/install.sh installs into the pods' venv only the distributions it names (``pod_side``), so a library
the health check or the operations controller starts to import must be named there too, or the pod
fails at start with ModuleNotFoundError. The modules are followed through every library module they
import, the way Python would load them.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from slonk_infra import vocab
from testing.e2e.commands import PROJECT_COMMANDS
from tests.source_imports import imported_modules

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / "images" / "install.sh"
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
# The pods' programs (the console scripts rendered containers and entrypoints run) -> their modules.
POD_COMMANDS = {command: SCRIPTS[command].split(":")[0] for command in PROJECT_COMMANDS}


def _module_path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _third_party(start: str) -> set[str]:
    """Top-level names of the non-stdlib modules ``start`` loads, following the library's own modules."""
    seen, todo, outside = set(), [start], set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        # Importing a.b.c runs a/__init__ and a/b/__init__ first.
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        todo += [p for p in parents if p not in seen]
        path = _module_path(module)
        if path is None:
            continue
        for name in imported_modules(module, path, lambda n: _module_path(n) is not None, runtime_only=True):
            top = name.split(".")[0]
            if top == "slonk_infra":
                if _module_path(name) is not None:
                    todo.append(name)
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                outside.add(top)
    return outside


def _pod_side() -> set[str]:
    match = re.search(r"pod_side = \{([^}]*)\}", INSTALL.read_text(encoding="utf-8"))
    assert match, "images/install.sh no longer names its pod_side set"
    return {_dist(d) for d in re.findall(r'"([^"]+)"', match.group(1))}


def test_the_image_installs_every_library_the_pod_programs_import() -> None:
    dists = importlib.metadata.packages_distributions()
    named = _pod_side()
    missing = {}
    for command, module in POD_COMMANDS.items():
        for top in sorted(_third_party(module)):
            owners = {_dist(d) for d in dists.get(top, [top])}
            if not owners & named:
                missing[f"{command}: import {top}"] = sorted(owners)
    assert not missing, f"images/install.sh pod_side lacks the distributions of: {missing}"


def test_every_pod_side_library_is_a_pinned_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["ops"]
    pinned = {_dist(re.split(r"[<>=!~ \[]", d, maxsplit=1)[0]) for d in deps if "==" in d}
    assert _pod_side() <= pinned, sorted(_pod_side() - pinned)


def test_the_pod_commands_are_put_on_path() -> None:
    text = INSTALL.read_text(encoding="utf-8")
    match = re.search(r"for cmd in ([\w -]+); do\n\s+ln -sf", text)
    assert match, "images/install.sh no longer links the pod commands onto PATH"
    assert set(match.group(1).split()) == set(PROJECT_COMMANDS)
    assert POD_COMMANDS == {"slonk-health": "slonk_infra.health.cli", "slonk-ops": "slonk_infra.ops.main"}


def test_the_image_carries_slurmdbd_its_mysql_plugin_and_mariadb() -> None:
    """The accounting pods (slonk_infra.kube.accounting) run slurmdbd and MariaDB from the one image."""
    text = INSTALL.read_text(encoding="utf-8")
    # slurmdbd beside the other Slurm packages, and the MySQL headers a source build needs for its plugin.
    assert re.search(r"slurmctld slurmd slurm-client .*\bslurmdbd\b", text)
    assert re.search(r"build-essential (.*\\\n)*.*default-libmysqlclient-dev", text)
    assert 'die "accounting_storage_mysql.so is missing' in text
    # The server and the clients its init, probes and backups call.
    assert re.search(r"libnss-extrausers \\\n\s+mariadb-server mariadb-client\n", text)


def test_the_database_user_has_the_uid_the_manifests_give_it() -> None:
    text = INSTALL.read_text(encoding="utf-8")
    uids = {name: int(uid) for name, uid in re.findall(r"^add_user (\w+) (\d+) ", text, flags=re.MULTILINE)}
    assert uids["mysql"] == vocab.MYSQL_UID
    assert uids["slurm"] == vocab.SLURM_UID
    # Made before the packages, so mariadb-server's postinst finds it and makes no other.
    assert text.index("add_user mysql") < text.index("apt-get install")
