"""The slonk-infra policies: what every stack (local, gcp, aws) must satisfy before it deploys.

Importable on purpose: constructing a ``PolicyPack`` starts the analyzer's gRPC server and blocks, so
only ``policies/__main__.py`` builds the pack, while tests and ``slonk-infra check`` call these policies
directly. Every message names the resource (``StatefulSet slurm/h100-a``), the container where there is
one, and the offending value; ``remediation_steps`` says how to fix it.

Resource policies see one resource's inputs and options (``protect`` included); stack policies see every
resource and are used where a rule spans objects (a worker and the Slurm config, a node pool and a
StatefulSet).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from slonk_infra.kube.names import COMPONENT as COMPONENT_LABEL
from slonk_infra.kube.names import CONFIG_MAP as SLURM_CONFIG_MAP
from slonk_infra.kube.names import GPU_RESOURCE, NODEPOOL_LABEL, POOL_LABEL, TPU_RESOURCE, TPU_TOPOLOGY_LABEL
from slonk_infra.policy import secrets, slurmconf
from slonk_infra.policy.images import parse_image, version_matches
from slonk_infra.policy.props import (
    accelerator_container,
    accelerator_limits,
    as_int,
    containers,
    describe,
    dims_product,
    get,
    is_list,
    is_slurm,
    items,
    kind_of,
    known,
    labels,
    pod_spec,
    worker_group,
)

PACK_NAME = "slonk-infra-policies"
CONFIG_FILE_HINT = "policies/policy-config.json"

# --------------------------------------------------------------------------------------------- config
STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
MAX_BLOB_CHARS = 512
MIN_ENTROPY = 4.5
ALLOWED_PRIVILEGED = ["worker/slurmd", "nfs/nfs"]
PROTECTED_CLAIMS = ["slurmctld-state"]
MIN_GRACE_SECONDS = 120


def _setting(args: ResourceValidationArgs | StackValidationArgs, key: str, default: Any = None) -> Any:
    """A policy configuration value; the CLI fills schema defaults, hand-built args may not."""
    value = args.get_config().get(key)
    return default if value is None else value


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if is_list(value) else []


# ----------------------------------------------------------------------------------- uniform image
def _validate_uniform_image(args: ResourceValidationArgs, report: ReportViolation) -> None:
    spec = pod_spec(args.resource_type, args.props)
    if spec is None or not is_slurm(args.props):
        return
    expected = _setting(args, "image")
    cuda = _setting(args, "cudaVersion")
    allowed_cuda = _strings(_setting(args, "allowedCudaVersions"))
    registries = _strings(_setting(args, "allowedRegistries"))
    where = describe(args.resource_type, args.props, args.name)
    if cuda and allowed_cuda and not any(version_matches(str(cuda), a) for a in allowed_cuda):
        report(
            f"{where}: the policy configuration's cudaVersion {cuda} is not in allowedCudaVersions {allowed_cuda}",
            None,
        )
    for container in containers(spec):
        image = container.image
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
        "Set the stack's `image.reference` (and `image.cudaVersion`) to the image named in "
        f"{CONFIG_FILE_HINT} under uniform-cuda-image.image, as registry/repo:tag@sha256:<digest>. To move the "
        "fleet to a new image or CUDA version, change that file in one reviewed commit: every stack (local, "
        "gcp, aws) is checked against it. Do not patch single pools or containers to another image."
    ),
)


# ------------------------------------------------------------------------------ stateful resources
STATEFUL_CLOUD_TYPES = {
    "gcp:filestore/instance:Instance": "Filestore instance",
    "aws:efs/fileSystem:FileSystem": "EFS file system",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "FSx for Lustre file system",
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem": "FSx for OpenZFS file system",
}
SHARED_ACCESS_MODES = {"ReadWriteMany", "ReadOnlyMany"}


def _validate_stateful(args: ResourceValidationArgs, report: ReportViolation) -> None:
    kind = kind_of(args.resource_type)
    where = describe(args.resource_type, args.props, args.name)
    claims = _strings(_setting(args, "claimNames", PROTECTED_CLAIMS))
    what: str | None = STATEFUL_CLOUD_TYPES.get(args.resource_type)
    if kind in ("PersistentVolume", "PersistentVolumeClaim"):
        modes = set(_strings(get(args.props, "spec", "accessModes")))
        claim = get(args.props, "metadata", "name") if kind == "PersistentVolumeClaim" else None
        bound = get(args.props, "spec", "claimRef", "name") if kind == "PersistentVolume" else None
        if modes & SHARED_ACCESS_MODES:
            what = f"shared {kind} ({', '.join(sorted(modes & SHARED_ACCESS_MODES))})"
        elif claim in claims or bound in claims:
            what = f"{kind} of Slurm controller state"
        if what and kind == "PersistentVolume":
            reclaim = get(args.props, "spec", "persistentVolumeReclaimPolicy")
            if reclaim not in (None, "Retain"):
                report(
                    f"{where}: persistentVolumeReclaimPolicy is {reclaim}; a {what} must be Retain so "
                    "releasing its claim does not delete the data",
                    None,
                )
    if kind == "StatefulSet" and is_slurm(args.props) and get(args.props, "spec", "volumeClaimTemplates"):
        when_deleted = get(args.props, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted")
        if when_deleted == "Delete":
            report(
                f"{where}: persistentVolumeClaimRetentionPolicy.whenDeleted is Delete; its volume claims "
                "(Slurm data) would be deleted with the StatefulSet",
                None,
            )
    if what and not args.opts.protect:
        report(
            f"{where}: {what} is not protected (protect=False); deleting or replacing it destroys the data on it", None
        )


stateful_resources_protected = ResourceValidationPolicy(
    name="stateful-resources-protected",
    description=(
        "Shared file systems (Filestore, EFS, FSx), shared PersistentVolumes and claims, and the Slurm "
        "controller's state claim are protected from deletion."
    ),
    validate=_validate_stateful,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(
        properties={
            "claimNames": {
                **STRING_LIST,
                "default": PROTECTED_CLAIMS,
                "description": "Claims that must be protected whatever their access mode.",
            }
        }
    ),
    remediation_steps=(
        "Register the resource with ResourceOptions(protect=True, retain_on_delete=True) (slonk-infra's own "
        "components do); keep shared PersistentVolumes at persistentVolumeReclaimPolicy: Retain. To really "
        "delete one, unprotect it deliberately (`pulumi state unprotect <urn>`) after taking a backup."
    ),
)


# ------------------------------------------------------------------------------ secrets in ConfigMaps
def _validate_configmap_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if kind_of(args.resource_type) not in ("ConfigMap", "ConfigMapPatch"):
        return
    where = describe(args.resource_type, args.props, args.name)
    max_chars = as_int(_setting(args, "maxBlobChars", MAX_BLOB_CHARS)) or MAX_BLOB_CHARS
    min_entropy = float(_setting(args, "minEntropyBitsPerChar", MIN_ENTROPY))
    findings: list[secrets.Finding] = []
    # An unknown value (computed from another resource during preview) cannot be judged; skip it.
    for key, value in items(get(args.props, "data")):
        findings.extend(secrets.scan_key_name(key))
        if isinstance(value, str):
            findings.extend(secrets.scan_text(key, value, max_chars, min_entropy))
    for key, value in items(get(args.props, "binaryData")):
        findings.extend(secrets.scan_key_name(key))
        if isinstance(value, str):
            findings.extend(secrets.scan_binary(key, value, max_chars, min_entropy))
    for finding in findings:
        report(f"{where} key {finding.key}: {finding.reason}", None)


no_secrets_in_configmaps = ResourceValidationPolicy(
    name="no-secrets-in-configmaps",
    description=(
        "ConfigMaps hold no credentials: no munge or JWT keys, private key blocks, passwords, tokens or "
        "high-entropy key material."
    ),
    validate=_validate_configmap_secrets,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    config_schema=PolicyConfigSchema(
        properties={
            "maxBlobChars": {"type": "integer", "default": MAX_BLOB_CHARS, "minimum": 64},
            "minEntropyBitsPerChar": {"type": "number", "default": MIN_ENTROPY, "minimum": 0, "maximum": 8},
        }
    ),
    remediation_steps=(
        "Move the value into a Kubernetes Secret (slonk-infra keeps the munge key in Secret munge-key, generated "
        "by random.RandomBytes and stored as a Pulumi secret) and mount or reference that Secret; rotate the "
        "credential, since ConfigMaps are readable by anyone who can read the namespace and land in Pulumi "
        "state unencrypted."
    ),
)


# ---------------------------------------------------------------------------------------- privileged
DANGEROUS_CAPABILITIES = {"SYS_ADMIN", "ALL"}


def _validate_privileged(args: ResourceValidationArgs, report: ReportViolation) -> None:
    spec = pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    allowed = set(_strings(_setting(args, "allowedContainers", ALLOWED_PRIVILEGED)))
    component = labels(args.props).get(COMPONENT_LABEL, "")
    slurm = is_slurm(args.props)
    where = describe(args.resource_type, args.props, args.name)
    for container in containers(spec):
        context = get(container.spec, "securityContext")
        reasons = []
        if get(context, "privileged") is True:
            reasons.append("privileged: true")
        caps = {c.upper().removeprefix("CAP_") for c in _strings(get(context, "capabilities", "add"))}
        if caps & DANGEROUS_CAPABILITIES:
            reasons.append(f"capabilities.add {sorted(caps & DANGEROUS_CAPABILITIES)}")
        if not reasons or (slurm and f"{component}/{container.name}" in allowed):
            continue
        report(
            f"{where} {container.role} {container.name}: {' and '.join(reasons)} (component {component or '-'}); "
            f"only {sorted(allowed)} may run privileged",
            None,
        )


privileged_only_where_needed = ResourceValidationPolicy(
    name="privileged-only-where-needed",
    description=(
        "Only containers that need the host run privileged: the workers' slurmd (cgroups, devices) and the "
        "in-cluster NFS server (kernel nfsd)."
    ),
    validate=_validate_privileged,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=PolicyConfigSchema(
        properties={
            "allowedContainers": {
                **STRING_LIST,
                "default": ALLOWED_PRIVILEGED,
                "description": "component/container pairs (app.kubernetes.io/component label) allowed privileged.",
            }
        }
    ),
    remediation_steps=(
        "Remove securityContext.privileged (and SYS_ADMIN / ALL capabilities); add only the capabilities the "
        "process needs (see the munged sidecar: CHOWN, FOWNER, DAC_OVERRIDE, SETUID, SETGID) with "
        "allowPrivilegeEscalation: false. If a new component truly needs the host, add it to "
        "privileged-only-where-needed.allowedContainers in the shared policy configuration, with a reviewer."
    ),
)


# --------------------------------------------------------------------------------- tainted GPU pools
GKE_GPU_MACHINE_RE = re.compile(r"^(a2|a3|a4|a4x|g2|g4)-")
GKE_TPU_MACHINE_RE = re.compile(r"^(ct\d+[a-z]*|tpu\d+[a-z]*)-")
EKS_GPU_INSTANCE_RE = re.compile(r"^(p\d+[a-z]*|g\d+[a-z]*)\.")
EKS_NEURON_INSTANCE_RE = re.compile(r"^(trn\d+[a-z]*|inf\d+[a-z]*)\.")
NEURON_RESOURCE = "aws.amazon.com/neuron"


def _no_schedule(effect: Any) -> bool:
    return isinstance(effect, str) and effect.replace("_", "").lower() == "noschedule"


def _taint_keys(taints: Any) -> set[str]:
    if not is_list(taints):
        return set()
    return {str(get(t, "key")) for t in taints if _no_schedule(get(t, "effect"))}


def _gke_needed_taint(node_config: Any, placement: Any) -> str | None:
    machine = str(get(node_config, "machineType", default=""))
    accelerators = get(node_config, "guestAccelerators", default=[])
    if get(placement, "tpuTopology") or GKE_TPU_MACHINE_RE.match(machine):
        return TPU_RESOURCE
    has_gpus = is_list(accelerators) and any((as_int(get(a, "count")) or 0) > 0 for a in accelerators)
    if has_gpus or GKE_GPU_MACHINE_RE.match(machine):
        return GPU_RESOURCE
    return None


def _validate_tainted(args: ResourceValidationArgs, report: ReportViolation) -> None:
    where = describe(args.resource_type, args.props, args.name)
    checks: list[tuple[str, str | None, set[str]]] = []
    if args.resource_type == "gcp:container/nodePool:NodePool":
        config = get(args.props, "nodeConfig")
        needed = _gke_needed_taint(config, get(args.props, "placementPolicy"))
        checks.append(("nodeConfig.taints", needed, _taint_keys(get(config, "taints"))))
    elif args.resource_type == "gcp:container/cluster:Cluster":
        config = get(args.props, "nodeConfig")
        if config is not None:
            checks.append(("nodeConfig.taints", _gke_needed_taint(config, None), _taint_keys(get(config, "taints"))))
        for i, pool in enumerate(get(args.props, "nodePools", default=[])):
            pool_config = get(pool, "nodeConfig")
            needed = _gke_needed_taint(pool_config, get(pool, "placementPolicy"))
            checks.append((f"nodePools[{i}].nodeConfig.taints", needed, _taint_keys(get(pool_config, "taints"))))
    elif args.resource_type == "aws:eks/nodeGroup:NodeGroup":
        instances = _strings(get(args.props, "instanceTypes"))
        ami = str(get(args.props, "amiType", default="")).upper()
        needed = None
        if "NEURON" in ami or any(EKS_NEURON_INSTANCE_RE.match(i) for i in instances):
            needed = NEURON_RESOURCE
        elif "NVIDIA" in ami or "GPU" in ami or any(EKS_GPU_INSTANCE_RE.match(i) for i in instances):
            needed = GPU_RESOURCE
        checks.append(("taints", needed, _taint_keys(get(args.props, "taints"))))
    for field, needed, present in checks:
        if needed and needed not in present:
            report(
                f"{where}: accelerator nodes without the {needed} NoSchedule taint in {field} "
                f"(has {sorted(present) or 'none'}); any pod could land on them and hold the accelerators' CPUs "
                "and memory",
                None,
            )


gpu_node_pools_tainted = ResourceValidationPolicy(
    name="gpu-node-pools-tainted",
    description=(
        "GKE node pools and EKS node groups with GPUs or TPUs carry the nvidia.com/gpu (or google.com/tpu) "
        "NoSchedule taint, so only workloads that tolerate it land there."
    ),
    validate=_validate_tainted,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation_steps=(
        "Add the taint to the pool (GKE nodeConfig.taints / EKS taints): key nvidia.com/gpu (TPU: google.com/tpu), "
        "value present, effect NO_SCHEDULE. slonk-infra's adapters add it for every gpu/tpu pool and give the "
        "Slurm workers the matching toleration."
    ),
)


# ---------------------------------------------------------------------------------- worker rollouts
def _validate_on_delete(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if kind_of(args.resource_type) != "StatefulSet" or not is_slurm(args.props):
        return
    group = worker_group(args.props)
    if group is None:
        return
    strategy = get(args.props, "spec", "updateStrategy", "type", default="RollingUpdate")
    if strategy != "OnDelete":
        where = describe(args.resource_type, args.props, args.name)
        report(
            f"{where}: worker group {group} uses updateStrategy {strategy}; any template change would restart "
            "every worker and kill the jobs running on them",
            None,
        )


worker_on_delete_updates = ResourceValidationPolicy(
    name="worker-on-delete-updates",
    description=(
        "Worker StatefulSets use the OnDelete update strategy, so a template change never restarts a pod "
        "that is running jobs."
    ),
    validate=_validate_on_delete,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Set spec.updateStrategy.type: OnDelete on worker StatefulSets, then roll changes node by node: "
        "`scontrol update nodename=<node> state=drain reason=upgrade`, wait until it is drained, delete the pod."
    ),
)


def _validate_drain(args: ResourceValidationArgs, report: ReportViolation) -> None:
    spec = pod_spec(args.resource_type, args.props)
    if spec is None or not is_slurm(args.props) or worker_group(args.props) is None:
        return
    where = describe(args.resource_type, args.props, args.name)
    minimum = as_int(_setting(args, "minGraceSeconds", MIN_GRACE_SECONDS)) or MIN_GRACE_SECONDS
    grace = as_int(get(spec, "terminationGracePeriodSeconds", default=30)) or 0
    if grace < minimum:
        report(
            f"{where}: terminationGracePeriodSeconds {grace} is under {minimum}; slurmd is killed before its "
            "jobs can be requeued",
            None,
        )
    name = accelerator_container(spec)
    for container in containers(spec):
        if container.role == "container" and container.name in ("slurmd", name):
            if not get(container.spec, "lifecycle", "preStop"):
                report(
                    f"{where} container {container.name}: no lifecycle.preStop hook; the node is not drained "
                    "in Slurm before its pod stops",
                    None,
                )
            break


worker_graceful_drain = ResourceValidationPolicy(
    name="worker-graceful-drain",
    description=(
        "Worker pods drain their Slurm node before they stop: a preStop hook on slurmd and a termination grace "
        "period long enough to requeue jobs."
    ),
    validate=_validate_drain,
    # Advisory: spot capacity gives 30 s notice whatever the pod asks for, and some sites accept that.
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    config_schema=PolicyConfigSchema(
        properties={"minGraceSeconds": {"type": "integer", "default": MIN_GRACE_SECONDS, "minimum": 0}}
    ),
    remediation_steps=(
        "Give slurmd a lifecycle.preStop hook that drains the node (slonk-infra runs /opt/slonk/scripts/drain.sh) "
        "and set terminationGracePeriodSeconds to at least minGraceSeconds."
    ),
)


# ------------------------------------------------------------------------------------- floating tags
LOCAL_CHART_PREFIXES = ("./", "../", "/")


def _validate_floating(args: ResourceValidationArgs, report: ReportViolation) -> None:
    where = describe(args.resource_type, args.props, args.name)
    if args.resource_type in ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"):
        chart = str(get(args.props, "chart", default=""))
        if not get(args.props, "version") and not chart.startswith(LOCAL_CHART_PREFIXES) and "@sha256:" not in chart:
            report(f"{where}: chart {chart} has no version; the next deploy installs whatever is newest", None)
        return
    spec = pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    for container in containers(spec):
        image = container.image
        if isinstance(image, str) and image and parse_image(image).floating:
            report(f"{where} {container.role} {container.name}: image {image} floats (no tag, or :latest)", None)


no_floating_image_tags = ResourceValidationPolicy(
    name="no-floating-image-tags",
    description=(
        "No workload runs an image without a tag or with :latest, and no Helm chart is installed without a "
        "version: what runs must change only when this code changes."
    ),
    validate=_validate_floating,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation_steps=(
        "Pin images to a version tag, better a digest (repo:tag@sha256:...), and Helm releases to a chart version."
    ),
)


# ------------------------------------------------------------------------------- stack: GRES vs pods
def _k8s(resources: Iterable[PolicyResource], kind: str) -> list[PolicyResource]:
    return [r for r in resources if kind_of(r.resource_type) == kind]


def _namespace(resource: PolicyResource) -> str:
    return str(known(resource.props, "metadata", "namespace", default="default"))


def _slurm_configs(resources: list[PolicyResource]) -> dict[str, tuple[PolicyResource, str, str]]:
    """Namespace -> (ConfigMap, slurm.conf, gres.conf) of the Slurm config ConfigMaps."""
    out: dict[str, tuple[PolicyResource, str, str]] = {}
    for cm in _k8s(resources, "ConfigMap"):
        if get(cm.props, "metadata", "name") != SLURM_CONFIG_MAP:
            continue
        slurm_conf = get(cm.props, "data", "slurm.conf", default="")
        gres_conf = get(cm.props, "data", "gres.conf", default="")
        out[_namespace(cm)] = (cm, str(slurm_conf), str(gres_conf))
    return out


def _workers(resources: list[PolicyResource]) -> Iterable[tuple[PolicyResource, str, Any]]:
    for resource in resources:
        spec = pod_spec(resource.resource_type, resource.props)
        if spec is None or not is_slurm(resource.props):
            continue
        group = worker_group(resource.props)
        if group is not None:
            yield resource, group, spec


def _validate_gres(args: StackValidationArgs, report: ReportViolation) -> None:
    configs = _slurm_configs(list(args.resources))
    for resource, group, spec in _workers(args.resources):
        where = describe(resource.resource_type, resource.props, resource.name)
        limits = accelerator_limits(spec)
        container = accelerator_container(spec)
        found = configs.get(_namespace(resource))
        if found is None:
            if limits:
                report(
                    f"{where} container {container}: requests {limits} but namespace {_namespace(resource)} has "
                    f"no {SLURM_CONFIG_MAP} ConfigMap declaring the group's GRES",
                    resource.urn,
                )
            continue
        cm, slurm_conf, gres_conf = found
        nodes = slurmconf.node_gres(slurm_conf)
        members = slurmconf.group_nodes(nodes, group)
        if not members:
            if limits:
                report(
                    f"{where} container {container}: requests {limits} but slurm.conf has no NodeName line for "
                    f"group {group} (nodes {group}-N)",
                    resource.urn,
                )
            continue
        devices = slurmconf.gres_conf_counts(gres_conf)
        for gres, resource_name in (("gpu", GPU_RESOURCE), ("tpu", TPU_RESOURCE)):
            want = limits.get(gres, 0)
            declared = sorted({nodes[n].get(gres, 0) for n in members})
            if declared != [want]:
                report(
                    f"{where} container {container}: {resource_name} limit {want}, but slurm.conf gives nodes "
                    f"{slurmconf.compress(members)} Gres={gres}:{'/'.join(map(str, declared))}",
                    resource.urn,
                )
                continue
            if not want:
                continue
            in_gres_conf = sorted(
                {devices.get(n, {}).get(gres, 0) + devices.get(slurmconf.ALL_NODES, {}).get(gres, 0) for n in members}
            )
            if in_gres_conf != [want]:
                report(
                    f"{where}: slurm.conf gives {group} nodes {gres}:{want} but gres.conf in ConfigMap "
                    f"{describe(cm.resource_type, cm.props, cm.name)} defines {'/'.join(map(str, in_gres_conf))} "
                    f"{gres} devices for them; slurmd would register the node with the wrong count",
                    resource.urn,
                )


gpu_request_matches_gres = StackValidationPolicy(
    name="gpu-request-matches-gres",
    description=(
        "Every worker's nvidia.com/gpu / google.com/tpu limit equals the GRES count slurm.conf (ConfigMap "
        "slurm-config) gives that group's nodes, and gres.conf defines as many devices."
    ),
    validate=_validate_gres,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Change the pool's accelerator count in the cluster declaration, not the rendered objects: slonk-infra "
        "derives the pod limit, the NodeName Gres= and gres.conf from it. A worker edited by hand (or a "
        "StatefulSet from elsewhere) must request exactly the GRES its Slurm node advertises, or Slurm "
        "schedules jobs onto GPUs the pod does not hold."
    ),
)


# ------------------------------------------------------------------------------ stack: TPU slice shape
TPU_CHIPS_PER_HOST_RE = re.compile(r"-(\d+)t$")
DEFAULT_TPU_CHIPS_PER_HOST = 4


def _selector(spec: Any) -> dict[str, str]:
    return {k: str(v) for k, v in items(get(spec, "nodeSelector"))}


def _validate_tpu_shape(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = list(args.resources)
    workloads = list(_workers(resources))
    matched: set[str] = set()
    for pool in (r for r in resources if r.resource_type == "gcp:container/nodePool:NodePool"):
        config = get(pool.props, "nodeConfig")
        machine = str(get(config, "machineType", default=""))
        topology = get(pool.props, "placementPolicy", "tpuTopology")
        if not topology and not GKE_TPU_MACHINE_RE.match(machine):
            continue
        where = describe(pool.resource_type, pool.props, pool.name)
        found = TPU_CHIPS_PER_HOST_RE.search(machine)
        per_host = int(found.group(1)) if found else DEFAULT_TPU_CHIPS_PER_HOST
        nodes = as_int(get(pool.props, "nodeCount", default=get(pool.props, "initialNodeCount")))
        chips = dims_product(str(topology)) if topology else None
        expected_nodes = None
        if topology and chips is None:
            report(f"{where}: tpu_topology {topology} is not a topology (AxB or AxBxC)", pool.urn)
        elif chips is not None:
            if chips % per_host:
                report(
                    f"{where}: topology {topology} has {chips} chips, not a multiple of {per_host} per host", pool.urn
                )
            else:
                expected_nodes = chips // per_host
                if nodes != expected_nodes:
                    report(
                        f"{where}: node_count {nodes}, but topology {topology} is {chips} chips = "
                        f"{expected_nodes} hosts of {per_host} ({machine})",
                        pool.urn,
                    )
        pool_label = str(known(config, "labels", POOL_LABEL, default=""))
        pool_name = str(known(pool.props, "name", default=""))
        for resource, _group, spec in workloads:
            selector = _selector(spec)
            if not (
                (pool_label and selector.get(POOL_LABEL) == pool_label)
                or (pool_name and selector.get(NODEPOOL_LABEL) == pool_name)
            ):
                continue
            matched.add(resource.urn)
            sts = describe(resource.resource_type, resource.props, resource.name)
            replicas = as_int(get(resource.props, "spec", "replicas", default=1))
            want = expected_nodes if expected_nodes is not None else nodes
            if want is not None and replicas != want:
                report(
                    f"{sts}: replicas {replicas}, but TPU slice pool {pool_name or pool_label} has "
                    f"{want} hosts (topology {topology})",
                    resource.urn,
                )
            selected = selector.get(TPU_TOPOLOGY_LABEL)
            if topology and selected != topology:
                report(
                    f"{sts}: nodeSelector {TPU_TOPOLOGY_LABEL}={selected} does not match the pool's tpu_topology "
                    f"{topology}",
                    resource.urn,
                )
            chips_per_pod = accelerator_limits(spec).get("tpu", 0)
            if chips_per_pod != per_host:
                report(
                    f"{sts} container {accelerator_container(spec)}: {TPU_RESOURCE} limit {chips_per_pod}, but each "
                    f"{machine} host has {per_host} chips; a multi-host slice pod must hold all of its host's chips",
                    resource.urn,
                )
    # Workloads that select a TPU topology without a node pool in this stack (an existing cluster, node
    # auto-provisioning): their own replicas and chips must still make up the slice.
    for resource, _group, spec in workloads:
        topology = _selector(spec).get(TPU_TOPOLOGY_LABEL)
        if resource.urn in matched or not topology:
            continue
        sts = describe(resource.resource_type, resource.props, resource.name)
        chips = dims_product(topology)
        chips_per_pod = accelerator_limits(spec).get("tpu", 0)
        replicas = as_int(get(resource.props, "spec", "replicas", default=1)) or 0
        if chips is None or not chips_per_pod or replicas * chips_per_pod != chips:
            report(
                f"{sts}: {replicas} replicas x {TPU_RESOURCE} {chips_per_pod} = {replicas * chips_per_pod} chips, "
                f"but topology {topology} has {chips} chips",
                resource.urn,
            )


tpu_slice_shape = StackValidationPolicy(
    name="tpu-slice-shape",
    description=(
        "A TPU slice's GKE node pool node_count, its StatefulSet's replicas and its tpu_topology / "
        "cloud.google.com/gke-tpu-topology selector agree (chips = product of dims; hosts = chips / chips per host)."
    ),
    validate=_validate_tpu_shape,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Declare the slice by generation and topology (tpuSlices: [{generation, topology, slices}]) and let "
        "slonk-infra derive node_count and replicas. A multi-host slice only forms when every host is present: "
        "a node pool or StatefulSet of the wrong size leaves the whole slice idle."
    ),
)


ALL_POLICIES: list[Policy] = [
    uniform_cuda_image,
    gpu_request_matches_gres,
    tpu_slice_shape,
    stateful_resources_protected,
    no_secrets_in_configmaps,
    privileged_only_where_needed,
    gpu_node_pools_tainted,
    worker_on_delete_updates,
    worker_graceful_drain,
    no_floating_image_tags,
]
