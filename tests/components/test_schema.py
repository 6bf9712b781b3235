"""The cross-language package (components/): its checked-in schema, served over gRPC as the Pulumi CLI asks for
it, and the Pulumi YAML example checked against that schema and constructed through the provider."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc  # type: ignore[import-untyped]
import pulumi
import pytest
import yaml
from google.protobuf import empty_pb2  # type: ignore[import-untyped]
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc

from slonk_infra.clouds import build_plan
from slonk_infra.offline.runner import run_offline

REPO = Path(__file__).resolve().parents[2]
COMPONENTS = REPO / "components"
SCHEMA = json.loads((COMPONENTS / "schema.json").read_text(encoding="utf-8"))
EXAMPLE = yaml.safe_load((COMPONENTS / "examples" / "Pulumi.yaml").read_text(encoding="utf-8"))
CLUSTER = "slonk-infra:index:Cluster"
INTERPOLATION = re.compile(r"^\$\{([A-Za-z][\w-]*)\}$")


def load_provider_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slonk_components_provider", COMPONENTS / "provider.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROVIDER = load_provider_module()


# ------------------------------------------------------------------------------------------ the schema
# Whether schema.json is current is checked with every generated file, in tests/declaration/test_generated.py.
def test_schema_inputs_are_the_declaration_and_outputs_the_cluster_outputs() -> None:
    from slonk_infra.cluster import OUTPUT_KEYS
    from slonk_infra.declaration.model import ClusterDeclaration

    cluster = schema_cluster()
    fields = {info.alias or name for name, info in ClusterDeclaration.model_fields.items()}
    assert set(cluster["inputProperties"]) == fields
    required = {info.alias or name for name, info in ClusterDeclaration.model_fields.items() if info.is_required()}
    assert set(cluster["requiredInputs"]) == required
    assert set(cluster["properties"]) == set(OUTPUT_KEYS)
    assert cluster["isComponent"] is True


def schema_cluster() -> dict[str, Any]:
    resource: dict[str, Any] = SCHEMA["resources"][CLUSTER]
    return resource


# ------------------------------------------------------------------- the provider, started as the CLI does
class FakeEngine(engine_pb2_grpc.EngineServicer):
    """The engine end a provider logs to."""

    def __init__(self) -> None:
        self.logs: list[str] = []

    def Log(self, request: Any, context: Any) -> Any:
        self.logs.append(request.message)
        return empty_pb2.Empty()


@pytest.fixture
def engine() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    engine_pb2_grpc.add_EngineServicer_to_server(FakeEngine(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def test_provider_started_as_the_cli_does_serves_the_checked_in_schema(engine: str, tmp_path: Path) -> None:
    # The CLI's Python language host runs `python <plugin folder> <engine address> [flags]` in the
    # plugin's virtual environment; the provider prints its port on stdout.
    proc = subprocess.Popen(
        [sys.executable, str(COMPONENTS), engine, "--logtostderr"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        if not first.isdigit():
            proc.kill()
            pytest.fail(f"the provider did not print its port: {first!r}\n{proc.communicate(timeout=30)[1]}")
        with grpc.insecure_channel(f"127.0.0.1:{first}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            served = json.loads(stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60).schema)
            info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=60)
    finally:
        proc.kill()  # the process this test started, by its handle
        proc.communicate(timeout=30)
    assert served == SCHEMA
    assert info.version == importlib.metadata.version("slonk-infra") == SCHEMA["version"]


# ------------------------------------------------------------------------------------ the YAML example
def _type_errors(value: Any, spec: dict[str, Any], path: str, config: dict[str, Any]) -> list[str]:
    """Where ``value`` does not fit the schema property ``spec`` (the checks Pulumi YAML's type checker makes)."""
    if isinstance(value, str) and (ref := INTERPOLATION.match(value)):
        declared = config.get(ref.group(1))
        if declared is None:
            return [f"{path}: ${{{ref.group(1)}}} is not a config key of the example"]
        # A config reference stands for a value of the config key's declared type.
        value = {"string": "x", "integer": 1, "boolean": True, "number": 1.0}[declared["type"]]
    if "$ref" in spec:
        typ = SCHEMA["types"][spec["$ref"].removeprefix("#/types/")]
        if not isinstance(value, dict):
            return [f"{path}: expected an object ({spec['$ref']}), got {value!r}"]
        return _object_errors(value, typ["properties"], typ.get("required", []), path, config)
    kind = spec["type"]
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r}"]
        return [e for i, item in enumerate(value) for e in _type_errors(item, spec["items"], f"{path}[{i}]", config)]
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {value!r}"]
        inner = spec.get("additionalProperties", {"type": "string"})
        return [e for k, v in value.items() for e in _type_errors(v, inner, f"{path}.{k}", config)]
    python: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "boolean": bool,
        "number": (int, float),
    }
    expected = python[kind]
    ok = isinstance(value, expected) and not (kind in ("integer", "number") and isinstance(value, bool))
    return [] if ok else [f"{path}: expected {kind}, got {value!r}"]


def _object_errors(
    value: dict[str, Any], properties: dict[str, Any], required: list[str], path: str, config: dict[str, Any]
) -> list[str]:
    errors = [
        f"{path}.{k}: not a property of the schema (allowed: {sorted(properties)})"
        for k in value
        if k not in properties
    ]
    errors += [f"{path}.{k}: required property missing" for k in required if k not in value]
    for key, item in value.items():
        if key in properties:
            errors += _type_errors(item, properties[key], f"{path}.{key}" if path else key, config)
    return errors


def _token(typ: str) -> str:
    """Pulumi YAML's short ``pkg:Type`` is ``pkg:index:Type``."""
    parts = typ.split(":")
    return f"{parts[0]}:index:{parts[1]}" if len(parts) == 2 else typ


def example_clusters() -> dict[str, dict[str, Any]]:
    return {name: res for name, res in EXAMPLE["resources"].items() if _token(res["type"]) == CLUSTER}


def test_yaml_example_uses_the_local_package_and_declares_a_cluster() -> None:
    assert EXAMPLE["runtime"] == "yaml"
    assert (COMPONENTS / "examples" / EXAMPLE["packages"]["slonk-infra"]).resolve() == COMPONENTS
    assert all(_token(res["type"]) in SCHEMA["resources"] for res in EXAMPLE["resources"].values())
    assert len(example_clusters()) == 1


def test_yaml_example_properties_fit_the_schema() -> None:
    cluster = schema_cluster()
    for name, res in example_clusters().items():
        errors = _object_errors(
            res["properties"], cluster["inputProperties"], cluster["requiredInputs"], name, EXAMPLE["config"]
        )
        assert not errors, "\n".join(errors)
    outputs = re.findall(r"\$\{(\w+)\.(\w+)\}", json.dumps(EXAMPLE["outputs"]))
    assert outputs and all(prop in cluster["properties"] for _, prop in outputs)


def test_the_type_check_catches_a_wrong_type_a_typo_and_a_missing_field() -> None:
    cluster = schema_cluster()
    (res,) = example_clusters().values()
    bad = json.loads(json.dumps(res["properties"]))
    bad["pools"][0]["nodes"] = "four"
    bad["pools"][1]["machinType"] = "n2-standard-16"
    del bad["image"]
    errors = _object_errors(bad, cluster["inputProperties"], cluster["requiredInputs"], "c", EXAMPLE["config"])
    assert any("c.pools[0].nodes: expected integer" in e for e in errors)
    assert any("c.pools[1].machinType: not a property" in e for e in errors)
    assert any("c.image: required property missing" in e for e in errors)


def test_yaml_example_is_a_valid_declaration_that_the_provider_constructs() -> None:
    """The example's properties go through the provider's construct (names mapped by the schema) under mocks."""
    (res,) = example_clusters().values()
    props = json.loads(json.dumps(res["properties"]).replace("${gcpProject}", "example-project"))
    provider = ComponentProvider(PROVIDER.COMPONENTS, PROVIDER.PACKAGE, None, PROVIDER.version())
    run = run_offline(lambda: provider.construct("research", CLUSTER, props, None))
    assert not run.duplicate_urns() and not run.output_leaks()
    (component,) = run.of_type(CLUSTER)
    assert component.name == "research"
    assert {r.name for r in run.of_type("gcp:container/nodePool:NodePool")} >= {
        "research-pool-h100",
        "research-pool-cpu",
    }
    mapped = provider.map_inputs(props, provider._component_defs["Cluster"])
    plan = build_plan(mapped)
    assert plan.name == "research" and {g.name for g in plan.groups} == {"h100", "cpu"}


# -------------------------------------------------------------------------- Pulumi Outputs as inputs
def _input_paths(spec: dict[str, Any], path: str) -> list[str]:
    """The paths under ``spec`` whose value may be an Output (no ``plain``), with ``[*]`` for list items."""
    if "$ref" in spec:
        typ = SCHEMA["types"][spec["$ref"].removeprefix("#/types/")]
        return [p for name, prop in typ["properties"].items() for p in _input_paths(prop, f"{path}.{name}")]
    if spec.get("type") == "array":
        return ([] if spec.get("plain") else [path]) + _input_paths(spec["items"], f"{path}[*]")
    if spec.get("type") == "object" and "additionalProperties" in spec:
        return ([] if spec.get("plain") else [path]) + _input_paths(spec["additionalProperties"], f"{path}.*")
    return [] if spec.get("plain") else [path]


def test_the_schema_takes_outputs_exactly_where_the_declaration_does() -> None:
    from slonk_infra.declaration.inputs import accepted_fields

    inputs = schema_cluster()["inputProperties"]
    found = sorted(p for name, prop in inputs.items() for p in _input_paths(prop, name))
    assert found == accepted_fields()


def test_the_provider_constructs_a_cluster_whose_project_is_an_output() -> None:
    """What another language sends for ``project: ${someResource.project}``: an Output inside the gcp object."""
    (res,) = example_clusters().values()
    props = json.loads(json.dumps(res["properties"]))
    provider = ComponentProvider(PROVIDER.COMPONENTS, PROVIDER.PACKAGE, None, PROVIDER.version())

    def construct() -> Any:
        props["gcp"]["project"] = pulumi.Output.from_input("project-from-another-resource")
        return provider.construct("research", CLUSTER, props, None)

    run = run_offline(construct)
    pools = run.of_type("gcp:container/nodePool:NodePool")
    assert pools and {r.inputs["project"] for r in pools} == {"project-from-another-resource"}
    assert not [s for s in run.strings() if "<pulumi output:" in s]
