"""Run the policy pack offline on what a program registered: ``slonk-infra check`` without the Pulumi CLI.

Each :class:`~slonk_infra.offline.runner.Registration` becomes the ``ResourceValidationArgs`` the analyzer would
build for it (inputs deserialized like the analyzer does, secrets unwrapped, wrapped in the proxy that
raises on unknown values, options with ``protect``), and all of them together the ``StackValidationArgs``
of the stack policies (parents and dependencies linked). Enforcement levels and properties come from the
same configuration file ``pulumi preview --policy-pack-config`` reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from inspect import isawaitable
from typing import TYPE_CHECKING, Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from slonk_infra.policy.config import PolicyConfig
from slonk_infra.policy.props import describe

if TYPE_CHECKING:
    from slonk_infra.offline.runner import Registration


class PolicyRunError(RuntimeError):
    """A policy raised instead of reporting (the CLI would fail the preview the same way)."""


@dataclass(frozen=True)
class Violation:
    """One reported violation."""

    policy: str
    level: EnforcementLevel
    message: str
    urn: str = ""

    def line(self) -> str:
        """How a CI log shows it: ``[mandatory] uniform-cuda-image: StatefulSet slurm/h100-a ...``."""
        return f"[{self.level.value}] {self.policy}: {self.message}"


@dataclass
class CheckResult:
    """Every violation of one run, and what could not be decided (values unknown before deployment)."""

    violations: list[Violation] = field(default_factory=list)
    undecided: list[Violation] = field(default_factory=list)
    resources: int = 0
    policies: Sequence[Policy] = ()

    @property
    def mandatory(self) -> list[Violation]:
        """Violations that block a deployment."""
        return [v for v in self.violations if v.level == EnforcementLevel.MANDATORY]

    @property
    def advisory(self) -> list[Violation]:
        """Violations that only warn."""
        return [v for v in self.violations if v.level == EnforcementLevel.ADVISORY]

    @property
    def failed(self) -> bool:
        """Whether ``pulumi preview`` with the pack would fail."""
        return bool(self.mandatory)

    def naming(self, text: str) -> list[Violation]:
        """Violations whose message mentions ``text`` (a group, a container, a resource)."""
        return [v for v in self.violations if text in v.message]


def _options(reg: Registration) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=reg.protect,
        ignore_changes=[],
        delete_before_replace=reg.delete_before_replace or None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=reg.parent or None,
    )


def analyzer_props(inputs: dict[str, Any]) -> Any:
    """Inputs as a policy sees them: secret envelopes unwrapped, unknowns raising on access."""
    return unknown_checking_proxy(deserialize_properties(inputs))


def _providers(registrations: Sequence[Registration]) -> dict[str, PolicyProviderResource]:
    out: dict[str, PolicyProviderResource] = {}
    for reg in registrations:
        if reg.type.startswith("pulumi:providers:"):
            out[reg.urn] = PolicyProviderResource(reg.type, analyzer_props(reg.inputs), reg.urn, reg.name)
    return out


def _provider_of(reg: Registration, providers: dict[str, PolicyProviderResource]) -> PolicyProviderResource | None:
    # A provider reference is "<provider urn>::<provider id>".
    return providers.get(reg.provider.rsplit("::", 1)[0]) if reg.provider else None


def _run(call: Any) -> None:
    result = call()
    if isawaitable(result):
        asyncio.run(_await(result))


async def _await(awaitable: Awaitable[Any]) -> None:
    await awaitable


def check_registrations(registrations: Sequence[Registration], config: PolicyConfig) -> CheckResult:
    """Run every enabled policy of the pack on ``registrations`` with ``config``."""
    from slonk_infra.policy.policies import ALL_POLICIES

    return run_policies(ALL_POLICIES, registrations, config)


def run_policies(
    policies: Iterable[Policy], registrations: Sequence[Registration], config: PolicyConfig
) -> CheckResult:
    """Run ``policies`` on ``registrations`` as the analyzer would during ``pulumi preview``."""
    policies = list(policies)
    result = CheckResult(resources=len(registrations), policies=policies)
    providers = _providers(registrations)
    prepared = [(reg, analyzer_props(reg.inputs), _options(reg), _provider_of(reg, providers)) for reg in registrations]
    for policy in policies:
        level = config.level(policy)
        if level == EnforcementLevel.DISABLED:
            continue
        # A remediation that still violates is reported as mandatory (as the analyzer does).
        shown = EnforcementLevel.MANDATORY if level == EnforcementLevel.REMEDIATE else level
        settings = config.for_policy(policy.name)
        if isinstance(policy, ResourceValidationPolicy):
            for reg, props, opts, provider in prepared:
                args = ResourceValidationArgs(reg.type, props, reg.urn, reg.name, opts, provider, settings)
                _collect(result, policy, shown, args, reg.urn, describe(reg.type, props, reg.name))
        elif isinstance(policy, StackValidationPolicy):
            stack_args = StackValidationArgs(_stack_resources(registrations, providers), settings)
            _collect(result, policy, shown, stack_args, "", "the stack")
    return result


def _collect(
    result: CheckResult,
    policy: ResourceValidationPolicy | StackValidationPolicy,
    level: EnforcementLevel,
    args: Any,
    urn: str,
    subject: str,
) -> None:
    def report(message: str, at: str | None = None) -> None:
        result.violations.append(Violation(policy.name, level, message, at or urn))

    try:
        _run(lambda: policy.validate(args, report))
    except UnknownValueError as err:
        # What the analyzer turns into an advisory "can't run policy during preview" diagnostic.
        result.undecided.append(
            Violation(policy.name, EnforcementLevel.ADVISORY, f"{subject}: {err.message}; not checked", urn)
        )
    except _NotApplicableError:
        pass
    except Exception as err:
        raise PolicyRunError(f"policy {policy.name} failed on {subject}: {err!r}") from err


def _stack_resources(
    registrations: Sequence[Registration], providers: dict[str, PolicyProviderResource]
) -> list[PolicyResource]:
    resources = [
        PolicyResource(
            reg.type,
            analyzer_props(reg.inputs),
            reg.urn,
            reg.name,
            _options(reg),
            _provider_of(reg, providers),
            None,
            [],
            {},
        )
        for reg in registrations
    ]
    by_urn = {r.urn: r for r in resources}
    for reg, resource in zip(registrations, resources, strict=True):
        resource.parent = by_urn.get(reg.parent)
        resource.dependencies = [by_urn[d] for d in reg.dependencies if d in by_urn]
    return resources


def format_report(stack: str, result: CheckResult, config_source: str, group: bool = False) -> str:
    """The CI log text of one check: violations, what to do about them, and a verdict line.

    Deduped, grouped by root cause and ordered by the rule of :mod:`slonk_infra.policy.report_formats`.
    With ``group``, one line per finding (a shared value wrong on many resources is one line); without,
    every violation on its own line, in the same order.
    """
    from slonk_infra.policy.report_formats import format_text

    return format_text(stack, result, config_source, every=not group)
