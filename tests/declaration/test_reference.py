"""The field reference (docs/declaration.md) and the stack-file JSON Schema (docs/stack.schema.json).

Both are generated (``python tools/generate.py``; test_generated.py fails while they are stale); these tests
hold what they say to the model: the schema takes every declaration the model takes (the shipped ones,
and the model's lax readings of scalars and names) and refuses a misspelt key as the model does; every
field is in the reference; every example in it is valid; the shipped stack files name the schema for
editors; and the research example validates, passes the schema and renders offline.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from slonk_infra.declaration import reference
from slonk_infra.declaration.model import ClusterDeclaration, parse_declaration
from slonk_infra.declaration.stacks import CONFIG_KEY
from tools import generate

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / generate.STACK_SCHEMA
MODELINE = "# yaml-language-server: $schema=../docs/stack.schema.json"
RESEARCH = REPO / "examples" / "Pulumi.research.yaml"
# Folders that hold no stack file of the repository's own (environments, caches, render output).
NOT_SOURCES = {".venv", "venv", "node_modules", "out", "render", "build", "dist", "__pycache__"}


def stack_files() -> list[Path]:
    """Every Pulumi stack settings file in the repository (``Pulumi.<stack>.yaml``)."""
    return sorted(
        p
        for p in REPO.rglob("Pulumi.*.yaml")
        if not any(part in NOT_SOURCES or part.startswith(".") for part in p.relative_to(REPO).parts[:-1])
    )


SHIPPED = [*sorted((REPO / "stacks").glob("Pulumi.*.yaml")), RESEARCH]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def local_file() -> dict[str, Any]:
    """A fresh copy of the local stack file (the whole file, config and all)."""
    return load(REPO / "stacks" / "Pulumi.local.yaml")


def schema_errors(validator: jsonschema.Draft7Validator, document: dict[str, Any]) -> list[str]:
    """The schema's complaints, each with its path, those inside anyOf branches included."""
    return [
        f"{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for error in validator.iter_errors(document)
        for e in [error, *error.context]
    ]


# ---------------------------------------------------------------------------------- what it accepts
def test_the_reference_and_the_schema_are_generated_by_the_one_command() -> None:
    assert generate.REFERENCE in generate.GENERATED and generate.STACK_SCHEMA in generate.GENERATED
    assert reference.SCHEMA_FILE == generate.STACK_SCHEMA  # the reference links to the schema by this name


@pytest.mark.parametrize("path", stack_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_stack_file_in_the_repository_is_valid_for_the_model_and_the_schema(
    path: Path, validator: jsonschema.Draft7Validator
) -> None:
    document = load(path)
    parse_declaration(document["config"][CONFIG_KEY])
    assert schema_errors(validator, document) == []


def test_the_repository_has_the_stack_files_this_test_expects() -> None:
    found = {p.relative_to(REPO).as_posix() for p in stack_files()}
    assert {p.relative_to(REPO).as_posix() for p in SHIPPED} <= found


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of the declaration: set the value at a dotted path (numbers index lists)."""

    def edit(declaration: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = declaration
        for part in parents:
            node = node[part]
        node[last] = value

    return edit


def _rename(path: str, new: str) -> Callable[[dict[str, Any]], None]:
    """An edit of the declaration: a key renamed, its value kept."""

    def edit(declaration: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = declaration
        for part in parents:
            node = node[part]
        node[new] = node.pop(last)

    return edit


# What pydantic's lax mode takes besides the canonical form: a YAML 1.2 reader (editors, Pulumi,
# check-jsonschema) hands `yes` and quoted numbers over as strings, and Python callers use snake_case.
LAX = {
    "quoted integer": _set("pools.0.nodes", "2"),
    "integer with underscores and blanks": _set("controller.stateGib", " 1_000 "),
    "integral float as integer": _set("pools.0.nodes", 2.0),
    "boolean as integer": _set("login.replicas", True),
    "yes as boolean": _set("kubernetes.create", "yes"),
    "Off as boolean": _set("pools.1.spot", "Off"),
    "1 as boolean": _set("pools.1.spot", 1),
    "quoted number": _set("health", {"disk": {"minFreeGiB": "1e1", "minFreePercent": " 7.5 "}}),
    "integer as number": _set("health", {"gpu": {"idleGraceSeconds": 3}}),
    "snake_case name": _rename("pools.0.maxNodes", "max_nodes"),
    "snake_case name of a required field": _rename("image.cudaVersion", "cuda_version"),
    "snake_case name of an explicit alias": _set("health", {"disk": {"min_free_gib": 3}}),
    "null for an optional field": _set("region", None),
}


@pytest.mark.parametrize("edit", LAX.values(), ids=list(LAX))
def test_the_schema_is_never_stricter_than_the_model(
    edit: Callable[[dict[str, Any]], None], validator: jsonschema.Draft7Validator
) -> None:
    document = local_file()
    edit(document["config"][CONFIG_KEY])
    parse_declaration(document["config"][CONFIG_KEY])  # the model takes it ...
    assert schema_errors(validator, document) == []  # ... so the schema must


# Strings pydantic reads as scalars, its parser's quirks included ("0-4" is -4, "I_nF" is inf), and
# words it refuses; a fuzz over short strings of these characters found no other kind of acceptance.
SCALAR_TEXTS = {
    int: ["2", " 2 ", "+2", "-2", "1_000", "2.0", "2.", "007", "0-4", "00__1", "\t2\n", "2.5", "1e3", "", "x", "16GB"],
    float: [
        "1",
        "1.5",
        ".5",
        "5.",
        "1e3",
        "1E+3",
        "-2.5e-3",
        "1_0.5",
        "._299",
        " 2 ",
        "inf",
        "-Infinity",
        "NaN",
        "I_nF",
        "9e60_9",
        "1e",
        "x",
        "two",
    ],
    bool: [*reference.BOOLEAN_WORDS, "YES", "On", "True", "tRuE", " yes", "2", "ok", ""],
}
PATTERNS = {int: reference.INTEGER_STRING, float: reference.NUMBER_STRING, bool: reference.BOOLEAN_STRING}


@pytest.mark.parametrize("annotation", list(SCALAR_TEXTS), ids=lambda t: t.__name__)
def test_every_string_pydantic_reads_as_a_scalar_matches_the_schemas_pattern(annotation: type) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    accepted = 0
    for text in SCALAR_TEXTS[annotation]:
        try:
            adapter.validate_python(text)
        except ValidationError:
            continue
        accepted += 1
        assert re.search(PATTERNS[annotation], text), f"pydantic reads {text!r} as {annotation.__name__}"
    assert accepted >= 6
    for word in ("x", "two", "16GB", "ok"):
        assert not re.search(PATTERNS[annotation], word)  # still a check, not "any string"


MISSPELT = {
    "mashineType": ("pools.0.machineType", "mashineType"),
    "nodePool": ("pools", "nodePool"),
    "minFreeGib": (None, "minFreeGiB"),  # the alias spells GiB; the generated camelCase would not
    "cudaVersions": ("image.cudaVersion", "cudaVersions"),
}


@pytest.mark.parametrize("wrong", list(MISSPELT))
def test_a_misspelt_key_is_refused_by_the_schema_and_by_the_model(
    wrong: str, validator: jsonschema.Draft7Validator
) -> None:
    document = local_file()
    declaration = document["config"][CONFIG_KEY]
    path, _ = MISSPELT[wrong]
    if path is None:
        declaration["health"] = {"disk": {wrong: 3}}
    else:
        _rename(path, wrong)(declaration)
    with pytest.raises(ValidationError, match=wrong):
        parse_declaration(declaration)
    assert any(f"'{wrong}' was unexpected" in e for e in schema_errors(validator, document))


def test_other_config_keys_and_pulumis_own_keys_are_left_alone(validator: jsonschema.Draft7Validator) -> None:
    document = local_file()
    document["config"].update({"kubernetes:context": "kind-slonk", "gcp:project": "p", "research:owner": {"a": 1}})
    document.update({"encryptionsalt": "v1:abc", "secretsprovider": "passphrase", "encryptedkey": "x"})
    assert schema_errors(validator, document) == []


def test_a_stack_file_with_a_bad_cloud_is_refused_and_one_without_the_declaration_is_not(
    validator: jsonschema.Draft7Validator,
) -> None:
    # A stack of the user's own program (render --program) holds only the program's keys.
    assert schema_errors(validator, {"config": {"myinfra:region": "us-east-1", "aws:region": "us-east-1"}}) == []
    assert schema_errors(validator, {"secretsprovider": "passphrase"})  # no config at all
    document = local_file()
    document["config"][CONFIG_KEY]["cloud"] = "azure"
    assert any("'azure' is not one of" in e for e in schema_errors(validator, document))


def test_the_cloud_decides_which_settings_the_schema_requires(validator: jsonschema.Draft7Validator) -> None:
    document = local_file()
    document["config"][CONFIG_KEY]["cloud"] = "gcp"
    assert any("'gcp' is a required property" in e for e in schema_errors(validator, document))
    document["config"][CONFIG_KEY]["gcp"] = {"project": "p"}
    assert schema_errors(validator, document) == []
    document["config"][CONFIG_KEY]["aws"] = {"vpcId": "v", "subnetIds": ["s"]}
    assert schema_errors(validator, document)


# --------------------------------------------------------------------------------------- the editor
def check_jsonschema() -> Path:
    """The check-jsonschema executable of this interpreter's environment (the test extra installs it)."""
    path = Path(sys.executable).parent / "check-jsonschema"
    if not path.is_file():
        pytest.skip(f"check-jsonschema is not installed next to {sys.executable}: install the test extra")
    return path


def test_check_jsonschema_accepts_every_shipped_stack_file() -> None:
    result = subprocess.run(
        [str(check_jsonschema()), "--schemafile", str(SCHEMA_PATH), *map(str, SHIPPED)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_jsonschema_refuses_a_misspelt_field_and_names_it(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.local.yaml"
    text = (REPO / "stacks" / "Pulumi.local.yaml").read_text(encoding="utf-8")
    stack.write_text(text.replace("machineType:", "mashineType:", 1), encoding="utf-8")
    result = subprocess.run(
        [str(check_jsonschema()), "--schemafile", str(SCHEMA_PATH), str(stack)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pools[0]: Additional properties are not allowed ('mashineType' was unexpected)" in result.stdout


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_shipped_stack_files_name_the_schema_on_their_first_line(path: Path) -> None:
    first = path.read_text(encoding="utf-8").partition("\n")[0]
    assert first == MODELINE
    assert (path.parent / first.partition("$schema=")[2]).resolve() == SCHEMA_PATH.resolve()


# ---------------------------------------------------------------------------------------- reference
def test_every_field_of_every_section_is_in_the_reference() -> None:
    text = (REPO / generate.REFERENCE).read_text(encoding="utf-8")
    for section in reference.sections():
        assert f'<a id="{section.anchor}"></a>' in text
        for name, info in section.model.model_fields.items():
            for path in section.path_texts(info.alias or name):
                assert f"`{path}`" in text, path


def test_cloud_specific_sections_name_their_cloud() -> None:
    clouds = {s.path_texts()[0]: s.cloud for s in reference.sections()}
    assert clouds["gcp"] == "gcp" and clouds["aws"] == "aws" and clouds["pools[]"] is None
    assert reference.cloud_rules("gcp") == {"gcp": "required", "aws": "not allowed", "local": "not allowed"}
    text = (REPO / generate.REFERENCE).read_text(encoding="utf-8")
    assert "Only with `cloud: gcp`." in text and "Only with `cloud: aws`." in text


def test_every_example_in_the_reference_is_valid() -> None:
    examples = reference.examples(generate.shipped_stacks())
    assert {e.section.model for e in examples} == {s.model for s in reference.sections()}
    for example in examples:
        if example.section.model is ClusterDeclaration:
            parse_declaration(example.data)
        else:
            example.section.model.model_validate(example.data)
        # What the reference shows is the example itself, placed at the section's path.
        shown = yaml.safe_load(example.text)
        if example.section.model is ClusterDeclaration:
            assert shown == {"config": {CONFIG_KEY: example.data}}
            continue
        for step in example.section.paths[0]:
            shown = shown[step.key]
            if step.kind == "list":
                shown = shown[0]
            elif step.kind == "map":
                shown = shown["<key>"]
        assert shown == example.data, example.section.model.__name__


def test_the_sections_no_stack_uses_have_examples_from_the_research_stack() -> None:
    origins = {e.section.model.__name__: e.origin for e in reference.examples(generate.shipped_stacks())}
    for name in ("PartitionSpec", "HealthSpec", "Taint"):
        assert origins[name] == "from `examples/Pulumi.research.yaml`", name
    # A section a shipped stack uses takes its example from there (the local stack declares its researchers).
    assert origins["UserSpec"] == "from `stacks/Pulumi.local.yaml`"


def test_a_validator_the_reference_cannot_describe_stops_the_generator() -> None:
    def undocumented(value: str) -> str:
        return value

    with pytest.raises(RuntimeError, match="VALIDATOR_RULES"):
        reference._rule(undocumented)


# ---------------------------------------------------------------------------------- research example
def test_the_research_example_validates_and_uses_the_sections_the_stacks_do_not() -> None:
    raw = load(RESEARCH)["config"][CONFIG_KEY]
    declaration = parse_declaration(raw)
    assert declaration.cloud == "local"
    assert declaration.users and all(u.ssh_authorized_keys for u in declaration.users)
    partitions = declaration.slurm.partitions or []
    assert any(p.max_time != "UNLIMITED" for p in partitions)
    assert "health" in raw


def test_the_research_example_renders_offline(tmp_path: Path) -> None:
    cli = Path(sys.executable).parent / "slonk-infra"
    command = [str(cli)] if cli.is_file() else [sys.executable, "-m", "slonk_infra.cli"]
    out = tmp_path / "research"
    result = subprocess.run(
        [*command, "render", str(RESEARCH.relative_to(REPO)), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    slurm_conf = (out / "slurm" / "slurm.conf").read_text(encoding="utf-8")
    assert re.search(r"^PartitionName=debug .*Default=YES .*MaxTime=00:30:00", slurm_conf, re.MULTILINE)
    assert "HealthCheckInterval=600" in slurm_conf
    manifests = "".join(p.read_text(encoding="utf-8") for p in sorted((out / "kubernetes").glob("*.yaml")))
    assert "research.example.org/dedicated" in manifests  # the batch pool's taint, tolerated


def test_every_field_that_takes_an_output_says_so_in_the_reference() -> None:
    from slonk_infra.declaration.inputs import accepted_fields

    text = (REPO / "docs" / "declaration.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines() if line.startswith("| `")}
    for path in accepted_fields():
        written = f"`{path.removesuffix('[*]').replace('[*]', '[]')}`"
        row = next((line for key, line in rows.items() if written in key.split("<br>")), None)
        assert row is not None, f"{written} has no row in docs/declaration.md"
        assert "Pulumi Output" in row, row


def test_the_old_boolean_accounting_form_is_accepted_by_the_schema_as_by_the_model(
    validator: jsonschema.Draft7Validator,
) -> None:
    # Stacks written for `accounting: true` + accountingHost still parse; an editor must not flag them.
    document = local_file()
    document["config"][CONFIG_KEY].setdefault("slurm", {}).update(accounting=True, accountingHost="dbd.example.org")
    parse_declaration(document["config"][CONFIG_KEY])
    assert schema_errors(validator, document) == []
    document["config"][CONFIG_KEY]["slurm"]["accounting"] = "yes please"
    assert schema_errors(validator, document)
