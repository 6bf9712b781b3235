"""What a first deploy on a cloud needs declared: the Kubernetes floor, who may reach a created cluster's
endpoint, a login load balancer that is internal when only private ranges may reach it, and the scale-in
warning without the operations controller."""

from __future__ import annotations

import dataclasses

import pytest

from slonk_infra.clouds import build_plan, registry
from slonk_infra.clouds.target import CloudTarget
from slonk_infra.declaration.errors import DeclarationError
from slonk_infra.declaration.networks import all_private
from slonk_infra.plan.checks import MIN_KUBERNETES
from tests.declaration.test_errors import Raw, aws, edit, gcp, local, pool

# (id, declaration, field path that must be named, fragments the message must contain)
REFUSED: list[tuple[str, Raw, str, list[str]]] = [
    (
        "gcp 1.28: no native sidecar for munged",
        edit(gcp, lambda r: r["kubernetes"].update(version="1.28")),
        "kubernetes.version",
        ["1.28 is older than 1.29", "restartPolicy: Always", "SidecarContainers", "KEP-753", "Use 1.29 or later"],
    ),
    (
        "aws 1.27",
        edit(aws, lambda r: r["kubernetes"].update(version="1.27")),
        "kubernetes.version",
        ["1.27 is older than 1.29"],
    ),
    (
        "local 1.26",
        edit(local, lambda r: r["kubernetes"].update(version="1.26")),
        "kubernetes.version",
        ["older than 1.29"],
    ),
    (
        "gcp creates a cluster and says nothing about its endpoint",
        edit(gcp, lambda r: r["kubernetes"].pop("authorizedNetworks")),
        "kubernetes.authorizedNetworks",
        ["is missing", "control-plane endpoint is public", "pulumi up", "['0.0.0.0/0'] opens it", "on purpose"],
    ),
    (
        "aws creates a cluster and says nothing about its endpoint",
        edit(aws, lambda r: r["kubernetes"].pop("authorizedNetworks")),
        "kubernetes.authorizedNetworks",
        ["is missing", "VPN or CI", "['0.0.0.0/0']"],
    ),
    (
        "aws: an empty list admits nobody, the deploy included",
        edit(aws, lambda r: r["kubernetes"].update(authorizedNetworks=[])),
        "kubernetes.authorizedNetworks",
        ["lists no range"],
    ),
]


def _refused(raw: Raw) -> list[str]:
    with pytest.raises(DeclarationError) as caught:
        build_plan(raw)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize(("case", "raw", "path", "fragments"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_by_field(case: str, raw: Raw, path: str, fragments: list[str]) -> None:
    problems = [p for p in _refused(raw) if p.startswith(f"{path}:")]
    assert len(problems) == 1, (case, _refused(raw))
    for fragment in fragments:
        assert fragment in problems[0], (case, fragment, problems[0])


@pytest.mark.parametrize(
    "raw",
    [
        edit(gcp, lambda r: r["kubernetes"].update(version=MIN_KUBERNETES)),
        edit(aws, lambda r: r["kubernetes"].update(version="1.29")),
        # Opening the endpoint to the world is allowed when said.
        edit(gcp, lambda r: r["kubernetes"].update(authorizedNetworks=["0.0.0.0/0"])),
        # An existing cluster: its endpoint is not this library's to restrict.
        edit(aws, lambda r: (r["kubernetes"].update(create=False), r["kubernetes"].pop("authorizedNetworks"))),
        local(),
    ],
    ids=["gcp-1.29", "aws-1.29", "gcp-open-on-purpose", "aws-existing-cluster", "local"],
)
def test_accepted(raw: Raw) -> None:
    build_plan(raw)


def test_the_floor_is_one_message_even_with_a_multi_host_tpu_slice() -> None:
    # 1.27 also lacks the pod-index label the slice needs, but the root cause is one: the floor.
    raw = edit(gcp, lambda r: (r["kubernetes"].update(version="1.27"), r.update(pools=[pool(r, -1)])))
    problems = _refused(raw)
    [only] = [p for p in problems if p.startswith("kubernetes.version")]
    assert "is older than 1.29" in only


SCALE_IN = "operations.enabled"


@pytest.mark.parametrize(
    "raw",
    [
        edit(gcp, lambda r: r["operations"].update(enabled=False)),
        edit(aws, lambda r: r.pop("operations")),
        # One CPU pool is enough: its VMs are removed as arbitrarily as GPU ones.
        edit(aws, lambda r: (r.pop("operations"), r.update(pools=[pool(r, -1)]))),
    ],
    ids=["gcp", "aws-default", "aws-cpu-only"],
)
def test_pools_without_operations_warn_that_scale_in_removes_arbitrary_machines(raw: Raw) -> None:
    [warning] = [w for w in build_plan(raw).warnings if w.path == SCALE_IN]
    assert "lowering nodes removes arbitrary machines" in warning.message
    assert "enable operations (with cloudActions) for safe scale-in" in warning.message


@pytest.mark.parametrize(
    "raw",
    [
        gcp(),
        aws(),
        edit(local, lambda r: r.update(operations={"enabled": False})),
        # Only TPU slices (fixed sizes, atomic): nothing to warn about.
        edit(gcp, lambda r: (r["operations"].update(enabled=False), r.update(pools=[]))),
    ],
    ids=["gcp-operations", "aws-operations", "local", "gcp-tpu-only"],
)
def test_no_scale_in_warning(raw: Raw) -> None:
    assert not [w for w in build_plan(raw).warnings if w.path == SCALE_IN]


# -- the login load balancer -----------------------------------------------------------------------------
INTERNAL = {"example.com/internal": "yes"}
EXTERNAL = {"example.com/external": "yes"}


@dataclasses.dataclass(frozen=True)
class AnnotatingTarget(CloudTarget):
    """A target overriding the hook as the GKE and EKS targets do."""

    def login_service_annotations(self, internal: bool) -> dict[str, str]:
        return dict(INTERNAL if internal else EXTERNAL)


def _targets(cloud: str) -> dict[str, CloudTarget]:
    found = registry.targets()
    base = found[cloud]
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return {**found, cloud: AnnotatingTarget(**fields)}


def _plan(raw: Raw, cloud: str) -> object:
    from slonk_infra.plan.resolve import build_plan as resolve

    return resolve(raw, targets=_targets(cloud))


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_shipped_stacks_get_an_internal_login_load_balancer(cloud: str) -> None:
    raw = gcp() if cloud == "gcp" else aws()
    plan = _plan(raw, cloud)
    assert plan.login_source_ranges is not None and all_private(plan.login_source_ranges)  # type: ignore[attr-defined]
    assert plan.login_service_annotations == INTERNAL  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("ranges", "expected"),
    [
        (["10.20.0.0/16"], INTERNAL),
        (["10.0.0.0/8", "192.168.1.0/24", "fd00::/8"], INTERNAL),
        (["10.0.0.0/8", "34.120.0.0/16"], EXTERNAL),
        (["0.0.0.0/0"], EXTERNAL),
    ],
)
def test_a_public_range_makes_the_load_balancer_external(ranges: list[str], expected: dict[str, str]) -> None:
    raw = edit(gcp, lambda r: r["login"].update(loadBalancerSourceRanges=ranges))
    assert _plan(raw, "gcp").login_service_annotations == expected  # type: ignore[attr-defined]


def test_no_annotation_for_a_cluster_ip_login_nor_from_the_base_target() -> None:
    clusterip = edit(gcp, lambda r: r["login"].update(serviceType="ClusterIP"))
    assert _plan(clusterip, "gcp").login_service_annotations == {}  # type: ignore[attr-defined]
    # The base CloudTarget answers nothing (local has no cloud load balancer to make internal).
    assert registry.target("local").login_service_annotations(True) == {}
    lb_local = edit(local, lambda r: r["login"].update(serviceType="LoadBalancer"))
    assert build_plan(lb_local).login_service_annotations == {}


def test_the_rendered_login_service_carries_the_targets_annotations() -> None:
    from slonk_infra.kube import login

    svc = login.service(_plan(gcp(), "gcp"))  # type: ignore[arg-type]
    assert svc["metadata"]["annotations"] == INTERNAL
    assert svc["spec"]["type"] == "LoadBalancer"


def test_private_means_ipaddress_private() -> None:
    assert all_private(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"])
    assert not all_private(["172.32.0.0/16"])  # just outside RFC 1918
    assert not all_private([])


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_the_real_targets_make_the_shipped_login_internal(cloud: str) -> None:
    plan = build_plan(gcp() if cloud == "gcp" else aws())
    internal = registry.target(cloud).login_service_annotations(True)
    assert internal, f"the {cloud} target names no internal load balancer annotation"
    assert plan.login_service_annotations == internal
    # A public range: the target's external form, never the internal annotation.
    raw = edit(gcp if cloud == "gcp" else aws, lambda r: r["login"].update(loadBalancerSourceRanges=["0.0.0.0/0"]))
    if cloud == "aws":
        raw["aws"]["publicSubnetIds"] = ["subnet-0ccccccccccccccccc"]
    public = build_plan(raw).login_service_annotations
    assert public == registry.target(cloud).login_service_annotations(False)
    assert not set(internal.items()) <= set(public.items())
