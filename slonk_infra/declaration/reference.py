"""The declaration's field reference (``docs/declaration.md``) and the JSON Schema of a stack file.

Both are generated from the pydantic model (:mod:`slonk_infra.declaration.model`), the one source of
truth, by ``python tools/generate.py``, and checked in; ``tests/declaration/test_generated.py`` fails
while either is stale. Nothing here is written by hand about a field: its path, type, default, allowed
values and description all come from the model and the JSON Schema pydantic derives from it.

The schema describes a whole ``Pulumi.<stack>.yaml`` file, so an editor given the file's modeline
(``# yaml-language-server: $schema=../docs/stack.schema.json``) completes and checks the declaration
under ``config: slonk-infra:cluster`` and leaves every other config key alone. It is draft-07, the
newest draft the YAML language server (and VS Code's JSON support under it) implements in full;
``check-jsonschema`` reads draft-07 as well.

The schema must never refuse a declaration the model accepts, so it is pydantic's schema loosened
where the model is looser than that schema says:

- pydantic's lax mode converts scalars: ``"16"`` and ``true`` are read as integers, ``"yes"``, ``"on"``,
  ``1`` as booleans, ``"1e3"`` as a number. A YAML 1.2 reader (the YAML language server, Pulumi,
  ``check-jsonschema``) hands ``yes`` over as a string where PyYAML (what the CLI reads with) makes it
  a boolean, so these forms do reach the model. Every integer, number and boolean therefore also
  accepts the strings and values pydantic converts (:data:`LAX_DEFINITIONS`);
- the models accept their Python (snake_case) field names besides the camelCase aliases (they are
  built from Python keyword arguments too), so each such name is a property too, marked
  ``doNotSuggest`` so that editors do not offer it;
- checks written as Python validators (DNS labels, versions, Slurm times, cron schedules, SSH keys,
  cross-field rules) have no JSON Schema form and stay out of it: the schema says "string" there, and
  the reference lists the rule in words (:data:`VALIDATOR_RULES`).

Misspelt keys are still refused: every declaration object keeps ``additionalProperties: false``.
"""

from __future__ import annotations

import copy
import inspect
import json
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from slonk_infra.declaration.inputs import accepts_output
from slonk_infra.declaration.model import SLURM_TIME_FORMS, TAGGED, ClusterDeclaration
from slonk_infra.declaration.stacks import CONFIG_KEY
from slonk_infra.declaration.users import MAX_ID, MIN_ID, NOBODY_ID

GENERATOR = "python tools/generate.py"
SOURCE = "slonk_infra/declaration/model.py"
SCHEMA_FILE = "docs/stack.schema.json"
DRAFT = "http://json-schema.org/draft-07/schema#"
# Strings pydantic's lax mode reads as numbers. Its parser is more forgiving than any neat grammar
# (underscores anywhere after the first character, leading zeros dropped before a sign: "0-4" is -4,
# "I_nF" is inf), and the schema must take all of it, so these are supersets: any run of digits, signs,
# underscores, dots (and exponents, for numbers) with a digit in it, or inf/infinity/nan in any case.
# They still refuse words ("two", "16GB"). Python's re and ECMA-262 (JSON Schema's patterns) read them
# the same: no inline flags, only character classes, groups, alternation and quantifiers.
INTEGER_STRING = r"^\s*[-+0-9_.]*[0-9][-+0-9_.]*\s*$"
NUMBER_STRING = (
    r"^\s*([-+0-9_.eE]*[0-9][-+0-9_.eE]*"
    r"|[-+_]*([Ii]_*[Nn]_*[Ff](_*[Ii]_*[Nn]_*[Ii]_*[Tt]_*[Yy])?|[Nn]_*[Aa]_*[Nn])_*)\s*$"
)
BOOLEAN_WORDS = ("0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes")


def _any_case(word: str) -> str:
    """An ECMA-compatible pattern piece matching ``word`` in any letter case (no ``(?i)`` in ECMA)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


BOOLEAN_STRING = "^(" + "|".join(_any_case(w) for w in BOOLEAN_WORDS) + ")$"

# The definitions the loosened scalars refer to; names chosen not to clash with a model's name.
LAX_DEFINITIONS: dict[str, dict[str, Any]] = {
    "LaxIntegerString": {
        "description": "An integer written as a string ('16'); the model reads it as the number.",
        "type": "string",
        "pattern": INTEGER_STRING,
    },
    "LaxNumberString": {
        "description": "A number written as a string ('0.5'); the model reads it as the number.",
        "type": "string",
        "pattern": NUMBER_STRING,
    },
    "LaxBooleanString": {
        "description": "A boolean written as a word the model reads as one (yes/no, on/off, true/false, y/n, t/f, 1/0).",
        "type": "string",
        "pattern": BOOLEAN_STRING,
    },
}


@dataclass(frozen=True)
class Rule:
    """A Python validator's check in words, and a value it accepts (for examples no stack shows)."""

    text: str
    example: Any = None


# Checks written as Python validators, by the validator's ``module.qualname``. Names in braces are
# the validator's closure variables (``_dns_label(30)`` keeps ``max_len``). A validator missing here
# is described by its docstring's first line; one with neither stops the generator.
VALIDATOR_RULES: dict[str, Rule] = {
    "slonk_infra.declaration.model._dns_label.<locals>.check": Rule(
        "DNS-1123 label of at most {max_len} characters: lowercase letters, digits and '-', "
        "starting with a letter, ending with a letter or digit",
        "research",
    ),
    "slonk_infra.declaration.model._version": Rule('a version like 25.05 or 12.8 (quoted: "12.8")', "25.05"),
    "slonk_infra.declaration.model._slurm_time": Rule(f"a Slurm time: {SLURM_TIME_FORMS} (quoted)", "2-00:00:00"),
    "slonk_infra.declaration.model._cidr": Rule("a CIDR range like 203.0.113.0/24", "203.0.113.0/24"),
    "slonk_infra.declaration.model._image": Rule("an image reference registry/repository[:tag][@sha256:<digest>]"),
    "slonk_infra.declaration.model._cron": Rule(
        "a five-field cron schedule (minute hour day-of-month month day-of-week)", "*/30 * * * *"
    ),
    "slonk_infra.declaration.users._id": Rule(f"{MIN_ID} to {MAX_ID}, not {NOBODY_ID}", 2001),
    "slonk_infra.declaration.users._consistent": Rule("names and uids unique; a gid has one group name"),
    "slonk_infra.declaration.users.UserSpec._name": Rule(
        "a POSIX name: lowercase letters, digits, '_' and '-', at most 32; not a system account of the image", "alice"
    ),
    "slonk_infra.declaration.users.UserSpec._keys": Rule("OpenSSH public key lines ('ssh-ed25519 AAAA... comment')"),
    "slonk_infra.declaration.users.DirectorySpec._uris": Rule(
        "ldaps://host[:port] or ldap://host[:port]", ["ldaps://ldap.example.org"]
    ),
    "slonk_infra.declaration.users.DirectorySpec._dn": Rule(
        "a distinguished name like dc=example,dc=org", "dc=example,dc=org"
    ),
}

# Keywords that only annotate a schema; the rest constrain the value.
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "doNotSuggest"})
# A default longer than this (as YAML flow text) goes into a block after the section's table.
INLINE_DEFAULT = 60

Kind = Literal["one", "list", "map"]


# ------------------------------------------------------------------------------------------ schema
def stack_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of a whole stack file, the declaration under ``config``."""
    raw = TAGGED.json_schema(by_alias=True, ref_template="#/definitions/{model}")
    definitions: dict[str, Any] = raw.pop("$defs")
    models = _models_by_name()
    if set(definitions) != set(models) or set(definitions) & set(LAX_DEFINITIONS):
        raise RuntimeError(f"schema definitions {sorted(definitions)} do not match the models {sorted(models)}")
    for name, definition in definitions.items():
        _accept_python_names(name, definition, models[name])
    definitions.update(copy.deepcopy(LAX_DEFINITIONS))
    declaration = _by_cloud(raw["discriminator"]["mapping"])
    schema: dict[str, Any] = {
        "$schema": DRAFT,
        "$comment": f"Generated from {SOURCE} by `{GENERATOR}`; do not edit.",
        "title": "slonk-infra stack file (Pulumi.<stack>.yaml)",
        "description": f"A Pulumi stack settings file whose config holds the slonk-infra cluster declaration under {CONFIG_KEY}.",
        "type": "object",
        "required": ["config"],
        "properties": {
            "config": {
                "description": f"Stack configuration. {CONFIG_KEY} is the cluster declaration (a stack of your "
                "own program, whose code declares the cluster, has none); other keys (kubernetes:..., "
                "gcp:project, aws:region, a program's own) are Pulumi's and the providers'.",
                "type": "object",
                "properties": {CONFIG_KEY: declaration},
            },
            "secretsprovider": {"description": "Pulumi: the stack's secrets provider.", "type": "string"},
            "encryptedkey": {"description": "Pulumi: the secrets provider's encrypted data key.", "type": "string"},
            "encryptionsalt": {"description": "Pulumi: the passphrase provider's salt.", "type": "string"},
            "environment": {"description": "Pulumi ESC: the environments the stack imports."},
        },
        "definitions": definitions,
    }
    finished: dict[str, Any] = _finish(schema)
    return finished


def stack_schema_text() -> str:
    """``docs/stack.schema.json``'s text."""
    return json.dumps(stack_schema(), indent=2, ensure_ascii=False) + "\n"


def _models_by_name() -> dict[str, type[BaseModel]]:
    """Every model the tagged declaration reaches, by the name pydantic gives its definition."""
    found: dict[str, type[BaseModel]] = {}
    pending: list[type[BaseModel]] = list(_tagged_classes().values())
    while pending:
        model = pending.pop()
        if found.setdefault(model.__name__, model) is not model:
            raise RuntimeError(f"two models are named {model.__name__}; the schema needs unique names")
        for info in model.model_fields.values():
            pending.extend(m for m in _models_in(info.annotation) if m.__name__ not in found)
    return found


def _by_cloud(mapping: Mapping[str, str]) -> dict[str, Any]:
    """The declaration: ``cloud`` picks the class (pydantic's discriminator mapping), as if/then.

    pydantic writes the union as ``oneOf`` with an OpenAPI ``discriminator``, which draft-07 does not
    know; a validator then reports every class's errors, and one of them best matches the wrong
    cloud ("'gcp' is a required property" for a typo in a local pool). ``if cloud is X then X's
    class`` reports the errors of the declared cloud's class alone, and editors complete its fields.
    """
    cloud = ClusterDeclaration.model_fields["cloud"].description
    return {
        "description": f"{_doc(ClusterDeclaration)} Every field: docs/declaration.md.",
        "type": "object",
        "required": ["cloud"],
        "properties": {"cloud": {"description": f"{cloud} It decides which settings apply.", "enum": list(mapping)}},
        "allOf": [
            {
                "if": {"properties": {"cloud": {"const": tag}}, "required": ["cloud"]},
                "then": {"$ref": ref},
            }
            for tag, ref in mapping.items()
        ],
    }


def _accept_python_names(name: str, definition: dict[str, Any], model: type[BaseModel]) -> None:
    """Allow the snake_case field names the model accepts, without offering them for completion.

    Each is a property of its own that refers to its camelCase twin; ``doNotSuggest`` (the YAML and
    JSON language servers' extension) keeps it out of completion, and a misspelt key is still refused
    with the plain "additional properties" message.
    """
    config = model.model_config
    if not (config.get("populate_by_name") or config.get("validate_by_name")):
        return
    renamed = {key: info.alias for key, info in model.model_fields.items() if info.alias and info.alias != key}
    properties: dict[str, Any] = definition["properties"]
    for key, alias in renamed.items():
        properties[key] = {
            "description": f"{alias} under its Python name; write {alias}.",
            "doNotSuggest": True,
            "$ref": f"#/definitions/{name}/properties/{alias}",
        }
    # A required field is present under either name.
    required: list[str] = definition.get("required", [])
    either = [
        {"anyOf": [{"required": [alias]}, {"required": [key]}]} for key, alias in renamed.items() if alias in required
    ]
    if either:
        definition["required"] = [r for r in required if r not in set(renamed.values())]
        if not definition["required"]:
            del definition["required"]
        definition["allOf"] = either


def _finish(node: Any) -> Any:
    """Titles out (pydantic's are the Python names), scalars loosened, ``$ref`` siblings kept by draft-07."""
    if isinstance(node, list):
        return [_finish(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: _finish(sub) for name, sub in value.items()}
        elif key in ("default", "enum", "const", "examples", "required"):
            out[key] = value  # values, not schemas
        elif key == "title" and "$schema" not in node:
            continue
        else:
            out[key] = _finish(value)
    out = _loosen(out)
    if "anyOf" in out:
        # ``int | None`` loosened is an anyOf inside an anyOf: one level reads the same and is shorter.
        out["anyOf"] = [b for a in out["anyOf"] for b in (a["anyOf"] if set(a) == {"anyOf"} else [a])]
    if "$ref" in out and len(out) > 1:
        # Draft-07 ignores every keyword beside $ref; the reference goes into allOf so the
        # description and default next to it still count.
        out = {**{k: v for k, v in out.items() if k != "$ref"}, "allOf": [{"$ref": out["$ref"]}]}
    return out


def _loosen(node: dict[str, Any]) -> dict[str, Any]:
    """An integer, number or boolean schema that also takes what pydantic's lax mode converts."""
    kind = node.get("type")
    if kind not in ("integer", "number", "boolean"):
        return node
    if "enum" in node or "const" in node:
        # A Literal of numbers or booleans: pydantic's lax conversions differ there; none exists yet.
        raise RuntimeError(f"no loosening for a literal {kind}: {node}")
    strict = {k: v for k, v in node.items() if k not in ANNOTATIONS}
    notes = {k: v for k, v in node.items() if k in ANNOTATIONS}
    if kind == "boolean":
        alternatives: list[dict[str, Any]] = [strict, {"enum": [0, 1]}, {"$ref": "#/definitions/LaxBooleanString"}]
    else:
        string = "LaxIntegerString" if kind == "integer" else "LaxNumberString"
        alternatives = [strict, {"$ref": f"#/definitions/{string}"}, {"type": "boolean"}]
    return {**notes, "anyOf": alternatives}


# ----------------------------------------------------------------------------------------- sections
@dataclass(frozen=True)
class Step:
    """One key of a YAML path: the field's alias and how the section sits under it."""

    key: str
    kind: Kind

    def text(self) -> str:
        """``pools[]``, ``kubernetes`` or ``labels.<key>``."""
        return self.key + {"one": "", "list": "[]", "map": ".<key>"}[self.kind]


@dataclass
class Section:
    """One model of the declaration: where it appears, which cloud it belongs to (None: every cloud)."""

    model: type[BaseModel]
    paths: list[tuple[Step, ...]] = field(default_factory=list)
    cloud: str | None = None

    @property
    def anchor(self) -> str:
        """The section's HTML anchor in the reference."""
        return self.model.__name__.lower()

    def path_texts(self, leaf: str | None = None) -> list[str]:
        """Each path of the section (or of its field ``leaf``) as YAML dotted text."""
        out = []
        for path in self.paths:
            parts = [s.text() for s in path]
            if leaf is not None:
                parts.append(leaf)
            out.append(".".join(parts))
        return out


def _tagged_classes() -> dict[str, type[ClusterDeclaration]]:
    """The per-cloud declaration classes by their ``cloud`` tag."""
    out: dict[str, type[ClusterDeclaration]] = {}
    for cls in ClusterDeclaration.__subclasses__():
        (tag,) = get_args(cls.model_fields["cloud"].annotation)
        out[str(tag)] = cls
    return out


def cloud_rules(field_name: str) -> dict[str, Literal["required", "optional", "not allowed"]]:
    """How each cloud's declaration treats a top-level field (by Python name)."""
    out: dict[str, Literal["required", "optional", "not allowed"]] = {}
    for tag, cls in _tagged_classes().items():
        info = cls.model_fields[field_name]
        if info.annotation is type(None):
            out[tag] = "not allowed"
        else:
            out[tag] = "required" if info.is_required() else "optional"
    return out


def _cloud_of(field_name: str) -> str | None:
    """The one cloud a top-level field belongs to: allowed with that cloud alone."""
    allowed = [tag for tag, rule in cloud_rules(field_name).items() if rule != "not allowed"]
    return allowed[0] if len(allowed) == 1 else None


def sections() -> list[Section]:
    """Every model of the declaration, the root first, then in field order, depth first."""
    found: dict[type[BaseModel], Section] = {}

    def visit(model: type[BaseModel], path: tuple[Step, ...], cloud: str | None) -> None:
        section = found.get(model)
        if section is None:
            section = found[model] = Section(model, cloud=cloud)
        elif section.cloud != cloud:
            section.cloud = None
        section.paths.append(path)
        for name, info in model.model_fields.items():
            for nested, kind in _nested(info.annotation):
                inner_cloud = cloud or (_cloud_of(name) if model is ClusterDeclaration else None)
                visit(nested, (*path, Step(_alias(name, info), kind)), inner_cloud)

    visit(ClusterDeclaration, (), None)
    return list(found.values())


def _alias(name: str, info: FieldInfo) -> str:
    return info.alias or name


def _unwrap(annotation: Any) -> Any:
    """The type inside ``Annotated[...]`` and ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _nested(annotation: Any) -> list[tuple[type[BaseModel], Kind]]:
    """The models a field holds directly (``one``), as list items (``list``) or as map values (``map``)."""
    inner = _unwrap(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return [(inner, "one")]
    origin = get_origin(inner)
    args = get_args(inner)
    if origin is list and args:
        return [(m, "list") for m in _models_in(args[0])]
    if origin is dict and len(args) == 2:
        return [(m, "map") for m in _models_in(args[1])]
    return []


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """Every model named anywhere in an annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in get_args(annotation):
        yield from _models_in(arg)


# --------------------------------------------------------------------------------------- the table
def _validators(info: FieldInfo, model: type[BaseModel], name: str) -> list[Callable[..., Any]]:
    """The Python validators that check a field: its own, its items', and the model's for it."""
    funcs: list[Callable[..., Any]] = []

    def collect(metadata: Sequence[Any]) -> None:
        funcs.extend(m.func for m in metadata if callable(getattr(m, "func", None)))

    collect(info.metadata)
    pending: list[Any] = [info.annotation]
    while pending:
        annotation = pending.pop()
        if get_origin(annotation) is typing.Annotated:
            collect(annotation.__metadata__)
        pending.extend(get_args(annotation))
    for decorator in model.__pydantic_decorators__.field_validators.values():
        if name in decorator.info.fields or "*" in decorator.info.fields:
            funcs.append(decorator.func)
    return [inspect.unwrap(getattr(f, "__func__", f)) for f in funcs]


def _rule(func: Callable[..., Any]) -> Rule:
    """A validator's rule, its text filled in from the validator's closure."""
    key = f"{func.__module__}.{func.__qualname__}"
    rule = VALIDATOR_RULES.get(key)
    if rule is None:
        doc = inspect.getdoc(func)
        if not doc:
            raise RuntimeError(
                f"validator {key} has no docstring and no entry in VALIDATOR_RULES "
                "(slonk_infra/declaration/reference.py): say in words what it checks"
            )
        return Rule(doc.splitlines()[0].rstrip("."))
    return Rule(rule.text.format(**inspect.getclosurevars(func).nonlocals), rule.example)


def _rules(info: FieldInfo, model: type[BaseModel], name: str) -> list[Rule]:
    return [_rule(f) for f in _validators(info, model, name)]


def _type_text(schema: Mapping[str, Any], anchors: Mapping[str, str]) -> str:
    """A property's type in words, from pydantic's schema of it; models link to their section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[object](#{anchors[name]})"
    if "anyOf" in schema:
        parts = [_type_text(s, anchors) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(parts) or "null"
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type_text(schema.get('items', {}), anchors)}"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"map of {_type_text(values, anchors)}" if isinstance(values, dict) else "object"
    if "const" in schema:
        return "string"
    return str(kind or "any")


def _constraints(schema: Mapping[str, Any]) -> list[str]:
    """What a property's schema allows beyond its type: literals, bounds, lengths, patterns."""
    out: list[str] = []
    if "enum" in schema:
        out.append("one of " + ", ".join(_code(v) for v in schema["enum"]))
    if "const" in schema:
        out.append(_code(schema["const"]))
    for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
        if key in schema:
            out.append(f"{sign} {schema[key]}")
    for key, words, noun in (
        ("minLength", "at least", "character"),
        ("maxLength", "at most", "character"),
        ("minItems", "at least", "item"),
        ("maxItems", "at most", "item"),
    ):
        if key in schema:
            out.append(f"{words} {schema[key]} {noun}{'' if schema[key] == 1 else 's'}")
    if "pattern" in schema:
        out.append(f"matches {_code(schema['pattern'])}")
    for branch in schema.get("anyOf", ()):
        out.extend(_constraints(branch))
    items = schema.get("items")
    if isinstance(items, dict) and (inner := _constraints(items)):
        out.append("each " + "; ".join(inner))
    keys = schema.get("propertyNames", {})
    if "enum" in keys:
        out.append("keys: " + ", ".join(_code(v) for v in keys["enum"]))
    values = schema.get("additionalProperties")
    if isinstance(values, dict) and (inner := _constraints(values)):
        out.append("values: " + "; ".join(inner))
    return out


def _code(value: Any) -> str:
    """Inline code for a value as YAML writes it (a string YAML would read as a number stays quoted)."""
    text = value if isinstance(value, str) and _plain(value) else _flow(value)
    return f"`{text}`"


def _plain(text: str) -> bool:
    """Whether YAML reads ``text`` unquoted back as the same string."""
    try:
        return bool(text) and yaml.safe_load(text) == text and "\n" not in text
    except yaml.YAMLError:
        return False


def _flow(value: Any) -> str:
    """A value as one line of YAML flow style."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _default(info: FieldInfo) -> tuple[str, Any]:
    """``(kind, value)``: ``required``, ``unset`` (None), ``model`` (a nested model's defaults) or ``value``."""
    if info.is_required():
        return "required", None
    value = info.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "unset", None
    if isinstance(value, BaseModel):
        return "model", None
    return "value", to_jsonable_python(value, by_alias=True)


def _doc(model: type[BaseModel]) -> str:
    """A model's docstring as Markdown (reST's double backticks become single ones)."""
    return inspect.cleandoc(model.__doc__ or "").replace("``", "`")


# ----------------------------------------------------------------------------------------- examples
Source = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Example:
    """A section's example: the object itself, where it came from, and the YAML shown."""

    section: Section
    data: Any
    origin: str
    text: str


def _instances(raw: Any, path: Sequence[Step]) -> Iterator[Any]:
    """The objects at ``path`` in a raw declaration."""
    if not path:
        yield raw
        return
    step, rest = path[0], path[1:]
    if not isinstance(raw, Mapping) or step.key not in raw:
        return
    value = raw[step.key]
    if step.kind == "one":
        yield from _instances(value, rest)
    elif step.kind == "list" and isinstance(value, list):
        for item in value:
            yield from _instances(item, rest)
    elif step.kind == "map" and isinstance(value, Mapping):
        for item in value.values():
            yield from _instances(item, rest)


def _nest(path: Sequence[Step], data: Any) -> Any:
    """``data`` placed at ``path`` (one list item, one map key), for showing where it goes."""
    for step in reversed(path):
        if step.kind == "list":
            data = [data]
        elif step.kind == "map":
            data = {"<key>": data}
        data = {step.key: data}
    return data


class _StackDumper(yaml.SafeDumper):
    """YAML as the shipped stacks write it: block style, list items indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    # A short list of scalars stays on one line, as the stacks write ``features: [bigmem]``.
    flow = all(not isinstance(item, list | dict) for item in data) and len(_flow(data)) <= INLINE_DEFAULT
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_StackDumper.add_representer(list, _represent_list)


def _block(data: Any) -> str:
    """``data`` as block YAML."""
    return yaml.dump(
        data, Dumper=_StackDumper, sort_keys=False, default_flow_style=False, width=110, allow_unicode=True
    )


def _field_default_instance(parent: type[BaseModel], key: str) -> Any:
    """The first object in a field's default (``xidRules`` defaults to a list of rules), or None."""
    for name, info in parent.model_fields.items():
        if _alias(name, info) == key and not info.is_required():
            kind, value = _default(info)
            if kind == "value" and isinstance(value, list) and value:
                return value[0]
            if kind == "value" and isinstance(value, dict) and value:
                return next(iter(value.values()))
    return None


def _defaults_only(model: type[BaseModel]) -> dict[str, Any]:
    """A model's short defaults (scalars and short lists), for a section no shipped stack shows.

    Empty when the model has a required field: no default makes an example of it.
    """
    out: dict[str, Any] = {}
    if any(info.is_required() for info in model.model_fields.values()):
        return out
    for name, info in model.model_fields.items():
        kind, value = _default(info)
        if kind == "value" and len(_flow(value)) <= INLINE_DEFAULT:
            out[_alias(name, info)] = value
    return out


def examples(sources: Sequence[Source]) -> list[Example]:
    """One example per section: from the first source that has the section, else from the model's defaults.

    ``sources`` are ``(file, declaration)`` pairs, the shipped stacks and examples. The root's example
    is a declaration of its required fields alone, taken from a ``cloud: local`` source when there is one.
    """
    all_sections = sections()
    parents = {s.model: s for s in all_sections}
    out: list[Example] = []
    for section in all_sections:
        if section.model is ClusterDeclaration:
            out.append(_root_example(section, sources))
            continue
        path = section.paths[0]
        data, origin = None, ""
        found = next(((i, f, p) for f, d in sources for p in section.paths for i in _instances(d, p)), None)
        if found is not None:
            data, file, path = found
            origin = f"from `{file}`"
        if data is None:
            parent = _parent_model(path, parents)
            data = _field_default_instance(parent, path[-1].key) if parent else None
            origin = f"the default of `{section.path_texts()[0]}`"
        if data is None and (data := _defaults_only(section.model)):
            origin = "its short fields at their defaults"
        if not data and (data := _required_only(section.model)):
            origin = "its required fields, made from their rules"
        if not data:
            raise RuntimeError(
                f"no example for {section.path_texts()[0]} ({section.model.__name__}): "
                "use it in a shipped stack or in examples/"
            )
        text = _block(_nest(path, data))
        out.append(Example(section, data, origin, text))
    return out


def _required_only(model: type[BaseModel]) -> dict[str, Any]:
    """The required fields, each at a value its rules give as an example (empty: one has none)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if not info.is_required():
            continue
        examples = [r.example for r in _rules(info, model, name) if r.example is not None]
        literal = _unwrap(info.annotation)
        if examples:
            out[_alias(name, info)] = examples[0]
        elif get_origin(literal) is Literal:
            out[_alias(name, info)] = get_args(literal)[0]
        else:
            return {}
    return out


def _parent_model(path: Sequence[Step], models: Mapping[type[BaseModel], Section]) -> type[BaseModel] | None:
    """The model holding the last step of ``path``."""
    for model, section in models.items():
        if tuple(path[:-1]) in section.paths:
            return model
    return None


def _root_example(section: Section, sources: Sequence[Source]) -> Example:
    """The smallest declaration the model takes: the required fields of a shipped one."""
    if not sources:
        raise RuntimeError("the reference needs at least one shipped stack for its examples")
    file, declaration = next(((f, d) for f, d in sources if d.get("cloud") == "local"), sources[0])
    cls = _tagged_classes()[str(declaration["cloud"])]
    required = {_alias(n, i) for n, i in cls.model_fields.items() if i.is_required()}
    data = {k: v for k, v in declaration.items() if k in required}
    text = _block({"config": {CONFIG_KEY: data}})
    return Example(section, data, f"the required fields of `{file}`", text)


# -------------------------------------------------------------------------------------- the document
def reference_markdown(sources: Sequence[Source]) -> str:
    """``docs/declaration.md``: every field of the declaration by section, with an example each."""
    all_sections = sections()
    anchors = {s.model.__name__: s.anchor for s in all_sections}
    shown = {e.section.model: e for e in examples(sources)}
    raw = TAGGED.json_schema(by_alias=True)["$defs"]
    # The root's fields are documented from the per-cloud classes' common base (its ``cloud`` is any
    # tag, ``gcp`` and ``aws`` optional); cloud_rules() words what each cloud's class makes of them.
    raw[ClusterDeclaration.__name__] = ClusterDeclaration.model_json_schema(by_alias=True)
    lines = [
        "# The cluster declaration: every field",
        "",
        f"<!-- Generated from {SOURCE} by `{GENERATOR}`; do not edit. -->",
        "",
        f"A stack file (`stacks/Pulumi.<stack>.yaml`) holds the declaration under `config:` as `{CONFIG_KEY}`;",
        "other config keys (`kubernetes:...`, `gcp:project`, a program's own) are Pulumi's and are left alone.",
        "Keys are camelCase (the Python snake_case names are accepted too); a key the model does not know is",
        "refused, with the closest known one.",
        f"[`{SCHEMA_FILE}`](stack.schema.json) is the JSON Schema of a whole stack file: with",
        "`# yaml-language-server: $schema=../docs/stack.schema.json` as its first line (as the shipped stacks",
        "have), an editor with the YAML language server completes and checks the fields below.",
        "The schema holds types, allowed values and bounds; the rules in words below (names, versions,",
        "times, keys) and the rules across fields are checked by `slonk-infra validate`.",
        "",
        "Examples come from the shipped stacks (`stacks/`, `examples/`) or, where none uses a section, from",
        'the model\'s defaults and rules. Quote versions and times (`"1.33"`, `"12.8"`, `"30:00"`): unquoted,',
        "YAML may read them as numbers.",
        "",
        "## Sections",
        "",
    ]
    for section in all_sections:
        title = _title(section)
        lines.append(f"- [{title}](#{section.anchor}): {_doc(section.model).splitlines()[0]}")
    for section in all_sections:
        lines += ["", *_section(section, raw[section.model.__name__], anchors, shown[section.model])]
    return "\n".join(lines) + "\n"


def _title(section: Section) -> str:
    if section.model is ClusterDeclaration:
        return f"the declaration (`{CONFIG_KEY}`)"
    return ", ".join(f"`{p}`" for p in section.path_texts())


def _section(section: Section, schema: Mapping[str, Any], anchors: Mapping[str, str], example: Example) -> list[str]:
    """One section: heading, docstring, where it applies, the field table, long defaults, the example."""
    lines = [f'<a id="{section.anchor}"></a>', "", f"## {_title(section)[0].upper()}{_title(section)[1:]}", ""]
    lines += [_doc(section.model), ""]
    if section.cloud is not None:
        lines += [f"Only with `cloud: {section.cloud}`.", ""]
    lines += [
        "| field | type | required / default | allowed values | description |",
        "|---|---|---|---|---|",
    ]
    long_defaults: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for name, info in section.model.model_fields.items():
        key = _alias(name, info)
        prop = properties.get(key, {})
        paths = "<br>".join(f"`{p}`" for p in section.path_texts(key))
        allowed = _constraints(prop) + [r.text for r in _rules(info, section.model, name)]
        item = get_args(_unwrap(info.annotation)) if get_origin(_unwrap(info.annotation)) is list else ()
        if accepts_output(info.annotation, tuple(info.metadata)) or (item and accepts_output(item[0])):
            each = "each item " if item else ""
            allowed.append(
                f"in a program {each}also a Pulumi Output ([composing](components.md#composing-with-your-own-program))"
            )
        description = info.description or ""
        need = _need(section, name, info, key, long_defaults)
        row = [paths, _type_text(prop, anchors), need, "; ".join(allowed) or "", description]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    if long_defaults:
        lines += ["", "Defaults too long for the table:", "", "```yaml", _block(long_defaults).rstrip(), "```"]
    lines += ["", f"Example ({example.origin}):", "", "```yaml", example.text.rstrip(), "```"]
    return lines


def _need(section: Section, name: str, info: FieldInfo, key: str, long_defaults: dict[str, Any]) -> str:
    """The 'required / default' cell; a long default is kept for the block after the table."""
    if section.model is ClusterDeclaration and name != "cloud":
        rules = cloud_rules(name)
        if len(set(rules.values())) > 1:
            by_rule: dict[str, list[str]] = {}
            for tag, rule in rules.items():
                by_rule.setdefault(rule, []).append(f"`cloud: {tag}`")
            return "; ".join(f"{rule} with {', '.join(tags)}" for rule, tags in by_rule.items())
    kind, value = _default(info)
    if kind == "required":
        return "**required**"
    if kind == "unset":
        return "unset"
    if kind == "model":
        return "each field's default"
    text = _flow(value)
    if len(text) > INLINE_DEFAULT and isinstance(value, list | dict):
        long_defaults[key] = value
        return "default: below the table"
    return f"default: {_code(value)}"


__all__ = [
    "Example",
    "Rule",
    "Section",
    "Source",
    "Step",
    "cloud_rules",
    "examples",
    "reference_markdown",
    "sections",
    "stack_schema",
    "stack_schema_text",
]
