"""The ``slonk-infra`` command: validate, render and check stacks without a cloud or the Pulumi CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from slonk_infra.errors import DeclarationError
from slonk_infra.plan import build_plan
from slonk_infra.stacks import load_declaration, load_stack_config

STACKS_DIR = click.option(
    "--stacks-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Default: ./stacks"
)


def _fail(err: Exception) -> None:
    click.echo(f"error: {err}", err=True)
    sys.exit(2)


@click.group()
def main() -> None:
    """Slurm on Kubernetes, declared once for GCP, AWS or an existing cluster."""


@main.command()
@click.argument("stack")
@STACKS_DIR
def validate(stack: str, stacks_dir: Path | None) -> None:
    """Validate STACK's declaration and print a summary."""
    try:
        plan = build_plan(load_declaration(stack, stacks_dir))
    except (DeclarationError, FileNotFoundError, KeyError) as err:
        _fail(err)
        return
    decl = plan.declaration
    click.echo(f"stack {stack}: cluster {plan.name} on {decl.cloud} - OK")
    for key, value in plan.summary().items():
        click.echo(f"  {key:20} {value}")
    click.echo("  groups:")
    for g in plan.groups:
        gres = g.gres or "-"
        click.echo(f"    {g.name:18} {g.kind:3} {g.machine.name:20} x{g.replicas:<5} {gres:14} {g.hostlist}")
    click.echo(
        "  storage: " + ", ".join(f"{s.name} ({s.kind}, {s.capacity_gib} GiB at {s.mount_path})" for s in decl.storage)
    )


@main.command()
@click.argument("stack")
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output directory (default: ./out/<stack>)",
)
@STACKS_DIR
def render(stack: str, out: Path | None, stacks_dir: Path | None) -> None:
    """Run STACK's Pulumi program under the mock runtime and write what it would create."""
    from slonk_infra.render import run_program, write_render

    try:
        config = load_stack_config(stack, stacks_dir)
        build_plan(load_declaration(stack, stacks_dir))  # fail fast, with every problem listed
        run = run_program(stack, config)
    except (DeclarationError, FileNotFoundError, KeyError) as err:
        _fail(err)
        return
    target = out or Path("out") / stack
    summary = write_render(run, target)
    click.echo(f"stack {stack}: {summary['resources']} resources in {summary['seconds']} s -> {target}/")
    for typ, count in summary["by_type"].items():
        click.echo(f"  {count:5}  {typ}")
    click.echo(
        f"  kubernetes manifests: {target}/kubernetes/  slurm files: {target}/slurm/  "
        f"cloud resources: {target}/cloud/resources.json"
    )


@main.command()
@click.argument("stack")
@click.option(
    "--policy-config",
    "policy_config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("policies/policy-config.json"),
    show_default=True,
    help="The shared policy configuration (the file `pulumi preview --policy-pack-config` reads).",
)
@STACKS_DIR
def check(stack: str, policy_config: Path, stacks_dir: Path | None) -> None:
    """Run the policy pack on STACK's program offline; exit 1 on any mandatory violation."""
    from slonk_infra.policy.config import PolicyConfigError, load_policy_config
    from slonk_infra.policy.runner import PolicyRunError, check_registrations, format_report
    from slonk_infra.render import run_program

    try:
        config = load_policy_config(policy_config)
        stack_config = load_stack_config(stack, stacks_dir)
        build_plan(load_declaration(stack, stacks_dir))  # fail fast, with every problem listed
        result = check_registrations(run_program(stack, stack_config).registrations, config)
    except (DeclarationError, FileNotFoundError, KeyError, PolicyConfigError, PolicyRunError) as err:
        _fail(err)
        return
    click.echo(format_report(stack, result, str(policy_config)))
    sys.exit(1 if result.failed else 0)


if __name__ == "__main__":
    main()
