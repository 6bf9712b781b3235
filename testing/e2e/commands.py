"""Every command a rendered container of the cluster's image names is in the image, and the project's own
commands start (their libraries are installed).

The container tier runs some pods, not all: the operations controller (it needs an API server) and the
in-cluster NFS server are rendered but never started here. This check covers every container of every
shipped stack: one container of the built image, run as the operations controller runs, looks each
command up on PATH and runs ``--help`` of the project's console scripts, which imports everything they
load at start.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from slonk_infra import vocab
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.stacks import load_declaration
from slonk_infra.kube.inputs import ClusterKeys, from_cloud
from slonk_infra.kube.manifests import build_manifests
from slonk_infra.kube.operations import RUN_AS
from slonk_infra.policy.props import containers, pod_spec
from slonk_infra.slurm import render_slurm_files
from testing.e2e.image import REPO
from testing.e2e.kube import Obj
from testing.e2e.podman import Podman
from testing.e2e.stack import cloud_result

# The component's generated secrets, stood in for: only the objects' commands are read here.
STAND_IN_KEYS = ClusterKeys(munge_key_b64="", login_host_key_b64="", jwt_key_b64="", database_password="stand-in")

# Console scripts of this project (pyproject [project.scripts]) that pods run: started with --help.
PROJECT_COMMANDS = ("slonk-health", "slonk-ops")


def image_commands(objects: Iterable[Obj], image: str) -> dict[str, str]:
    """Command -> the first container naming it, over the containers that run ``image``; scripts mounted
    from the scripts ConfigMap are left out (they are not in the image)."""
    found: dict[str, str] = {}
    for obj in objects:
        spec = pod_spec(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", obj)
        for c in containers(spec) if spec is not None else ():
            command = list(c.spec.get("command") or [])
            if c.image != image or not command:
                continue
            words = [command[0]]
            if command[0] == "catatonit" and "--" in command:  # an init in front of the real program
                words.append(command[command.index("--") + 1])
            for word in words:
                if not word.startswith(vocab.SCRIPTS_DIR + "/"):
                    found.setdefault(word, f"{obj['kind']}/{obj['metadata']['name']} {c.name}")
    return found


def shipped_stack_commands() -> dict[str, str]:
    """The same over every shipped stack, with the image its declaration names."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml")):
        stack = path.name.split(".")[1]
        plan = build_plan(load_declaration(str(path)))
        # The inputs the component hands the builders (its cloud layer's result: an accounting database
        # of the cloud's, where declared, is rendered from it).
        objects = build_manifests(plan, render_slurm_files(plan), from_cloud(cloud_result(plan), STAND_IN_KEYS))
        for word, where in image_commands(objects, plan.declaration.image.reference).items():
            found.setdefault(word, f"stack {stack}: {where}")
    return found


def check_image(podman: Podman, image: str, commands: dict[str, str]) -> str:
    """Raise AssertionError naming each command missing from ``image`` or project command failing to start."""
    names = sorted(set(commands) | set(PROJECT_COMMANDS))
    script = (
        "rc=0\n"
        f"for c in {' '.join(shlex.quote(n) for n in names)}; do\n"
        '  command -v "$c" >/dev/null 2>&1 || { echo "missing: $c"; rc=1; }\n'
        "done\n"
        f"for c in {' '.join(PROJECT_COMMANDS)}; do\n"
        '  "$c" --help >/dev/null 2>/tmp/err || { echo "$c --help failed: $(tail -n 2 /tmp/err)"; rc=1; }\n'
        "done\n"
        "exit $rc\n"
    )
    # As the operations controller runs: nobody, read-only root, a /tmp of its own.
    proc = podman.run(
        "run", "--rm", "--network", "none", "--user", f"{RUN_AS}:{RUN_AS}", "--read-only", "--tmpfs", "/tmp",
        "--entrypoint", "sh", image, "-c", script, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        lines = proc.stdout.splitlines()
        problems = [
            f"{ln} ({commands.get(ln.split(': ', 1)[1], 'the project')})" for ln in lines if ln.startswith("missing: ")
        ]
        problems += [ln for ln in lines if " --help failed" in ln]
        raise AssertionError(f"the image lacks what rendered containers run: {problems or proc.stderr[-500:]}")
    return f"{len(names)} commands found, {', '.join(PROJECT_COMMANDS)} start"
