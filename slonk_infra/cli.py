"""The ``slonk-infra`` command: validate, render and check stacks without a cloud or the Pulumi CLI.

Works from any directory: ``STACK`` is a stack name (looked up in ``./stacks``, else in the stack folder
of the nearest ``Pulumi.yaml`` above) or the path to a ``Pulumi.<stack>.yaml`` file. A bad stack file or
declaration ends the command with one message naming what is wrong (exit status 2), never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import DeclarationError, StackFileError
from slonk_infra.declaration.stacks import load_declaration, load_stack_config, stack_name
from slonk_infra.plan import ClusterPlan

# The packaged copy is the single source: policies/policy-config.json (what `pulumi preview
# --policy-pack-config` is given) points at it.
DEFAULT_POLICY_CONFIG = Path(__file__).resolve().parent / "policy" / "policy-config.json"
INPUT_ERRORS: tuple[type[Exception], ...] = (DeclarationError, StackFileError)

STACK_HELP = "STACK is a stack name (local, gcp, aws: ./stacks/Pulumi.STACK.yaml) or a path to a Pulumi.<stack>.yaml."
STACKS_DIR = click.option(
    "--stacks-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where named stacks live. Default: ./stacks, else the stackConfigDir of the nearest Pulumi.yaml above.",
)


PROGRAM = click.option(
    "--program",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A Pulumi program file to run instead of slonk-infra's own program (e.g. your project's __main__.py). "
    "Resource transforms it registers are applied as `pulumi preview` applies them.",
)


def _fail(err: Exception) -> NoReturn:
    click.echo(f"error: {err}", err=True)
    sys.exit(2)


def _plan(stack: str, stacks_dir: Path | None) -> ClusterPlan:
    """Read and validate the declaration, listing every problem, before any resource is declared."""
    try:
        return build_plan(load_declaration(stack, stacks_dir))
    except INPUT_ERRORS as err:
        _fail(err)


@click.group(epilog=STACK_HELP)
@click.version_option(package_name="slonk-infra", prog_name="slonk-infra")
def main() -> None:
    """Slurm on Kubernetes, declared once for GCP, AWS or an existing cluster."""


@main.command(epilog=STACK_HELP)
@click.argument("stack")
@STACKS_DIR
def validate(stack: str, stacks_dir: Path | None) -> None:
    """Validate STACK's declaration and print a summary."""
    plan = _plan(stack, stacks_dir)
    decl = plan.declaration
    click.echo(f"stack {stack_name(stack)}: cluster {plan.name} on {decl.cloud} - OK")
    for key, value in plan.summary().items():
        click.echo(f"  {key:20} {value}")
    click.echo("  groups:")
    for g in plan.groups:
        gres = g.gres or "-"
        click.echo(f"    {g.name:18} {g.kind:3} {g.machine.name:20} x{g.replicas:<5} {gres:14} {g.hostlist}")
    click.echo(
        "  storage: " + ", ".join(f"{s.name} ({s.kind}, {s.capacity_gib} GiB at {s.mount_path})" for s in decl.storage)
    )


@main.command(epilog=STACK_HELP)
@click.argument("stack")
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder. Default: out/<stack name> under the current directory.",
)
@PROGRAM
@STACKS_DIR
def render(stack: str, out: Path | None, program: Path | None, stacks_dir: Path | None) -> None:
    """Run STACK's Pulumi program under the mock runtime and write what it would create."""
    from slonk_infra.offline.render import program_file, run_program, write_render

    _plan(stack, stacks_dir)
    name = stack_name(stack)
    try:
        run = run_program(name, load_stack_config(stack, stacks_dir), program_file(program) if program else None)
    except INPUT_ERRORS as err:
        _fail(err)
    target = out or Path("out") / name
    try:
        summary = write_render(run, target)
    except OSError as err:
        _fail(err)
    click.echo(f"stack {name}: {summary['resources']} resources in {summary['seconds']} s -> {target}/")
    for typ, count in summary["by_type"].items():
        click.echo(f"  {count:5}  {typ}")
    click.echo(
        f"  kubernetes manifests: {target}/kubernetes/  slurm files: {target}/slurm/  "
        f"cloud resources: {target}/cloud/resources.json"
    )
    if run.transforms_run:
        click.echo(f"  {run.transforms_note()}")


@main.command(epilog=STACK_HELP)
@click.argument("stack")
@click.option(
    "--policy-config",
    "policy_config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The shared policy configuration (the file `pulumi preview --policy-pack-config` reads). "
    "Default: the packaged one, policies/policy-config.json in a checkout.",
)
@click.option(
    "--all", "show_all", is_flag=True, help="List every violation instead of one line per policy and resource."
)
@PROGRAM
@STACKS_DIR
def check(
    stack: str, policy_config: Path | None, show_all: bool, program: Path | None, stacks_dir: Path | None
) -> None:
    """Run the policy pack on STACK's program offline; exit 1 on any mandatory violation."""
    from slonk_infra.offline.render import program_file, run_program
    from slonk_infra.policy.config import PolicyConfigError, load_policy_config
    from slonk_infra.policy.runner import PolicyRunError, check_registrations, format_report

    source = policy_config or DEFAULT_POLICY_CONFIG
    _plan(stack, stacks_dir)
    name = stack_name(stack)
    try:
        config = load_policy_config(source)
        run = run_program(name, load_stack_config(stack, stacks_dir), program_file(program) if program else None)
        result = check_registrations(run.registrations, config)
    except (DeclarationError, StackFileError, PolicyConfigError, PolicyRunError) as err:
        _fail(err)
    shown = str(policy_config) if policy_config else "packaged policy-config.json"
    click.echo(format_report(name, result, shown, group=not show_all))
    if run.transforms_run:
        click.echo(run.transforms_note())
    sys.exit(1 if result.failed else 0)


if __name__ == "__main__":
    main()
