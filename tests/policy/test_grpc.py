"""The policy pack as the Pulumi CLI runs it: a subprocess speaking the analyzer gRPC protocol.

The CLI starts a Python pack with ``python3 -u -m pulumi.policy <engine address> <pack dir>`` (the
``pulumi-analyzer-policy-python`` shim), reads the port the pack prints on stdout, then calls
``GetAnalyzerInfo``, ``Configure`` (with the reconciled ``--policy-pack-config``), ``Analyze`` for every
resource and ``AnalyzeStack`` once. This test does the same, with no Pulumi CLI installed.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from google.protobuf import empty_pb2, struct_pb2  # type: ignore[import-untyped]
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from slonk_infra.declaration.stacks import load_stack_config
from slonk_infra.offline.render import run_program
from slonk_infra.offline.runner import Registration
from slonk_infra.policy import ALL_POLICIES, PolicyConfig, load_policy_config
from slonk_infra.policy.runner import check_registrations

pytestmark = pytest.mark.filterwarnings("ignore:.*has been deprecated in favor of:DeprecationWarning")

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "policies"
START_TIMEOUT = 30.0
LEVELS = {"advisory": analyzer_pb2.ADVISORY, "mandatory": analyzer_pb2.MANDATORY, "disabled": analyzer_pb2.DISABLED}


def _read_port(proc: subprocess.Popen[bytes]) -> int:
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    if not selector.select(timeout=START_TIMEOUT):
        raise AssertionError("the policy pack printed no port")
    line = proc.stdout.readline().decode().strip()
    if not line.isdigit():
        stderr = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
        raise AssertionError(f"the policy pack printed {line!r} instead of a port\n{stderr}")
    return int(line)


@pytest.fixture(scope="module")
def analyzer(request: pytest.FixtureRequest) -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(PACK)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid = proc.pid

    def stop() -> None:
        # By its PID, whatever happened to the test: the pack blocks forever by design.
        if proc.poll() is None:
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    request.addfinalizer(stop)
    port = _read_port(proc)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    request.addfinalizer(channel.close)
    grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT)
    yield analyzer_pb2_grpc.AnalyzerStub(channel)


@pytest.fixture(scope="module")
def config() -> PolicyConfig:
    return load_policy_config(PACK / "policy-config.json")


@pytest.fixture(scope="module")
def gcp() -> list[Registration]:
    return run_program("gcp", load_stack_config("gcp", REPO / "stacks")).registrations


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def _configure(stub: analyzer_pb2_grpc.AnalyzerStub, config: PolicyConfig) -> None:
    """What the CLI sends after reconciling defaults, the pack's initial config and the config file."""
    policy_config = {
        p.name: analyzer_pb2.PolicyConfig(
            enforcementLevel=LEVELS[config.level(p).value], properties=_struct(config.for_policy(p.name))
        )
        for p in ALL_POLICIES
    }
    stub.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=policy_config))


def _options(reg: Registration) -> analyzer_pb2.AnalyzerResourceOptions:
    return analyzer_pb2.AnalyzerResourceOptions(
        protect=reg.protect, deleteBeforeReplace=reg.delete_before_replace, parent=reg.parent
    )


def _analyze(stub: analyzer_pb2_grpc.AnalyzerStub, reg: Registration) -> list[analyzer_pb2.AnalyzeDiagnostic]:
    request = analyzer_pb2.AnalyzeRequest(
        type=reg.type, properties=_struct(reg.inputs), urn=reg.urn, name=reg.name, options=_options(reg)
    )
    return list(stub.Analyze(request).diagnostics)


def _analyze_stack(
    stub: analyzer_pb2_grpc.AnalyzerStub, regs: list[Registration]
) -> list[analyzer_pb2.AnalyzeDiagnostic]:
    resources = [
        analyzer_pb2.AnalyzerResource(
            type=r.type,
            properties=_struct(r.inputs),
            urn=r.urn,
            name=r.name,
            options=_options(r),
            parent=r.parent,
            dependencies=list(r.dependencies),
        )
        for r in regs
    ]
    return list(stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources)).diagnostics)


def _message(diagnostic: analyzer_pb2.AnalyzeDiagnostic) -> str:
    # The analyzer prefixes each message with the policy's description.
    return diagnostic.message.removeprefix(diagnostic.description + "\n")


def _drift(regs: list[Registration]) -> list[Registration]:
    """h100-b's slurmd on a tag instead of the digest, h100-a asking for 4 GPUs of its 8."""
    out = []
    for reg in regs:
        if reg.name in ("slonk-gcp-statefulset-h100-b", "slonk-gcp-statefulset-h100-a"):
            inputs = copy.deepcopy(reg.inputs)
            slurmd = inputs["spec"]["template"]["spec"]["containers"][0]
            if reg.name.endswith("h100-b"):
                slurmd["image"] = slurmd["image"].split("@", 1)[0]
            else:
                slurmd["resources"]["limits"]["nvidia.com/gpu"] = "4"
            reg = dataclasses.replace(reg, inputs=inputs)
        out.append(reg)
    return out


def test_analyzer_info_lists_every_policy_and_carries_the_shared_config(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "slonk-infra-policies"
    assert [p.name for p in info.policies] == [p.name for p in ALL_POLICIES]
    kinds = {p.name: p.policy_type for p in info.policies}
    assert kinds["gpu-request-matches-gres"] == analyzer_pb2.POLICY_TYPE_STACK
    assert kinds["uniform-cuda-image"] == analyzer_pb2.POLICY_TYPE_RESOURCE
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert levels["uniform-cuda-image"] == analyzer_pb2.MANDATORY
    assert levels["worker-graceful-drain"] == analyzer_pb2.ADVISORY
    assert all(p.remediation_steps for p in info.policies)
    uniform = next(p for p in info.policies if p.name == "uniform-cuda-image")
    assert list(uniform.configSchema.required) == ["image", "cudaVersion", "allowedCudaVersions", "allowedRegistries"]
    assert "@sha256:" in info.initialConfig["uniform-cuda-image"].properties["image"]


def test_analyze_flags_a_drifted_pool_and_passes_a_conforming_one(
    analyzer: analyzer_pb2_grpc.AnalyzerStub, config: PolicyConfig, gcp: list[Registration]
) -> None:
    _configure(analyzer, config)
    regs = {r.name: r for r in _drift(gcp)}
    assert _analyze(analyzer, regs["slonk-gcp-statefulset-cpu"]) == []
    diagnostics = _analyze(analyzer, regs["slonk-gcp-statefulset-h100-b"])
    assert [(d.policyName, d.enforcementLevel) for d in diagnostics] == [
        ("uniform-cuda-image", analyzer_pb2.MANDATORY)
    ] * 2
    assert all(d.urn == "" or d.urn == regs["slonk-gcp-statefulset-h100-b"].urn for d in diagnostics)
    assert any(
        _message(d).startswith("StatefulSet slurm/h100-b container slurmd: image ")
        and _message(d).endswith("is not pinned by digest (@sha256:<64 hex digits>)")
        for d in diagnostics
    )


def test_pack_over_grpc_and_offline_check_agree(
    analyzer: analyzer_pb2_grpc.AnalyzerStub, config: PolicyConfig, gcp: list[Registration]
) -> None:
    _configure(analyzer, config)
    regs = _drift(gcp)
    over_grpc = {(d.policyName, _message(d)) for r in regs for d in _analyze(analyzer, r)}
    stack = _analyze_stack(analyzer, regs)
    over_grpc |= {(d.policyName, _message(d)) for d in stack}
    offline = check_registrations(regs, config)
    assert over_grpc == {(v.policy, v.message) for v in offline.violations}
    gres = [d for d in stack if d.policyName == "gpu-request-matches-gres"]
    assert len(gres) == 1
    assert gres[0].urn == next(r.urn for r in regs if r.name == "slonk-gcp-statefulset-h100-a")
