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

from slonk_infra.health.config import DEFAULT_SPEC_PATH, HealthSpec, SpecError, describe, load_spec
from slonk_infra.health.context import MODES, CheckContext, Mode
from slonk_infra.health.drain import drain
from slonk_infra.health.identity import fingerprint
from slonk_infra.health.nvml import Backend, Nvml, NvmlError, RecordingBackend, ReplayBackend
from slonk_infra.health.publish import compact_verdict
from slonk_infra.health.publish import publish as publish_verdict
from slonk_infra.health.result import EXIT_USAGE, DrainOutcome, Fingerprint, HealthReport
from slonk_infra.health.runner import plan, run_checks
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
) -> int:
    """One run: returns the exit code after printing the report."""
    started = time.monotonic()
    try:
        spec = resolve_spec(spec_path, overrides)
        ctx = CheckContext(spec=spec, mode=mode, job_gpus=job_gpus if mode in ("prolog", "epilog") else None)
        names, skipped = plan(ctx, only, skip)
    except (SpecError, ValueError) as exc:
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

    recorder: RecordingBackend | None = None
    # Before NVML is open every GPU check but gpu-count reads as "NVML unavailable": those count as wanted
    # too, or a run of --check gpu-ecc (or --skip gpu-count) would never open NVML and pass a faulty GPU.
    waiting = [s for s in skipped if s.reason.startswith("NVML unavailable")]
    gpu_wanted = spec.gpu.count > 0 and any(n.startswith("gpu-") for n in [*names, *(s.check for s in waiting)])
    if gpu_wanted:
        ctx.nvml, ctx.nvml_error, recorder = open_nvml(nvml_replay, nvml_record)
        names, skipped = plan(ctx, only, skip)
    try:
        results = run_checks(ctx, names)
        ident = fingerprint(
            ctx.nvml,
            instance_id=instance_id,
            instance_id_file=Path(spec.instance_id_file) if spec.instance_id_file else None,
            machine_id_file=Path(spec.machine_id_file),
        )
    finally:
        if ctx.nvml is not None:
            ctx.nvml.close()
        if recorder is not None and nvml_record is not None:
            _write(nvml_record, json.dumps(recorder.recording(), indent=1, sort_keys=True) + "\n")

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
