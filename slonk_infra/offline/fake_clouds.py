"""The fake clouds of offline runs: a table of what each resource type answers, and the mocks that use it.

:data:`FAKE_OUTPUTS` gives, per resource type, the outputs the adapters read back (cluster endpoints,
Filestore IPs, FSx DNS names, role ARNs...) and the id when one is read; every other resource echoes its
inputs. Values that exist only after deployment are :func:`after_deploy` placeholders, the id of a
resource the table does not list among them (a VPC or subnet a user's program creates: what it feeds into
the cluster shows as known after deploy). :data:`FAKE_CALLS` answers the provider functions (invokes) the
adapters call. Kubernetes objects other than Services echo nothing back (:func:`answers_nothing`). A
``pulumi.StackReference`` reads no other stack: its id is the stack's name, and
:func:`slonk_infra.offline.runner.run_offline` makes its outputs unknown.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi

State = dict[str, Any]

FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n").decode()
FAKE_VPC_CIDR = "10.0.0.0/16"
FAKE_ACCOUNT = "123456789012"
FAKE_RANDOM_B64 = base64.b64encode(b"offline-mock-random-bytes-not-a-real-key").decode()
FAKE_PASSWORD = "offlineMockPasswordNotARealOne42"
FAKE_PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\noffline-mock-not-a-real-key\n-----END OPENSSH PRIVATE KEY-----\n"
)


def after_deploy(what: str) -> str:
    """Placeholder for a value that exists only after deployment (an IP, an endpoint, a DNS name)."""
    return f"<known after deploy: {what}>"


def _service_account(name: str, state: State) -> State:
    email = f"{state.get('accountId', name)}@{state.get('project', 'project')}.iam.gserviceaccount.com"
    return {"email": email, "member": f"serviceAccount:{email}"}


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:17]


@dataclass(frozen=True)
class Fake:
    """What the fake cloud answers for one resource type: extra outputs, and the id when one is read."""

    outputs: Callable[[str, State], State] = lambda name, state: {}
    id: Callable[[str, State], str] | None = None


def _filestore_ips(name: str, state: State) -> State:
    nets = [dict(n) for n in state.get("networks", [])]
    for i, net in enumerate(nets):
        net["ipAddresses"] = [after_deploy(f"{name}.networks[{i}].ipAddresses[0]")]
    return {"networks": nets}


FAKE_OUTPUTS: dict[str, Fake] = {
    "gcp:container/cluster:Cluster": Fake(
        outputs=lambda n, s: {
            "endpoint": after_deploy(f"{n}.endpoint"),
            "masterAuth": {"clusterCaCertificate": FAKE_CA},
        },
        id=lambda n, s: f"projects/{s.get('project')}/locations/{s.get('location')}/clusters/{s['name']}",
    ),
    "gcp:filestore/instance:Instance": Fake(outputs=_filestore_ips),
    "gcp:serviceaccount/account:Account": Fake(outputs=_service_account),
    "aws:eks/cluster:Cluster": Fake(
        outputs=lambda n, s: {
            "endpoint": after_deploy(f"{n}.endpoint"),
            "certificateAuthority": {"data": FAKE_CA},
            "vpcConfig": {**s.get("vpcConfig", {}), "clusterSecurityGroupId": "sg-0cluster"},
            "arn": f"arn:aws:eks:us-east-1:{FAKE_ACCOUNT}:cluster/{s['name']}",
        }
    ),
    "aws:iam/role:Role": Fake(outputs=lambda n, s: {"arn": f"arn:aws:iam::{FAKE_ACCOUNT}:role/{s['name']}"}),
    "aws:ec2/launchTemplate:LaunchTemplate": Fake(
        outputs=lambda n, s: {"latestVersion": 1}, id=lambda n, s: f"lt-{_short_hash(n)}"
    ),
    "aws:ec2/securityGroup:SecurityGroup": Fake(id=lambda n, s: f"sg-{_short_hash(n)}"),
    "aws:ec2/placementGroup:PlacementGroup": Fake(id=lambda n, s: str(s["name"])),
    "aws:efs/fileSystem:FileSystem": Fake(
        outputs=lambda n, s: {"dnsName": after_deploy(f"{n}.dnsName")}, id=lambda n, s: f"fs-{_short_hash(n)}"
    ),
    "aws:fsx/lustreFileSystem:LustreFileSystem": Fake(
        outputs=lambda n, s: {"dnsName": after_deploy(f"{n}.dnsName"), "mountName": after_deploy(f"{n}.mountName")},
        id=lambda n, s: f"fs-{_short_hash(n)}",
    ),
    "kubernetes:core/v1:Service": Fake(
        outputs=lambda n, s: {"spec": {**s.get("spec", {}), "clusterIP": after_deploy(f"Service {n} .spec.clusterIP")}}
    ),
    # Recognisable fake bytes, so tests can trace where key material flows.
    "random:index/randomBytes:RandomBytes": Fake(
        outputs=lambda n, s: {"base64": FAKE_RANDOM_B64, "hex": FAKE_RANDOM_B64.encode().hex()}
    ),
    "tls:index/privateKey:PrivateKey": Fake(outputs=lambda n, s: {"privateKeyOpenssh": FAKE_PRIVATE_KEY}),
    "random:index/randomPassword:RandomPassword": Fake(outputs=lambda n, s: {"result": FAKE_PASSWORD}),
    # The accounting database (slurm.accounting.database.kind: cloud): its private address exists only
    # once it does.
    "gcp:sql/databaseInstance:DatabaseInstance": Fake(
        outputs=lambda n, s: {
            "privateIpAddress": after_deploy(f"{n}.privateIpAddress"),
            "connectionName": f"{s.get('project')}:{s.get('region')}:{s['name']}",
        }
    ),
    "aws:rds/instance:Instance": Fake(
        outputs=lambda n, s: {
            "address": after_deploy(f"{n}.address"),
            "endpoint": after_deploy(f"{n}.endpoint"),
            "arn": f"arn:aws:rds:us-east-1:{FAKE_ACCOUNT}:db:{s.get('identifier', n)}",
        },
        id=lambda n, s: str(s.get("identifier", n)),
    ),
    # The id of a stack reference is the referenced stack's name, as the engine answers; its outputs cannot
    # be answered here (see run_offline).
    "pulumi:pulumi:StackReference": Fake(id=lambda n, s: str(s["name"])),
}

FAKE_CALLS: dict[str, Callable[[State], State]] = {
    "aws:ec2/getVpc:getVpc": lambda a: {
        "id": a.get("id"),
        "cidrBlock": FAKE_VPC_CIDR,
        "cidrBlockAssociations": [
            {"associationId": "vpc-cidr-assoc-1", "cidrBlock": FAKE_VPC_CIDR, "state": "associated"}
        ],
    },
    # Offline, every declared subnet is taken to be in the declared zone: the answer lists the subnets the
    # call filtered on (EC2 DescribeSubnets with subnet-id and availability-zone filters).
    "aws:ec2/getSubnets:getSubnets": lambda a: {"ids": _filter_values(a, "subnet-id"), "filters": a.get("filters")},
    "aws:eks/getCluster:getCluster": lambda a: {
        "name": a.get("name"),
        "vpcConfig": {"clusterSecurityGroupId": "sg-0existing"},
    },
}


def _filter_values(args: State, name: str) -> list[str]:
    """The values of the invoke's filter called ``name`` (an EC2 Describe* filter list)."""
    for item in args.get("filters") or []:
        if isinstance(item, dict) and item.get("name") == name:
            return [str(v) for v in item.get("values") or []]
    return []


def answers_nothing(typ: str, has_kind: bool) -> bool:
    """Whether the fake cloud answers a registration of ``typ`` with no outputs: a Kubernetes object (it has a
    ``kind``) other than a Service, whose cluster IP the program reads.

    Under ``pulumi up`` the SDK then resolves each output property from the inputs. slonk-infra's own
    program reads none of these objects' outputs, so its offline runs may skip that
    (:func:`slonk_infra.offline.runner.run_offline`, ``kubernetes_outputs``).
    """
    return has_kind and typ.startswith("kubernetes:") and typ != "kubernetes:core/v1:Service"


class FakeClouds(pulumi.runtime.Mocks):
    """Mocks that echo inputs, adding the outputs of :data:`FAKE_OUTPUTS`; invokes answer from :data:`FAKE_CALLS`."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, State]:
        typ = args.typ
        if answers_nothing(typ, "kind" in args.inputs):
            # Echoing pod specs costs a full deserialisation per object; the inputs stay recorded by the
            # monitor, and the SDK resolves the object's outputs from them (see answers_nothing).
            return f"{args.name}-id", {}
        state = dict(args.inputs)
        state.setdefault("name", args.name)
        fake = FAKE_OUTPUTS.get(typ, Fake())
        if fake.id:
            rid = fake.id(args.name, state)
        elif typ.startswith("pulumi:providers:"):
            rid = f"{args.name}-id"  # a provider reference is "<urn>::<id>": a plain id keeps it parseable
        else:
            rid = after_deploy(f"{args.name}.id")
        state.update(fake.outputs(args.name, state))
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[State, list[tuple[str, str]]]:
        answer = FAKE_CALLS.get(args.token)
        return (answer(args.args) if answer else {}), []
