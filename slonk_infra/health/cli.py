"""``slonk-health`` (also ``python -m slonk_infra.health``): run the node health checks once.

Where it runs (see :mod:`slonk_infra.health` for the exit codes)::

    slonk-health --mode boot                          # pod start: every check
    slonk-health --mode interval --drain              # slurm.conf HealthCheckProgram
    slonk-health --mode prolog                        # Prolog / Epilog: the fast subset
    slonk-health --nvml-replay rec.json --gpus 8      # judge recorded NVML answers

Settings come from ``--spec`` (default /etc/slonk/health.json when present) and the flags that
override single values; never from environment variables, which slurmd does not pass on, except
SLURMD_NODENAME, which slurmd itself sets for the programs it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from slonk_infra.health.checks import GPU_CHECKS
from slonk_infra.health.config import DEFAULT_SPEC_PATH, HealthSpec, SpecError, describe, load_spec
from slonk_infra.health.context import MODES, CheckContext, Mode
from slonk_infra.health.drain import drain
from slonk_infra.health.giveup import NVML_CALL_S, gave_up, merge, nvml_call_seconds, still_stuck_result
from slonk_infra.health.identity import fingerprint
from slonk_infra.health.isolate import Outcome, Sink, run_isolated
from slonk_infra.health.nvml import Backend, Nvml, NvmlError, RecordingBackend, ReplayBackend
from slonk_infra.health.publish import compact_verdict
from slonk_infra.health.publish import publish as publish_verdict
from slonk_infra.health.result import EXIT_USAGE, CheckResult, DrainOutcome, Fingerprint, HealthReport, Skipped
from slonk_infra.health.runner import plan, run_check
from slonk_infra.health.state import NodeState
from slonk_infra.health.verdict import human_lines, overall, reason_for_drain


def resolve_node_name(flag: str | None) -> str:
    """--node-name, else SLURMD_NODENAME (set by slurmd for HealthCheckProgram, Prolog, Epilog), else the host name."""
    return flag or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def resolve_spec(path: Path | None, overrides: dict[str, dict[str, Any]]) -> HealthSpec:
    """Load the spec (or the defaults) and apply flag overrides, validating the result."""
    if path is None:
        spec = load_spec(DEFAULT_SPEC_PATH) if DEFAULT_SPEC_PATH.exists() else HealthSpec()
    else:
        spec = load_spec(path)
    data = spec.model_dump(by_alias=True)
    for section, values in overrides.items():
        data[section].update({k: v for k, v in values.items() if v is not None})
    try:
        return HealthSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"after flag overrides: {describe(exc)}") from None


def open_nvml(
    replay: Path | None, record: Path | None
) -> tuple[Nvml | None, NvmlError | None, RecordingBackend | None]:
    """NVML from a recording or the driver, optionally recorded; (None, error) when it cannot start."""
    inner: Backend | None = None
    error: NvmlError | None = None
    try:
        if replay is not None:
            inner = ReplayBackend.from_file(replay)
        else:
            from slonk_infra.health.nvml_live import LiveBackend

            inner = LiveBackend()
    except NvmlError as exc:
        error = exc
    recorder = RecordingBackend(inner, error) if record is not None else None
    backend: Backend | None = recorder if recorder is not None and inner is not None else inner
    return (Nvml(backend) if backend is not None else None), error, recorder


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: readers never see half a report.

    Each writer takes a temporary file of its own: slurmd runs one prolog per job and one epilog per
    job, so two jobs allocated on one node together write the same report at the same moment, and a
    shared temporary name let one writer move the other's file away (a traceback, so "Prolog error").
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(name, 0o644)  # mkstemp makes it 0600; the report was world-readable before
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--mode", type=click.Choice(MODES), default="boot", show_default=True, help="Which checks run.")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="HealthSpec JSON/YAML file.")
@click.option("--gpus", type=click.IntRange(0, 64), help="GPUs this node must have (overrides gpu.count).")
@click.option("--tpu-chips", type=click.IntRange(0, 16), help="TPU chips this host must see (tpu.chipsPerHost).")
@click.option("--scratch", help="Scratch path (disk.scratchPath).")
@click.option("--home", help="Shared home path (disk.homePath).")
@click.option("--check", "only", multiple=True, help="Run only this check (repeatable).")
@click.option("--skip", multiple=True, help="Leave this check out (repeatable).")
@click.option("--drain/--no-drain", default=False, show_default=True, help="Drain the Slurm node on failure.")
@click.option(
    "--publish/--no-publish",
    default=False,
    show_default=True,
    help="Write the verdict into the Slurm node's Comment, where the operations controller reads it.",
)
@click.option("--node-name", help="Slurm node name (default: SLURMD_NODENAME, else the host name).")
@click.option("--scontrol", default="scontrol", show_default=True, help="scontrol to drain with.")
@click.option("--instance-id", help="Cloud instance id, for identity when there are no GPUs.")
@click.option("--report-file", type=click.Path(path_type=Path), help="Also write the report here (atomically).")
@click.option("--nvml-replay", type=click.Path(exists=True, path_type=Path), help="Answer NVML from a recording.")
@click.option("--nvml-record", type=click.Path(path_type=Path), help="Record every NVML answer to this file.")
@click.option(
    "--job-gpus",
    envvar="SLURM_JOB_GPUS",
    help="The job's GPUs, e.g. 0,1,2,3 (default: SLURM_JOB_GPUS, which slurmd gives the prolog and epilog).",
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=0.1),
    help="Conclude this many seconds into the run with the checks done by then (the rest are reported not "
    "run; a step that is not NVML's fails). healthcheck.sh passes what slurmd's 60 s leave once the "
    "scontrol calls have had theirs. Default: none. An NVML call unanswered for 15 s fails either way.",
)
@click.option(
    "--nvml-call-limit",
    type=click.FloatRange(min=0.1),
    default=NVML_CALL_S,
    show_default=True,
    help="Seconds one NVML call may go unanswered before it counts as stuck (replace-machine); listening "
    "for XID events gets health.gpu.xidWaitMs more.",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    help="Where a run leaves the next one an NVML call still stuck and the GPUs' fingerprint. Default: none.",
)
def command(
    mode: Mode,
    spec_path: Path | None,
    gpus: int | None,
    tpu_chips: int | None,
    scratch: str | None,
    home: str | None,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    drain: bool,
    publish: bool,
    node_name: str | None,
    scontrol: str,
    instance_id: str | None,
    report_file: Path | None,
    nvml_replay: Path | None,
    nvml_record: Path | None,
    job_gpus: str | None,
    deadline: float | None,
    nvml_call_limit: float,
    state_dir: Path | None,
) -> None:
    """Check this node's GPUs, TPUs and disks; print one JSON report; exit with the worst action's code."""
    code = run(
        mode=mode,
        spec_path=spec_path,
        overrides={
            "gpu": {"count": gpus},
            "tpu": {"chipsPerHost": tpu_chips},
            "disk": {"scratchPath": scratch, "homePath": home},
        },
        only=only,
        skip=skip,
        want_drain=drain,
        want_publish=publish,
        node=resolve_node_name(node_name),
        scontrol=scontrol,
        instance_id=instance_id,
        report_file=report_file,
        nvml_replay=nvml_replay,
        nvml_record=nvml_record,
        job_gpus=parse_job_gpus(job_gpus),
        deadline_s=deadline,
        nvml_call_limit=nvml_call_limit,
        state_dir=state_dir,
    )
    sys.exit(code)


def parse_job_gpus(text: str | None) -> tuple[int, ...] | None:
    """``SLURM_JOB_GPUS`` (``0,1,2,3``) as numbers; None when unset, empty or not a list of numbers."""
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def run(
    *,
    mode: Mode,
    spec_path: Path | None,
    overrides: dict[str, dict[str, Any]],
    only: tuple[str, ...],
    skip: tuple[str, ...],
    want_drain: bool,
    node: str,
    want_publish: bool = False,
    scontrol: str,
    instance_id: str | None,
    report_file: Path | None,
    nvml_replay: Path | None,
    nvml_record: Path | None,
    job_gpus: tuple[int, ...] | None = None,
    deadline_s: float | None = None,
    nvml_call_limit: float = NVML_CALL_S,
    state_dir: Path | None = None,
) -> int:
    """One run: returns the exit code after printing the report.

    The checks run in a child (:mod:`slonk_infra.health.isolate`); this process judges, drains, publishes
    and reports, also when the child is stuck for good.
    """
    started = time.monotonic()
    try:
        spec = resolve_spec(spec_path, overrides)
        ctx = CheckContext(spec=spec, mode=mode, job_gpus=job_gpus if mode in ("prolog", "epilog") else None)
        names, skipped = plan(ctx, only, skip)
        if nvml_replay is not None:  # a recording that cannot be read is the caller's mistake, not the node's
            with contextlib.suppress(NvmlError):  # a recorded init failure is an answer to judge
                ReplayBackend.from_file(nvml_replay)
    except (SpecError, ValueError, OSError) as exc:
        report = HealthReport(
            mode=mode,
            node=node,
            fingerprint=Fingerprint(kind="unknown", value=""),
            ok=False,
            action="none",
            exit_code=EXIT_USAGE,
            duration_ms=int((time.monotonic() - started) * 1000),
            results=[],
            error=f"bad configuration, no check ran: {exc}",
        )
        return _emit(report, report_file)

    state = NodeState(state_dir)
    # Before NVML is open every GPU check but gpu-count reads as "NVML unavailable": those count as wanted
    # too, or a run of --check gpu-ecc (or --skip gpu-count) would never open NVML and pass a faulty GPU.
    waiting = [s for s in skipped if s.reason.startswith("NVML unavailable")]
    gpu_wanted = spec.gpu.count > 0 and any(n.startswith("gpu-") for n in [*names, *(s.check for s in waiting)])
    judged: list[CheckResult] = []
    stuck = state.stuck() if gpu_wanted else None
    if stuck is not None:  # NVML is still held by an earlier run's call: asking again would only add one
        judged.append(still_stuck_result(stuck))
        gpu_wanted = False
        names, skipped = _without_gpu_checks(names, skipped, f"not run: NVML is still stuck (pid {stuck.pid})")

    def work(sink: Sink) -> None:  # in the child
        todo = names
        recorder: RecordingBackend | None = None
        if gpu_wanted:
            sink.step("nvml-open")
            sink.read((None, "init"))  # nvmlInit is no read of a value, but it can be stuck the same way
            ctx.nvml, ctx.nvml_error, recorder = open_nvml(nvml_replay, nvml_record)
            sink.read(None)
            if ctx.nvml is not None:
                ctx.nvml.watch = sink.read
            todo, again = plan(ctx, only, skip)
            sink.plan(todo, again)
        try:
            for name in todo:
                sink.step(name)
                sink.result(run_check(name, ctx))
            sink.step("identity")
            sink.ident(_fingerprint(ctx.nvml, instance_id, spec))
        finally:
            sink.step("nvml-close")
            if ctx.nvml is not None:
                sink.read((None, "shutdown"))
                ctx.nvml.close()
                sink.read(None)
            if recorder is not None:
                sink.recording(recorder.recording())

    outcome = run_isolated(
        work,
        names,
        skipped,
        deadline_s=deadline_s,
        stuck_after=lambda read: nvml_call_seconds(spec, read, nvml_call_limit),
    )
    if outcome.recording is not None and nvml_record is not None:
        _write(nvml_record, json.dumps(outcome.recording, indent=1, sort_keys=True) + "\n")
    results, skipped, ident = _judge(outcome, judged, state, mode, instance_id, spec, deadline_s)
    return _conclude(mode, node, ident, results, skipped, started, want_drain, want_publish, scontrol, report_file)


def _without_gpu_checks(names: list[str], skipped: list[Skipped], why: str) -> tuple[list[str], list[Skipped]]:
    """The plan with every GPU check but ``gpu-count`` (which is judged already) not run for ``why``."""
    kept = [s for s in skipped if s.check not in GPU_CHECKS]
    return [n for n in names if n not in GPU_CHECKS], [
        *kept,
        *(Skipped(check=n, reason=why) for n in GPU_CHECKS if n != "gpu-count"),
    ]


def _judge(
    outcome: Outcome,
    judged: list[CheckResult],
    state: NodeState,
    mode: Mode,
    instance_id: str | None,
    spec: HealthSpec,
    deadline_s: float | None,
) -> tuple[list[CheckResult], list[Skipped], Fingerprint]:
    """The results, the checks not run and the machine's fingerprint from what the child said and how its
    watch ended; a child left stuck in NVML is recorded for the next runs."""
    results, skipped = merge(judged, outcome.results, outcome.skipped)
    if outcome.ending != "done":
        given_up = gave_up(outcome, deadline_s, spec)
        results, skipped = merge(results, given_up.results, [*skipped, *given_up.not_run])
        if given_up.note:
            click.echo(f"slonk-health {mode}: {given_up.note}", err=True)
        if given_up.stuck:
            state.record_stuck(outcome.pid, time.time(), given_up.results[0].reason)
    ident = outcome.ident if outcome.ending == "done" else None
    if ident is not None and ident.kind == "gpu-uuids":
        state.keep_fingerprint(ident)
        return results, skipped, ident
    # NVML did not name the GPUs this run (stuck, or not asked): the last run that did names this machine.
    kept = state.fingerprint() if spec.gpu.count > 0 else None
    return results, skipped, kept or ident or _fingerprint(None, instance_id, spec)


def _fingerprint(nvml: Nvml | None, instance_id: str | None, spec: HealthSpec) -> Fingerprint:
    return fingerprint(
        nvml,
        instance_id=instance_id,
        instance_id_file=Path(spec.instance_id_file) if spec.instance_id_file else None,
        machine_id_file=Path(spec.machine_id_file),
    )


def _conclude(
    mode: Mode,
    node: str,
    ident: Fingerprint,
    results: list[CheckResult],
    skipped: list[Skipped],
    started: float,
    want_drain: bool,
    want_publish: bool,
    scontrol: str,
    report_file: Path | None,
) -> int:
    """From the results to the exit code: drain and publish as asked, print the report."""
    ok, action, code = overall(results)
    outcome: DrainOutcome | None = None
    reason = reason_for_drain(results)
    if want_drain:
        outcome = (
            drain(node, reason, scontrol=scontrol)
            if reason
            else DrainOutcome(requested=True, node=node, note="healthy: nothing to drain")
        )
    report = HealthReport(
        mode=mode,
        node=node,
        fingerprint=ident,
        ok=ok,
        action=action,
        exit_code=code,
        duration_ms=int((time.monotonic() - started) * 1000),
        results=results,
        skipped=skipped,
        drain=outcome,
    )
    if want_publish:
        failed = publish_verdict(node, compact_verdict(report), scontrol=scontrol)
        if failed:
            click.echo(f"slonk-health: could not publish the verdict on {node}: {failed}", err=True)
    return _emit(report, report_file)


def _emit(report: HealthReport, report_file: Path | None) -> int:
    text = report.model_dump_json(by_alias=True, indent=2)
    if report_file is not None:
        # The file is a side channel (the verdict travels by exit code and the node's Comment): a report
        # path a job made unwritable (a directory of that name in the shared /tmp) must not fail the
        # prolog and so drain the node.
        try:
            _write(report_file, text + "\n")
        except OSError as exc:
            click.echo(f"slonk-health: could not write the report to {report_file}: {exc}", err=True)
    click.echo(text)
    for line in human_lines(report):
        click.echo(line, err=True)
    return report.exit_code


def main() -> None:
    """Console-script entry point."""
    command()
