"""One CUDA image everywhere: every container of every Slurm workload runs the image the shared
policy configuration names, pinned by digest, from an allowed registry, with an allowed CUDA version."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from slonk_infra.catalog import load_catalog
from slonk_infra.policy.common import (
    CONFIG_FILE_HINT,
    STRING_LIST,
    setting,
    strings,
)
from slonk_infra.policy.images import parse_image, version_matches
from slonk_infra.policy.props import (
    containers,
    describe,
    is_slurm,
    pod_spec,
)


def _validate_uniform_image(args: ResourceValidationArgs, report: ReportViolation) -> None:  # noqa: C901  one check per container image rule
    spec = pod_spec(args.resource_type, args.props)
    if spec is None or not is_slurm(args.props):
        return
    expected = setting(args, "image")
    cuda = setting(args, "cudaVersion")
    allowed_cuda = strings(setting(args, "allowedCudaVersions"))
    registries = strings(setting(args, "allowedRegistries"))
    where = describe(args.resource_type, args.props, args.name)
    if cuda and allowed_cuda and not any(version_matches(str(cuda), a) for a in allowed_cuda):
        report(
            f"{where}: the policy configuration's cudaVersion {cuda} is not in allowedCudaVersions {allowed_cuda}",
            None,
        )
    # A GPU fabric's own daemon (GPUDirect-TCPXO's receive-datapath manager) is the cloud's image, named
    # with its version in the catalog (fabrics.yaml); it runs no CUDA workload.
    fabric_sidecars = {(f.sidecar.name, f.sidecar.image) for f in load_catalog().fabrics.values() if f.sidecar}
    for container in containers(spec):
        image = container.image
        if (container.name, image) in fabric_sidecars:
            continue
        prefix = f"{where} {container.role} {container.name}: image"
        if not isinstance(image, str) or not image:
            report(f"{prefix} is not set; every Slurm container runs the configured image {expected or '-'}", None)
            continue
        ref = parse_image(image)
        if isinstance(expected, str) and expected and image != expected:
            report(f"{prefix} {image} is not the configured Slurm image {expected}", None)
        if ref.tag == "latest":
            report(f"{prefix} {image} uses the :latest tag", None)
        if not ref.pinned:
            report(f"{prefix} {image} is not pinned by digest (@sha256:<64 hex digits>)", None)
        if registries and not ref.in_registries(registries):
            report(f"{prefix} {image} comes from {ref.registry}, which is not an allowed registry {registries}", None)
        if not cuda and not allowed_cuda:
            continue
        declared = ref.cuda_version()
        if declared is None:
            report(f"{prefix} {image} does not declare a CUDA version in its tag (expected ...-cuda{cuda}...)", None)
            continue
        if cuda and not version_matches(declared, str(cuda)):
            report(f"{prefix} {image} declares CUDA {declared}, but the configured cudaVersion is {cuda}", None)
        if allowed_cuda and not any(version_matches(declared, a) for a in allowed_cuda):
            report(
                f"{prefix} {image} declares CUDA {declared}, which is not in allowedCudaVersions {allowed_cuda}", None
            )


uniform_cuda_image = ResourceValidationPolicy(
    name="uniform-cuda-image",
    description=(
        "Every container of every Slurm workload runs the one image the shared policy configuration names: "
        "pinned by digest, from an allowed registry, with an allowed CUDA version."
    ),
    validate=_validate_uniform_image,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "image": {"type": "string", "description": "The image reference every Slurm container uses."},
            "cudaVersion": {"type": "string", "description": "CUDA version (major.minor) the image must declare."},
            "allowedCudaVersions": {**STRING_LIST, "description": "CUDA versions the fleet accepts."},
            "allowedRegistries": {**STRING_LIST, "description": "Registries (host or host/path prefixes) allowed."},
        },
        required=["image", "cudaVersion", "allowedCudaVersions", "allowedRegistries"],
    ),
    remediation_steps=(
        "Set the stack's `image.reference` (and `image.cudaVersion`) to the image named under "
        f"uniform-cuda-image.image in {CONFIG_FILE_HINT}, as registry/repo:tag@sha256:<digest>. For your own "
        "registry, image or digest, or to move the fleet to a new image or CUDA version, change your team's "
        "copy of that file (start from the packaged policy-config.json; do not edit the installed package) in "
        "one reviewed commit: every stack (local, gcp, aws) is checked against it. Do not patch single pools "
        "or containers to another image."
    ),
)
