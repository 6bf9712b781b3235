"""The ``slonk-infra`` command: validate, render and check stacks without a cloud or the Pulumi CLI.

Works from any directory: ``STACK`` is a stack name (looked up in ``./stacks``, else in the stack folder
of the nearest ``Pulumi.yaml`` above) or the path to a ``Pulumi.<stack>.yaml`` file. A bad stack file or
declaration ends the command with one message naming what is wrong (exit status 2), never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from slonk_infra.accounting.records import Assoc, State, format_tres, format_wall
from slonk_infra.clouds import MissingExtraError, build_plan, require_sdk, stack_config_problems
from slonk_infra.declaration.accounting import ROOT_ACCOUNT
from slonk_infra.declaration.errors import DeclarationError, Problem, StackFileError
from slonk_infra.declaration.stacks import load_declaration, load_stack_config, stack_name
from slonk_infra.plan import ClusterPlan

# The packaged copy is the single source: policies/policy-config.json (what `pulumi preview
# --policy-pack-config` is given) points at it.
DEFAULT_POLICY_CONFIG = Path(__file__).resolve().parent / "policy" / "policy-config.json"
# What ends a command with one message (exit status 2): the stack file, the declaration, a missing extra.
INPUT_ERRORS: tuple[type[Exception], ...] = (DeclarationError, StackFileError, MissingExtraError)

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
    help="A Pulumi program file to run instead of slonk-infra's own program (e.g. your project's __main__.py), "
    "under its project's name (the nearest Pulumi.yaml); the stack file then needs no slonk-infra:cluster. "
    "Resource transforms it registers are applied as `pulumi preview` applies them.",
)


def _fail(err: Exception) -> NoReturn:
    click.echo(f"error: {err}", err=True)
    sys.exit(2)


STRICT = click.option(
    "--strict",
    is_flag=True,
    help="Refuse the declaration's warnings (a user without a key, a pool in no partition, ...) as errors: for CI.",
)


def _plan(stack: str, stacks_dir: Path | None, strict: bool = False, deploys: bool = False) -> ClusterPlan:
    """Read and validate the declaration, listing every problem, before any resource is declared.

    Warnings go to standard error, one per line; ``strict`` ends the command on them (exit status 2) as
    it would on an error. ``deploys``: the command runs the program, so the cloud's provider SDK (its
    package extra) must be installed, and the warnings are printed by the program as it runs (``Cluster``
    logs each, as in ``pulumi preview``), not here a second time.
    """
    try:
        plan = build_plan(load_declaration(stack, stacks_dir))
        against_config = stack_config_problems(plan, load_stack_config(stack, stacks_dir))
        if against_config:
            raise DeclarationError(against_config)
        if deploys:
            require_sdk(plan.declaration.cloud)
    except INPUT_ERRORS as err:
        _fail(err)
    _warn(plan.warnings, strict, show=not deploys or strict)
    return plan


def _warn(warnings: Sequence[Problem], strict: bool, show: bool = True) -> None:
    """Print each warning by field (unless the program prints them); with ``strict``, stop as on an error."""
    for problem in warnings if show else ():
        click.echo(f"warning: {problem}", err=True)
    if strict and warnings:
        _fail(ValueError(f"{len(warnings)} warning(s) refused by --strict"))


def _program_warnings(plans: Iterable[ClusterPlan], strict: bool) -> None:
    """A user's program declares its own clusters (the stack file need not): ``strict`` refuses their
    warnings once it has run (the run printed them)."""
    _warn([w for plan in plans for w in plan.warnings], strict, show=False)


# The commands that run a Pulumi program in this process.
PROGRAM_COMMANDS = frozenset({"render", "check"})


@click.group(epilog=STACK_HELP)
@click.version_option(package_name="slonk-infra", prog_name="slonk-infra")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Slurm on Kubernetes, declared once for GCP, AWS or an existing cluster."""
    if ctx.invoked_subcommand in PROGRAM_COMMANDS:
        from slonk_infra.offline.heap import few_full_collections, freeze_at_exit

        # A program run builds a large heap (an L render: 563 provider modules, every registration, the
        # files) and ends the process: the collector need not rescan it over and over meanwhile, or at exit.
        ctx.with_resource(few_full_collections())
        freeze_at_exit()


@main.command(epilog=STACK_HELP)
@click.argument("stack")
@STRICT
@STACKS_DIR
def validate(stack: str, strict: bool, stacks_dir: Path | None) -> None:
    """Validate STACK's declaration and print a summary; warnings go to standard error."""
    plan = _plan(stack, stacks_dir, strict)
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
@STRICT
@STACKS_DIR
def render(stack: str, out: Path | None, program: Path | None, strict: bool, stacks_dir: Path | None) -> None:
    """Run STACK's Pulumi program under the mock runtime and write what it would create."""
    from slonk_infra.offline.render import run_program, write_render

    plan = _plan(stack, stacks_dir, strict, deploys=True) if program is None else None
    name = stack_name(stack)
    try:
        run = run_program(name, load_stack_config(stack, stacks_dir), program)
    except INPUT_ERRORS as err:  # a --program meets the SDK check as it runs
        _fail(err)
    _program_warnings(run.plans.values() if program else (), strict)
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
        f"cloud resources: {target}/cloud/resources.json  exports: {target}/outputs.json"
    )
    if run.transforms_run:
        click.echo(f"  {run.transforms_note()}")
    for line in accounting_lines(stack, plan) if plan is not None else []:
        click.echo(line)


@main.command(epilog=STACK_HELP)
@click.argument("stack")
@click.option(
    "--policy-config",
    "policy_config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Your team's policy configuration: a copy of the packaged policy-config.json with your registry, image "
    "and digest (the file `pulumi preview --policy-pack-config` reads). Default: the packaged one.",
)
@click.option(
    "--all", "show_all", is_flag=True, help="Text format: list every violation instead of one line per finding."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
    help="Report format: the CI log text, a JSON report, or SARIF 2.1.0 (GitHub code scanning).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to this file; standard output then shows the text report.",
)
@PROGRAM
@STRICT
@STACKS_DIR
def check(
    stack: str,
    policy_config: Path | None,
    show_all: bool,
    fmt: str,
    out: Path | None,
    program: Path | None,
    strict: bool,
    stacks_dir: Path | None,
) -> None:
    """Run the policy pack on STACK's program offline; exit 1 on any mandatory violation."""
    from slonk_infra.offline.render import run_program
    from slonk_infra.policy.config import PolicyConfigError, load_policy_config
    from slonk_infra.policy.runner import PolicyRunError, check_registrations, format_report

    source = policy_config or DEFAULT_POLICY_CONFIG
    plan = _plan(stack, stacks_dir, strict, deploys=True) if program is None else None
    name = stack_name(stack)
    failures: tuple[type[Exception], ...] = (*INPUT_ERRORS, PolicyConfigError, PolicyRunError)
    try:
        config = load_policy_config(source)
        run = run_program(name, load_stack_config(stack, stacks_dir), program)
        result = check_registrations(run.registrations, config)
    except failures as err:
        _fail(err)
    _program_warnings(run.plans.values() if program else (), strict)
    shown = str(policy_config) if policy_config else "packaged policy-config.json"
    # One order and one dedupe for every format (slonk_infra/policy/report_formats.py).
    from slonk_infra.declaration.stacks import stack_file
    from slonk_infra.policy.report_formats import render as render_report

    report = render_report(fmt, name, result, config, shown, stack_file(stack, stacks_dir), every=show_all)
    if out is not None:
        try:
            out.write_text(report if report.endswith("\n") else report + "\n", encoding="utf-8")
        except OSError as err:
            _fail(err)
        report = format_report(name, result, shown, group=not show_all) + f"\n{fmt} report written to {out}"
    click.echo(report, nl=not report.endswith("\n"))
    if fmt == "text" and out is None and plan is not None:
        for line in accounting_lines(stack, plan):
            click.echo(line)
    if run.transforms_run:
        # Keep a JSON or SARIF standard output parseable.
        click.echo(run.transforms_note(), err=out is None and fmt != "text")
    sys.exit(1 if result.failed else 0)


def _kube_apis(kubeconfig: str | None, context: str | None) -> tuple[Any, Any]:
    """The official client's AppsV1Api and CoreV1Api for a kubeconfig file and context (defaults: $KUBECONFIG or
    ~/.kube/config, and its current context)."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=kubeconfig, context=context)
    return client.AppsV1Api(api), client.CoreV1Api(api)


@main.command()
@click.option(
    "--stack",
    default=None,
    help="Read the namespace (and an existing cluster's kubeconfig/context) from STACK's declaration.",
)
@click.option("--kubeconfig", default=None, help="Kubeconfig file. Default: $KUBECONFIG, else ~/.kube/config.")
@click.option("--context", default=None, help="Kubeconfig context. Default: the current context.")
@click.option("-n", "--namespace", default=None, help="The Slurm namespace. Default: the stack's, else slurm.")
@click.option(
    "--slurm-states/--no-slurm-states",
    default=True,
    show_default=True,
    help="Count the Slurm node states the operations controller writes on the worker pods (their Slurm state annotation).",
)
@STACKS_DIR
def status(
    stack: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    slurm_states: bool,
    stacks_dir: Path | None,
) -> None:
    """Whether the deployed cluster is really ready: ready/desired pods of each worker group's StatefulSet,
    the controller, login and the rest, the login address, and Slurm node states.

    `pulumi up` does not wait for the workers (GPU capacity may take long); run this until it prints
    `ready` (exit status 0; 1 while something is not ready; 2 when the cluster cannot be read).
    Read-only: it lists StatefulSets, Deployments and pods and reads the login Service.
    """
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError

    from slonk_infra.offline.readiness import format_status, read_status

    if stack is not None:
        decl = _plan(stack, stacks_dir).declaration
        namespace = namespace or decl.kubernetes.namespace
        # An existing cluster's kubeconfig and context as declared; a created cluster's kubeconfig is the
        # stack's `kubeconfig` output (docs/readiness.md).
        kubeconfig = kubeconfig or _plain_path(decl.kubernetes.kubeconfig)
        context = context or _plain_text(decl.kubernetes.context)
    try:
        apps, core = _kube_apis(kubeconfig, context)
        found = read_status(apps, core, namespace or "slurm", slurm_states=slurm_states)
    except (ApiException, ConfigException, HTTPError, OSError) as err:  # HTTPError: the API server unreachable
        _fail(RuntimeError(f"cannot read the cluster: {_reason(err)}"))
    click.echo(format_status(found))
    sys.exit(0 if found.is_ready else 1)


def _reason(err: Exception) -> str:
    """The first line of what went wrong reading the cluster (a refused connection's own reason, not
    urllib3's retry wrapper)."""
    inner = getattr(err, "reason", None)
    text = str(inner if isinstance(inner, Exception) else err).strip().strip("'\"")
    return text.splitlines()[0] if text else type(err).__name__


def _plain_text(value: object) -> str | None:
    """A declared kubeconfig / context value, when it is plain text (not a program's Output)."""
    return value if isinstance(value, str) and value else None


def _plain_path(value: object) -> str | None:
    """A declared kubeconfig that names a file (the field also takes the kubeconfig's contents)."""
    text = _plain_text(value)
    if text is None or "\n" in text or not Path(text).expanduser().is_file():
        return None
    return str(Path(text).expanduser())


@main.command(epilog=STACK_HELP)
@click.argument("stack")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the desired state as the reconciler reads it (the ConfigMap key desired.json).",
)
@STRICT
@STACKS_DIR
def accounting(stack: str, as_json: bool, strict: bool, stacks_dir: Path | None) -> None:
    """Print the QOS, accounts and users' associations STACK's slurm.accounting asks slurmdbd to hold."""
    from slonk_infra.accounting.desired import desired_state
    from slonk_infra.accounting.wire import dump_state

    plan = _plan(stack, stacks_dir, strict)
    spec = plan.declaration.slurm.accounting
    if spec is None:
        click.echo(f"stack {stack_name(stack)}: cluster {plan.name} has no slurm.accounting; slurmdbd holds nothing")
        return
    if as_json:
        click.echo(dump_state(desired_state(spec, plan.name)), nl=False)
        return
    for line in accounting_lines(stack, plan):
        click.echo(line)


def accounting_lines(stack: str, plan: ClusterPlan) -> list[str]:
    """What ``slonk-infra accounting`` prints: the QOS and the association tree slurmdbd is to hold (none
    without slurm.accounting). ``render`` and ``check`` print it too, so a change's effect is seen there."""
    from slonk_infra.accounting.desired import desired_state

    spec = plan.declaration.slurm.accounting
    if spec is None:
        return []
    state = desired_state(spec, plan.name)
    out = [f"stack {stack_name(stack)}: cluster {plan.name}, slurmdbd ({spec.database.kind}) is to hold:"]
    out.append("  qos:" + ("" if state.qos else " (only Slurm's normal)"))
    for q in (state.qos[n] for n in sorted(state.qos)):
        out.append(
            f"    {q.name:16} "
            + _settings(
                Priority=q.priority or None,
                Preempt=",".join(sorted(q.preempt)) or None,
                MaxTRESPerUser=format_tres(q.max_tres_per_user) or None,
                MaxTRESPerAccount=format_tres(q.max_tres_per_account) or None,
                MaxWall=format_wall(q.max_wall) if q.max_wall is not None else None,
            )
        )
    out.append("  associations:" + ("" if state.assocs else " (none declared)"))
    for a in _tree(state):
        if a.user is None:
            out.append(
                f"    account {a.account:16} "
                + _settings(
                    Parent=a.parent,
                    Fairshare=a.fairshare,
                    GrpTRES=format_tres(a.grp_tres) or None,
                    QOS=",".join(sorted(a.qos)) or None,
                    DefaultQOS=a.default_qos,
                )
            )
        else:
            default = state.users.get(a.user)
            mark = " (default account)" if default is not None and default.default_account == a.account else ""
            out.append(f"      user {a.user:16} " + _settings(GrpTRES=format_tres(a.grp_tres) or None) + mark)
    return out


def _settings(**values: object) -> str:
    """``Key=value`` for each value that is set, as sacctmgr names them; ``-`` when none is."""
    return " ".join(f"{k}={v}" for k, v in values.items() if v is not None) or "-"


def _tree(state: State) -> list[Assoc]:
    """Accounts depth first from root's children, each followed by its users' associations."""
    accounts = {a.account: a for a in state.assocs.values() if a.user is None}
    users = sorted((a for a in state.assocs.values() if a.user is not None), key=lambda a: str(a.user))
    out: list[Assoc] = []

    def walk(parent: str | None, seen: frozenset[str]) -> None:
        for name in sorted(n for n, a in accounts.items() if a.parent == parent and n not in seen):
            out.append(accounts[name])
            out.extend(u for u in users if u.account == name)
            walk(name, seen | {name})

    walk(ROOT_ACCOUNT, frozenset())
    return out


if __name__ == "__main__":
    main()
