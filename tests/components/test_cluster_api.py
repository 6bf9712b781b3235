"""slonk_infra.Cluster as a program's author meets it: help() documents it, and cloud objects the program
creates (a VPC, subnets, a role, a reservation, another stack's kubeconfig) go in as Pulumi Outputs."""

from __future__ import annotations

import pydoc
import re
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp

import slonk_infra
from slonk_infra.cluster import OUTPUT_KEYS
from slonk_infra.declaration.inputs import accepted_fields
from slonk_infra.offline.fake_clouds import after_deploy
from slonk_infra.offline.runner import OfflineRun, run_offline
from tests.support import declaration

STAND_IN = "<pulumi output:"


def snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def inputs_of(run: OfflineRun[Any], typ: str) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_type(typ)]


def no_stand_in_reached_a_resource(run: OfflineRun[Any]) -> None:
    assert not [s for s in run.strings() if STAND_IN in s]
    assert run.duplicate_urns() == [] and run.output_leaks() == []


# ------------------------------------------------------------------------------------------------ help()
def test_help_shows_the_arguments_the_outputs_and_an_example_not_pulumis_base_parameters() -> None:
    text = pydoc.plain(pydoc.render_doc(slonk_infra.Cluster))
    for argument in ("``name``", "``args``", "``opts``", "ClusterArgs", "ClusterDeclaration", "ClusterPlan"):
        assert argument in text, argument
    for key in OUTPUT_KEYS:
        assert f"``{snake(key)}``" in text, key
    assert "Example" in text and 'slonk_infra.Cluster("research", {' in text
    assert 'pulumi.export("login", cluster.login_address)' in text
    assert "DeclarationError" in text
    # ComponentResource.__init__'s parameters (its type token, props, remote) are not the user's.
    assert ":param str t:" not in text and "remote" not in text


def test_help_names_every_field_that_accepts_an_output() -> None:
    doc = slonk_infra.Cluster.__init__.__doc__ or ""
    for path in accepted_fields():
        leaf = path.replace("[*]", "").split(".", 1)[-1] if path.startswith(("pools", "tpuSlices")) else path
        assert f"``{leaf.replace('[*]', '')}``" in doc, path


# ------------------------------------------------------------------------------------- Outputs in, AWS
def test_a_vpc_subnets_a_role_and_a_reservation_made_by_the_program_reach_the_eks_resources() -> None:
    made: dict[str, pulumi.CustomResource] = {}

    def program() -> slonk_infra.Cluster:
        vpc = aws.ec2.Vpc("net", cidr_block="10.0.0.0/16")
        subnet = aws.ec2.Subnet("gpu", vpc_id=vpc.id, cidr_block="10.0.0.0/20", availability_zone="us-east-1a")
        role = aws.iam.Role("nodes", assume_role_policy="{}")
        made.update(vpc=vpc, subnet=subnet, role=role)
        raw = declaration("aws")
        raw["aws"].update(vpcId=vpc.id, subnetIds=[subnet.id, "subnet-0bbbbbbbbbbbbbbbb"], nodeRoleArn=role.arn)
        raw["pools"][0]["reservation"]["name"] = pulumi.Output.from_input("cr-from-program")
        return slonk_infra.Cluster("research", raw)

    run = run_offline(program)
    vpc_id, subnet_id = after_deploy("net.id"), after_deploy("gpu.id")
    groups = {r["tags"]["Name"]: r for r in inputs_of(run, "aws:ec2/securityGroup:SecurityGroup")}
    assert {g["vpcId"] for g in groups.values()} == {vpc_id}
    nodegroups = {r["nodeGroupName"]: r for r in inputs_of(run, "aws:eks/nodeGroup:NodeGroup")}
    # GPU groups use the first subnet (the program's), CPU groups every subnet.
    assert nodegroups["h100-a"]["subnetIds"] == [subnet_id]
    assert nodegroups["cpu"]["subnetIds"] == [subnet_id, "subnet-0bbbbbbbbbbbbbbbb"]
    assert {g["nodeRoleArn"] for g in nodegroups.values()} == {"arn:aws:iam::123456789012:role/nodes"}
    # The program's role is used, so none is created for the nodes.
    assert "research-node-role" not in {r.name for r in run.of_type("aws:iam/role:Role")}
    (eks,) = inputs_of(run, "aws:eks/cluster:Cluster")
    assert eks["vpcConfig"]["subnetIds"] == [subnet_id, "subnet-0bbbbbbbbbbbbbbbb"]
    (fsx,) = inputs_of(run, "aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fsx["subnetIds"] == subnet_id
    targets = {r.name: r.inputs["subnetId"] for r in run.of_type("aws:efs/mountTarget:MountTarget")}
    # A mount target is named by its subnet id, or by position where the id is an Output.
    assert targets == {
        "research-efs-home-subnet0": subnet_id,
        "research-efs-home-subnet-0bbbbbbbbbbbbbbbb": "subnet-0bbbbbbbbbbbbbbbb",
    }
    templates = {r.name: r.inputs for r in run.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    target = templates["research-lt-h100-a"]["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationId": "cr-from-program"}
    # Pulumi orders the work by these: the node group waits for the subnet it was given.
    subnet_urn = next(r.urn for r in run.registrations if r.name == "gpu")
    (h100,) = [r for r in run.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupName"] == "h100-a"]
    assert subnet_urn in h100.dependencies
    no_stand_in_reached_a_resource(run)


# ------------------------------------------------------------------------------------- Outputs in, GCP
def gcp_program(create: bool) -> OfflineRun[Any]:
    def program() -> dict[str, Any]:
        network = gcp.compute.Network("vpc", auto_create_subnetworks=False)
        subnetwork = gcp.compute.Subnetwork("nodes", network=network.id, ip_cidr_range="10.0.0.0/20")
        raw = declaration("gcp")
        raw["kubernetes"]["create"] = create
        raw["gcp"].update(
            project=pulumi.Output.from_input("project-from-program"), network=network.id, subnetwork=subnetwork.id
        )
        raw["pools"][0]["reservation"]["name"] = pulumi.Output.from_input("reservation-from-program")
        cluster = slonk_infra.Cluster("research", raw)
        return {"kubeconfig": cluster.kubeconfig}

    return run_offline(program, lambda outputs: outputs)


def test_a_project_network_and_reservation_from_the_program_reach_the_gke_resources() -> None:
    run = gcp_program(create=True)
    (cluster,) = inputs_of(run, "gcp:container/cluster:Cluster")
    assert cluster["project"] == "project-from-program"
    assert cluster["network"] == after_deploy("vpc.id") and cluster["subnetwork"] == after_deploy("nodes.id")
    assert cluster["workloadIdentityConfig"]["workloadPool"] == "project-from-program.svc.id.goog"
    pools = {r["name"]: r for r in inputs_of(run, "gcp:container/nodePool:NodePool")}
    assert {p["project"] for p in pools.values()} == {"project-from-program"}
    affinity = pools["h100-a"]["nodeConfig"]["reservationAffinity"]
    assert affinity["values"] == ["reservation-from-program"]
    (filestore,) = inputs_of(run, "gcp:filestore/instance:Instance")
    assert filestore["project"] == "project-from-program"
    assert filestore["networks"][0]["network"] == after_deploy("vpc.id")
    assert {m["project"] for m in inputs_of(run, "gcp:projects/iAMMember:IAMMember")} == {"project-from-program"}
    assert '"gke_project-from-program_us-central1_slonk-gcp"' in run.resolved["kubeconfig"]
    no_stand_in_reached_a_resource(run)


def test_an_existing_gke_cluster_is_addressed_in_the_project_the_program_gave() -> None:
    run = gcp_program(create=False)
    pools = inputs_of(run, "gcp:container/nodePool:NodePool")
    assert {p["cluster"] for p in pools} == {"projects/project-from-program/locations/us-central1/clusters/slonk-gcp"}
    no_stand_in_reached_a_resource(run)


# ---------------------------------------------------------------------- Outputs in, an existing cluster
def test_another_stacks_kubeconfig_and_context_reach_the_kubernetes_provider() -> None:
    def program() -> slonk_infra.Cluster:
        raw = declaration("local")
        raw["kubernetes"].update(
            kubeconfig=pulumi.Output.secret("apiVersion: v1\nkind: Config\n"),
            context=pulumi.Output.from_input("context-from-program"),
        )
        return slonk_infra.Cluster("research", raw)

    run = run_offline(program)
    (provider,) = [r for r in run.registrations if r.type == "pulumi:providers:kubernetes"]
    assert provider.inputs["context"] == "context-from-program"
    assert "kind: Config" in str(provider.inputs["kubeconfig"])
    no_stand_in_reached_a_resource(run)


def test_the_components_doc_lists_every_field_that_accepts_an_output() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "components.md").read_text(encoding="utf-8")
    section = text.split("## Composing with your own program", 1)[1].split("\n## ", 1)[0]
    for path in accepted_fields():
        assert f"`{path.removesuffix('[*]')}`" in section, path
