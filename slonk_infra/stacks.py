"""Reading stack files: ``stacks/Pulumi.<stack>.yaml`` holds the declaration under ``slonk-infra:cluster``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

PROJECT = "slonk-infra"
CONFIG_KEY = f"{PROJECT}:cluster"


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    """Path of a stack given by name (``local``) or by path to a ``Pulumi.<stack>.yaml`` file."""
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml") and candidate.exists():
        return candidate
    directory = stacks_dir or Path.cwd() / "stacks"
    path = directory / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in directory.glob("Pulumi.*.yaml"))
        raise FileNotFoundError(f"no stack {stack!r} in {directory}; known stacks: {', '.join(known) or '(none)'}")
    return path


def load_stack_config(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The whole ``config:`` mapping of a stack file."""
    data = yaml.safe_load(stack_file(stack, stacks_dir).read_text(encoding="utf-8")) or {}
    config: dict[str, Any] = data.get("config") or {}
    return config


def load_declaration(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The raw cluster declaration of a stack (validated later by :func:`slonk_infra.plan.build_plan`)."""
    config = load_stack_config(stack, stacks_dir)
    if CONFIG_KEY not in config:
        raise KeyError(f"stack {stack!r} has no {CONFIG_KEY!r} config object")
    raw: dict[str, Any] = config[CONFIG_KEY]
    return raw
