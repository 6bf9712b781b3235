"""`slonk-infra status`: what the cluster reports, read from a fake Kubernetes API (no server)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from slonk_infra import vocab
from slonk_infra.offline.readiness import PART_OF_SELECTOR, WORKER_SELECTOR, format_status, read_status


def _workload(name: str, role: str, desired: int, ready: int | None, group: str | None = None) -> SimpleNamespace:
    labels = vocab.labels(role, **({vocab.GROUP_LABEL: group} if group else {}))
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, labels=labels),
        spec=SimpleNamespace(replicas=desired),
        # The client leaves readyReplicas None while no pod is ready.
        status=SimpleNamespace(ready_replicas=ready),
    )


def _pod(name: str, group: str, state: str | None) -> SimpleNamespace:
    annotations = {vocab.SLURM_STATE: state} if state else None
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name=name,
            labels=vocab.labels(vocab.WORKER_COMPONENT, **{vocab.GROUP_LABEL: group}),
            annotations=annotations,
        )
    )


@dataclass
class FakeApps:
    """Stands in for kubernetes.client.AppsV1Api: answers the two list calls and records their selectors."""

    statefulsets: list[Any]
    deployments: list[Any] = field(default_factory=list)
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def list_namespaced_stateful_set(self, namespace: str, label_selector: str = "") -> Any:
        self.calls.append(("statefulsets", namespace, label_selector))
        return SimpleNamespace(items=self.statefulsets)

    def list_namespaced_deployment(self, namespace: str, label_selector: str = "") -> Any:
        self.calls.append(("deployments", namespace, label_selector))
        return SimpleNamespace(items=self.deployments)


@dataclass
class FakeCore:
    """Stands in for kubernetes.client.CoreV1Api: the login Service and the worker pods."""

    login: Any | None
    pods: list[Any] = field(default_factory=list)
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def read_namespaced_service(self, name: str, namespace: str) -> Any:
        self.calls.append(("service", namespace, name))
        if self.login is None:
            raise ApiException(status=404, reason="Not Found")
        return self.login

    def list_namespaced_pod(self, namespace: str, label_selector: str = "") -> Any:
        self.calls.append(("pods", namespace, label_selector))
        return SimpleNamespace(items=self.pods)


def _lb(address: str | None) -> SimpleNamespace:
    ingress = [SimpleNamespace(hostname=None, ip=address)] if address else None
    return SimpleNamespace(
        spec=SimpleNamespace(type="LoadBalancer", cluster_ip="10.96.0.9"),
        status=SimpleNamespace(load_balancer=SimpleNamespace(ingress=ingress)),
    )


def _cluster(h100_ready: int | None, address: str | None) -> tuple[FakeApps, FakeCore]:
    apps = FakeApps(
        statefulsets=[
            _workload("h100-a", vocab.WORKER_COMPONENT, 16, h100_ready, group="h100-a"),
            _workload("cpu", vocab.WORKER_COMPONENT, 2, 2, group="cpu"),
            _workload("login", vocab.LOGIN_COMPONENT, 1, 1),
            _workload("slurmctld", vocab.CONTROLLER_COMPONENT, 1, 1),
        ],
        deployments=[_workload("slurmrestd", vocab.RESTAPI_COMPONENT, 1, 1)],
    )
    pods = [_pod(f"h100-a-{i}", "h100-a", "DRAIN" if i == 3 else None) for i in range(h100_ready or 0)]
    core = FakeCore(login=_lb(address), pods=[*pods, _pod("cpu-0", "cpu", None), _pod("cpu-1", "cpu", "DOWN")])
    return apps, core


def test_a_cluster_still_waiting_for_gpus_is_not_ready_and_says_what_it_waits_for() -> None:
    apps, core = _cluster(h100_ready=None, address=None)
    status = read_status(apps, core, "slurm", slurm_states=True)
    assert not status.is_ready
    assert [(w.role, w.name, w.ready, w.desired) for w in status.workloads] == [
        ("controller", "slurmctld", 1, 1),
        ("login", "login", 1, 1),
        ("restapi", "slurmrestd", 1, 1),
        ("worker", "cpu", 2, 2),
        ("worker", "h100-a", 0, 16),
    ]
    text = format_status(status)
    assert re.search(r"worker +h100-a +0/16 NOT READY", text)
    assert "LoadBalancer no address yet" in text
    assert text.splitlines()[-1] == "not ready: h100-a 0/16, login address"
    # Read-only calls on the namespace, with the layer's selectors.
    assert ("statefulsets", "slurm", PART_OF_SELECTOR) in apps.calls
    assert ("deployments", "slurm", PART_OF_SELECTOR) in apps.calls
    assert ("pods", "slurm", WORKER_SELECTOR) in core.calls


def test_a_ready_cluster_shows_slurm_states_per_group() -> None:
    apps, core = _cluster(h100_ready=16, address="10.1.2.3")
    status = read_status(apps, core, "slurm", slurm_states=True)
    assert status.is_ready
    assert status.slurm_states["h100-a"] == {"usable": 15, "DRAIN": 1}
    assert status.slurm_states["cpu"] == {"usable": 1, "DOWN": 1}
    text = format_status(status)
    assert "slurm: 1 DRAIN, 15 usable" in text
    assert "login      LoadBalancer 10.1.2.3" in text
    assert text.splitlines()[-1] == "ready"


def test_without_slurm_states_no_pod_is_listed() -> None:
    apps, core = _cluster(h100_ready=16, address="10.1.2.3")
    status = read_status(apps, core, "slurm", slurm_states=False)
    assert status.slurm_states == {} and not [c for c in core.calls if c[0] == "pods"]


def test_an_empty_namespace_is_not_ready_and_hints_at_the_context() -> None:
    status = read_status(FakeApps(statefulsets=[]), FakeCore(login=None), "research")
    assert not status.is_ready
    text = format_status(status)
    assert "no slonk-infra workloads here" in text and text.endswith("not ready: no controller")


def test_a_cluster_ip_login_is_reached_at_its_cluster_ip() -> None:
    apps, _ = _cluster(h100_ready=16, address=None)
    core = FakeCore(login=SimpleNamespace(spec=SimpleNamespace(type="ClusterIP", cluster_ip="10.96.0.7"), status=None))
    status = read_status(apps, core, "slurm")
    assert (status.login_type, status.login_address) == ("ClusterIP", "10.96.0.7") and status.is_ready


def test_other_api_errors_are_not_hidden() -> None:
    class Forbidden(FakeCore):
        def read_namespaced_service(self, name: str, namespace: str) -> Any:
            raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(ApiException):
        read_status(FakeApps(statefulsets=[]), Forbidden(login=None), "slurm")
