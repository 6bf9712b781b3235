"""Run a Pulumi program offline against fake clouds and record what it would register.

The Pulumi CLI is not needed: :func:`run_offline` drives the program through Pulumi's mock
monitor with ``preview=False`` (so every ``apply`` runs), gives each resource plausible outputs
(cluster endpoints, Filestore IPs, FSx DNS names), and records every registration together with
the resource options the engine would receive (``protect``, ``retain_on_delete``, parent,
dependencies). Tests and offline checks (resource counts, policy dry runs) read that record.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pulumi
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks, set_mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

T = TypeVar("T")

FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n").decode()
FAKE_VPC_CIDR = "10.0.0.0/16"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # Pulumi's wire sentinel for an unknown value
FAKE_RANDOM_B64 = base64.b64encode(b"offline-mock-random-bytes-not-a-real-key").decode()
SECRET_PLACEHOLDER = "<secret: kept in Pulumi state as a secret and in the cluster as a Secret>"


def after_deploy(what: str) -> str:
    """Placeholder for a value that exists only after deployment (an IP, an endpoint, a DNS name)."""
    return f"<known after deploy: {what}>"


# Start of what str() of an Output returns instead of its value.
OUTPUT_STR_MARKER = "Calling __str__ on an Output"


@dataclass(frozen=True)
class Registration:
    """One ``RegisterResource`` call as the engine would receive it (inputs use wire camelCase)."""

    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    dependencies: tuple[str, ...]
    provider: str


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:17]


class FakeClouds(Mocks):
    """Mocks that echo inputs and add the outputs the adapters read from GCP, AWS and Kubernetes."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        typ = args.typ
        if typ.startswith("kubernetes:") and "kind" in args.inputs and typ != "kubernetes:core/v1:Service":
            # Nothing reads a Kubernetes object's outputs back, and echoing pod specs costs a full
            # deserialisation per object; the inputs stay recorded by the monitor.
            return f"{args.name}-id", {}
        state = dict(args.inputs)
        state.setdefault("name", args.name)
        rid = f"{args.name}-id"
        if typ == "gcp:container/cluster:Cluster":
            rid = f"projects/{state.get('project')}/locations/{state.get('location')}/clusters/{state['name']}"
            state["endpoint"] = after_deploy(f"{args.name}.endpoint")
            state["masterAuth"] = {"clusterCaCertificate": FAKE_CA}
        elif typ == "gcp:filestore/instance:Instance":
            nets = [dict(n) for n in state.get("networks", [])]
            for i, net in enumerate(nets):
                net["ipAddresses"] = [after_deploy(f"{args.name}.networks[{i}].ipAddresses[0]")]
            state["networks"] = nets
        elif typ == "aws:eks/cluster:Cluster":
            state["endpoint"] = after_deploy(f"{args.name}.endpoint")
            state["certificateAuthority"] = {"data": FAKE_CA}
            state["vpcConfig"] = {**state.get("vpcConfig", {}), "clusterSecurityGroupId": "sg-0cluster"}
            state["arn"] = f"arn:aws:eks:us-east-1:123456789012:cluster/{state['name']}"
        elif typ == "aws:iam/role:Role":
            state["arn"] = f"arn:aws:iam::123456789012:role/{state['name']}"
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            rid = f"lt-{_short_hash(args.name)}"
            state["latestVersion"] = 1
        elif typ == "aws:ec2/securityGroup:SecurityGroup":
            rid = f"sg-{_short_hash(args.name)}"
        elif typ == "aws:efs/fileSystem:FileSystem":
            rid = f"fs-{_short_hash(args.name)}"
        elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            rid = f"fs-{_short_hash(args.name)}"
            state["dnsName"] = after_deploy(f"{args.name}.dnsName")
            state["mountName"] = after_deploy(f"{args.name}.mountName")
        elif typ == "aws:efs/fileSystem:FileSystem":
            state["dnsName"] = after_deploy(f"{args.name}.dnsName")
        elif typ == "kubernetes:core/v1:Service":
            state["spec"] = {**state.get("spec", {}), "clusterIP": after_deploy(f"Service {args.name} .spec.clusterIP")}
        elif typ == "random:index/randomBytes:RandomBytes":
            # Recognisable fake bytes, so tests can trace where key material flows.
            state["base64"] = FAKE_RANDOM_B64
            state["hex"] = FAKE_RANDOM_B64.encode().hex()
        elif typ == "aws:ec2/placementGroup:PlacementGroup":
            rid = state["name"]
        return rid, state

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == "aws:ec2/getVpc:getVpc":
            return {
                "id": args.args.get("id"),
                "cidrBlock": FAKE_VPC_CIDR,
                "cidrBlockAssociations": [
                    {"associationId": "vpc-cidr-assoc-1", "cidrBlock": FAKE_VPC_CIDR, "state": "associated"}
                ],
            }, []
        if args.token == "aws:eks/getCluster:getCluster":
            return {"name": args.args.get("name"), "vpcConfig": {"clusterSecurityGroupId": "sg-0existing"}}, []
        return {}, []


class RecordingMonitor(MockMonitor):
    """The mock monitor, keeping every registration in order (duplicates included)."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    parent=request.parent,
                    custom=bool(request.custom),
                    inputs=rpc.deserialize_properties(request.object),
                    protect=bool(request.protect),
                    retain_on_delete=bool(request.retainOnDelete),
                    delete_before_replace=bool(request.deleteBeforeReplace),
                    dependencies=tuple(request.dependencies),
                    provider=request.provider,
                )
            )
        return response


@dataclass
class OfflineRun(Generic[T]):
    """What a program returned, its resolved outputs, and every registration it made."""

    value: T
    resolved: Any
    registrations: list[Registration] = field(default_factory=list)

    def of_type(self, typ: str) -> list[Registration]:
        """Registrations of one resource type token."""
        return [r for r in self.registrations if r.type == typ]

    def named(self, name: str) -> Registration:
        """The one registration with logical name ``name``."""
        found = [r for r in self.registrations if r.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} registrations named {name!r}")
        return found[0]

    def duplicate_urns(self) -> list[str]:
        """URNs registered more than once (the mock accepts them; the real engine fails the update)."""
        seen = Counter(r.urn for r in self.registrations)
        return sorted(urn for urn, n in seen.items() if n > 1)

    def output_leaks(self) -> list[str]:
        """Strings that carry Pulumi's text for an ``Output`` formatted with ``str()``."""
        return [s for s in self.strings() if OUTPUT_STR_MARKER in s]

    def strings(self) -> Iterator[str]:
        """Every string in the recorded inputs and the resolved value."""
        yield from _strings([r.inputs for r in self.registrations])
        yield from _strings(self.resolved)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def run_offline(
    program: Callable[[], T],
    resolve: Callable[[T], Any] | None = None,
    *,
    project: str = "slonk-infra",
    stack: str = "offline",
    config: dict[str, str] | None = None,
) -> OfflineRun[T]:
    """Run ``program`` against :class:`FakeClouds`; ``resolve`` picks outputs to resolve from its value.

    Not thread-safe and not re-entrant: Pulumi's runtime settings are process-global.
    """
    mocks = FakeClouds()
    monitor = RecordingMonitor(mocks)
    # A fresh root stack per run, so runs do not parent resources to an earlier run's stack.
    settings.ROOT.set(None)
    set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    settings.SETTINGS.rpc_manager.clear()
    settings.SETTINGS.outputs.clear()
    pulumi.runtime.set_all_config(config or {})
    holder: dict[str, Any] = {}

    async def body() -> None:
        value = program()
        holder["value"] = value
        if resolve is not None:
            holder["resolved"] = await pulumi.Output.from_input(resolve(value)).future()

    _sync_await(run_pulumi_func(body))
    return OfflineRun(value=holder["value"], resolved=holder.get("resolved"), registrations=monitor.registrations)
