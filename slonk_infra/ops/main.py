"""``slonk-ops``: the controller's process. Reads its config, serves metrics, ticks until SIGTERM.

Inside the cluster (what :mod:`slonk_infra.kube.operations` deploys)::

    slonk-ops --config /etc/slonk-ops/config.yaml

The namespace comes from ``--namespace`` or ``POD_NAMESPACE`` (the downward API). ``--kube-host``
and ``--kube-token-file`` point it at an API server from outside the cluster; ``--once`` runs one
tick and prints its report as JSON (exit 1 when an API could not be reached).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import click

from slonk_infra import vocab
from slonk_infra.ops.cloud import CloudMachines
from slonk_infra.ops.config import (
    DEFAULT_CONFIG_PATH,
    CloudSection,
    ControllerConfig,
    OperationsSpec,
    SpecError,
    default_slurmrestd_url,
    load_config,
)
from slonk_infra.ops.controller import Controller, TickReport, cloud_pools
from slonk_infra.ops.kube_api import KubeApi
from slonk_infra.ops.metrics import Metrics
from slonk_infra.ops.records import JobRecord, StateStore
from slonk_infra.ops.slurm_rest import ScontrolWriter, SlurmRest, TokenSigner

log = logging.getLogger("slonk_infra.ops")

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def connect_cloud(section: CloudSection | None, spec: OperationsSpec) -> CloudMachines | None:
    """The cloud client of the config's cloud section (None: local, or ``cloudActions: false``).

    The clients live in :mod:`slonk_infra.ops.cloud` (``connect``, google-auth over the REST APIs or boto3,
    imported only here so a local controller needs neither); credentials come from the pod's identity
    (GKE Workload Identity, EKS Pod Identity).
    """
    if section is None or not spec.cloud_actions:
        return None
    from slonk_infra.ops.cloud import connect

    try:
        return connect(cloud_pools(section))
    except (ImportError, ValueError) as exc:
        raise SpecError(f"cloud: {exc} (or set cloudActions: false)") from None


def build(
    spec: OperationsSpec | ControllerConfig, kube: KubeApi, namespace: str, slurm_conf: str | None = None
) -> Controller:
    """The controller with its clients, memory and job record, as configured (a bare spec: no cloud)."""
    section = spec.cloud if isinstance(spec, ControllerConfig) else None
    spec = spec.spec if isinstance(spec, ControllerConfig) else spec
    signer = TokenSigner.from_file(spec.jwt_key_file, spec.slurm_user, spec.token_lifetime_seconds)
    scontrol = None
    if spec.scontrol_fallback:
        scontrol = ScontrolWriter(env={"SLURM_CONF": slurm_conf or f"{vocab.CONF_DIR}/slurm.conf"})
    slurm = SlurmRest(spec.slurmrestd_url or default_slurmrestd_url(namespace), signer, scontrol=scontrol)
    state_dir = Path(spec.state_dir)
    if not state_dir.is_dir():
        raise SpecError(f"stateDir {spec.state_dir!r} is not a directory (mount the state volume there)")
    log.info("slurmrestd %s", slurm.url)
    return Controller(
        spec,
        slurm,
        kube,
        StateStore(state_dir),
        JobRecord(state_dir / "jobs.jsonl"),
        Metrics(),
        cloud=connect_cloud(section, spec),
        cloud_section=section,
    )


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def serve(controller: Controller, port: int, stale_after: float) -> WSGIServer:
    """``/metrics`` and ``/healthz`` (200 while ticks keep finishing) on a background thread."""
    from prometheus_client import make_wsgi_app

    metrics_app = make_wsgi_app(controller.metrics.registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            age = time.time() - controller.last_tick_end if controller.last_tick_end else 0.0
            ok = age < stale_after
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"last tick {age:.0f}s ago\n".encode()]
        return metrics_app(environ, start_response)  # type: ignore[no-any-return]

    server = make_server("", port, app, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def summary(report: TickReport) -> dict[str, Any]:
    """A tick report as JSON-ready data."""
    plan = report.plan
    return {
        "slurmOk": report.slurm_ok,
        "kubeOk": report.kube_ok,
        "errors": report.errors,
        "nodes": report.nodes,
        "pods": report.pods,
        "slurmCalls": dict(report.slurm_calls),
        "kubeCalls": dict(report.kube_calls),
        "decisions": [
            f"{d.what} {d.node}: {d.why}" for d in [*(plan.decisions if plan else []), *report.cloud_decisions]
        ],
        "cloudCalls": dict(report.cloud_calls),
        "wallSeconds": round(report.wall_seconds, 4),
        "cpuSeconds": round(report.cpu_seconds, 4),
    }


# Between ticks the controller keeps every record and outcome of the last one (ops/wire.py RecordCache,
# ops/sync.py ReconcileMemo): tens of thousands of objects at 4,096 nodes. Under the collector's default
# thresholds a tick ran about 20 young passes and, every few ticks, a full pass over all of them (10-15 ms
# and about 150 ms of CPU, benchmarks/sync.py). Those objects form no reference cycles, so after the first
# tick that read both sides they are moved out of the collector's sight and young passes are made rarer.
# Every HEAP_SETTLE_SECONDS everything is collected once and frozen again, so a cycle that did form among
# frozen objects is freed within the hour.
HEAP_SETTLE_SECONDS = 3600.0
GC_THRESHOLDS = (20_000, 20, 20)


def settle_heap() -> None:
    """Collect everything once, then keep what survives out of later collections (see above)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help="Settings file.")
@click.option("--namespace", default=None, help="Namespace of the Slurm pods (default: $POD_NAMESPACE).")
@click.option("--kube-host", default=None, help="API server URL (default: in-cluster).")
@click.option("--kube-token-file", type=click.Path(path_type=Path), default=None, help="Bearer token file.")
@click.option("--slurm-conf", default=None, help="slurm.conf for the scontrol fallback.")
@click.option("--once", is_flag=True, help="Run one tick, print its report, exit.")
def main(
    config_path: Path | None,
    namespace: str | None,
    kube_host: str | None,
    kube_token_file: Path | None,
    slurm_conf: str | None,
    once: bool,
) -> None:
    """Keep Slurm and Kubernetes node states in step, remediate bad machines, serve metrics."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        if config_path is None:
            config = (
                load_config(DEFAULT_CONFIG_PATH)
                if DEFAULT_CONFIG_PATH.exists()
                else ControllerConfig(spec=OperationsSpec())
            )
        else:
            config = load_config(config_path)
        spec = config.spec
        ns = namespace or os.environ.get("POD_NAMESPACE") or ""
        if not ns:
            raise SpecError("no namespace: pass --namespace or set POD_NAMESPACE")
        if kube_host:
            token = kube_token_file.read_text().strip() if kube_token_file else ""
            kube = KubeApi.connect(kube_host, token, ns)
        else:
            kube = KubeApi.in_cluster(ns)
        controller = build(config, kube, ns, slurm_conf)
    except (SpecError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    if once:
        report = controller.tick()
        click.echo(json.dumps(summary(report), indent=1))
        raise SystemExit(0 if report.slurm_ok and report.kube_ok else 1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serve(controller, spec.metrics_port, stale_after=10 * spec.interval_seconds + 120)
    where = f"{controller.pools.cloud} cluster {controller.pools.cluster}" if controller.pools else "no cloud"
    log.info("slonk-ops: namespace %s, every %ss, %s", ns, spec.interval_seconds, where)
    settled: float | None = None
    while not stop.is_set():
        report = controller.tick()
        now = time.monotonic()
        # After the first tick that read both sides (the first records are what is worth freezing), then hourly.
        if report.slurm_ok and report.kube_ok and (settled is None or now - settled >= HEAP_SETTLE_SECONDS):
            settle_heap()
            settled = now
        stop.wait(max(0.0, spec.interval_seconds - report.wall_seconds))
