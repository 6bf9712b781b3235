"""Reading stack files: ``Pulumi.<stack>.yaml`` holds the declaration under ``slonk-infra:cluster``.

A stack is named (``local``: looked up in the project's stack folder) or given as a path to its file,
so the CLI works from any directory. Every way a file can be wrong (missing, not YAML, not a mapping,
no declaration, the declaration not a mapping) raises :class:`StackFileError` with one clear message.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from slonk_infra.declaration.errors import StackFileError

PROJECT = "slonk-infra"
CONFIG_KEY = f"{PROJECT}:cluster"
PROJECT_FILE = "Pulumi.yaml"


def looks_like_path(stack: str) -> bool:
    """Whether the stack argument is a file path rather than a stack name."""
    return "/" in stack or "\\" in stack or stack.endswith((".yaml", ".yml"))


def stack_name(stack: str) -> str:
    """The stack's name: ``gcp`` for ``gcp`` and for ``some/dir/Pulumi.gcp.yaml``."""
    if not looks_like_path(stack):
        return stack
    name = Path(stack).name
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    return name.removeprefix("Pulumi.") or name


def find_stacks_dir(start: Path | None = None) -> Path | None:
    """Where named stacks live: ``./stacks``, else the ``stackConfigDir`` of the nearest ``Pulumi.yaml`` above."""
    here = (start or Path.cwd()).resolve()
    if (here / "stacks").is_dir():
        return here / "stacks"
    for directory in (here, *here.parents):
        project = directory / PROJECT_FILE
        if project.is_file():
            try:
                data = yaml.safe_load(project.read_text(encoding="utf-8"))
            except yaml.YAMLError:
                return directory
            config_dir = data.get("stackConfigDir") if isinstance(data, dict) else None
            return directory / str(config_dir) if config_dir else directory
    return None


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    """Path of a stack given by name (``local``) or by path to a ``Pulumi.<stack>.yaml`` file."""
    if looks_like_path(stack):
        path = Path(stack)
        if not path.is_file():
            raise StackFileError(f"stack file {stack} not found (from {Path.cwd()})")
        return path
    directory = stacks_dir or find_stacks_dir()
    if directory is None:
        raise StackFileError(
            f"no stack {stack!r}: no ./stacks folder and no {PROJECT_FILE} in {Path.cwd()} or above it; "
            f"give the stack file's path (e.g. path/to/Pulumi.{stack}.yaml) or --stacks-dir"
        )
    path = directory / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in directory.glob("Pulumi.*.yaml"))
        near = difflib.get_close_matches(stack, known, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise StackFileError(f"no stack {stack!r} in {directory}; known stacks: {', '.join(known) or '(none)'}{hint}")
    return path


def load_stack_config(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The whole ``config:`` mapping of a stack file."""
    path = stack_file(stack, stacks_dir)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise StackFileError(f"{path}: not valid YAML: {_yaml_problem(err)}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise StackFileError(f"{path}: cannot be read: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise StackFileError(
            f"{path}: a stack file is a mapping with a 'config:' key, but this file holds a {_kind(data)}"
        )
    config = data.get("config")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path}: 'config' must be a mapping of config keys, not a {_kind(config)}")
    return config


def load_declaration(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The raw cluster declaration of a stack (validated later by :func:`slonk_infra.clouds.build_plan`)."""
    config = load_stack_config(stack, stacks_dir)
    if CONFIG_KEY not in config:
        path = stack_file(stack, stacks_dir)
        near = difflib.get_close_matches(CONFIG_KEY, [str(k) for k in config], n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        present = ", ".join(str(k) for k in config) or "none"
        raise StackFileError(
            f"{path}: no {CONFIG_KEY!r} object under 'config:' (keys present: {present}){hint}; "
            "the cluster declaration goes there"
        )
    raw = config[CONFIG_KEY]
    if not isinstance(raw, dict):
        raise StackFileError(f"{CONFIG_KEY} must be a mapping (the cluster declaration), not a {_kind(raw)}")
    return raw


def _kind(value: object) -> str:
    """How YAML calls a value's type."""
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error as one line: what is wrong and where (1-based line and column)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(err, "context", None)
    return f"{where}{problem}" + (f" ({context})" if context else "")
