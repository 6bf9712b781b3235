"""A user's own Pulumi project, outside this repository, rendered and checked offline.

The project (``Pulumi.yaml`` named ``myinfra``) reads its own config, creates a VPC and a subnet with
pulumi_aws, hands their ids to ``slonk_infra.Cluster`` and exports values of its own; its stack file holds
``myinfra:*`` keys and no ``slonk-infra:cluster``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from slonk_infra.cli import main
from slonk_infra.clouds import build_plan
from slonk_infra.declaration.errors import StackFileError
from slonk_infra.declaration.stacks import PROJECT
from slonk_infra.offline.render import program_project, run_program, write_render
from slonk_infra.offline.runner import SECRET_PLACEHOLDER, after_deploy
from tests.support import declaration

PROGRAM = """\
import json

import pulumi
import pulumi_aws as aws

import slonk_infra

config = pulumi.Config()
region = config.require("region")
vpc = aws.ec2.Vpc("net", cidr_block="10.0.0.0/16")
subnet = aws.ec2.Subnet("gpu", vpc_id=vpc.id, cidr_block="10.0.0.0/20", availability_zone=f"{region}a")
spec = json.loads(DECLARATION)
spec["region"] = region
spec["aws"]["vpcId"] = vpc.id
spec["aws"]["subnetIds"] = [subnet.id]
# One subnet: no RDS accounting database (it needs two zones), so this team keeps no job accounting.
spec["slurm"].pop("accounting")
NODES_HOOK
cluster = slonk_infra.Cluster("research", spec)
pulumi.export("team", config.get("team"))
pulumi.export("vpcId", vpc.id)
pulumi.export("dbPassword", pulumi.Output.secret("s3cr3t-pa55word"))
pulumi.export("login", cluster.login_address)
"""

# The network comes from another stack, which is not read offline: its outputs are known after deploy.
STACK_REFERENCE_PROGRAM = """\
import json

import pulumi

import slonk_infra

config = pulumi.Config()
network = pulumi.StackReference("org/net/prod")
vpc_id = network.get_output("vpcId")
subnet_id = network.require_output("subnetId")
note = f"cluster in {vpc_id}"
spec = json.loads(DECLARATION)
spec["region"] = config.require("region")
spec["aws"]["vpcId"] = vpc_id
spec["aws"]["subnetIds"] = [subnet_id]
spec["slurm"].pop("accounting")
cluster = slonk_infra.Cluster("research", spec)
pulumi.export("vpcId", vpc_id)
pulumi.export("subnet", subnet_id.apply(lambda s: f"subnet {s.upper()}"))
pulumi.export("network", network.outputs)
pulumi.export("stack", network.id)
"""


def write_project(
    folder: Path, config: dict[str, Any], nodes_hook: str = "", program_text: str = PROGRAM
) -> tuple[Path, Path]:
    """The user's project in ``folder``: (its stack file, its program)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: myinfra\nruntime: python\n", encoding="utf-8")
    program = program_text.replace("DECLARATION", repr(json.dumps(declaration("aws"))))
    program = program.replace("NODES_HOOK", nodes_hook)
    (folder / "__main__.py").write_text(program, encoding="utf-8")
    stack = folder / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return stack, folder / "__main__.py"


CONFIG = {"myinfra:region": "us-east-1", "myinfra:team": "research", "aws:region": "us-east-1"}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_render_runs_the_users_program_under_its_own_project_and_writes_its_exports(tmp_path: Path) -> None:
    stack, program = write_project(tmp_path / "myinfra", CONFIG)
    out = tmp_path / "out"
    result = invoke("render", str(stack), "--program", str(program), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"exports: {out}/outputs.json" in result.output

    # Its own config keys were read (myinfra:team), its exports written, the secret masked.
    outputs = read(out / "outputs.json")
    assert outputs == {
        "dbPassword": SECRET_PLACEHOLDER,
        "login": "<known after deploy: Service research-service-login .spec.clusterIP>",
        "team": "research",
        "vpcId": "<known after deploy: net.id>",
    }
    # The summary describes the cluster the program built, and carries the exports.
    summary = read(out / "summary.json")
    expected = build_plan(declaration("aws")).summary()
    assert summary["plan"] == expected
    assert summary["clusters"] == {"research": {"cluster": "slonk-aws", "cloud": "aws", "plan": expected}}
    assert summary["outputs"] == outputs

    # The VPC-dependent inputs are the program's values, known after deploy, never the validated stand-in.
    resources = read(out / "cloud" / "resources.json")
    groups = [r for r in resources if r["type"] == "aws:ec2/securityGroup:SecurityGroup"]
    assert groups and {g["inputs"]["vpcId"] for g in groups} == {"<known after deploy: net.id>"}
    nodegroups = [r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    assert nodegroups and all(n["inputs"]["subnetIds"] == ["<known after deploy: gpu.id>"] for n in nodegroups)
    written = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    assert "<pulumi output:" not in written
    assert "s3cr3t-pa55word" not in written


def test_check_runs_the_users_program_without_a_declaration_in_the_stack_file(tmp_path: Path) -> None:
    stack, program = write_project(tmp_path / "myinfra", CONFIG)
    result = invoke("check", str(stack), "--program", str(program))
    assert result.exit_code in (0, 1), result.output
    assert result.output.startswith("check dev:"), result.output
    assert "Traceback" not in result.output and "slonk-infra:cluster" not in result.output


def test_stack_reference_outputs_render_as_known_after_deploy(tmp_path: Path) -> None:
    stack, program = write_project(tmp_path / "myinfra", CONFIG, program_text=STACK_REFERENCE_PROGRAM)
    out = tmp_path / "out"
    result = invoke("render", str(stack), "--program", str(program), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output

    # Each output of the other stack is unknown: its applies did not run, its exports are placeholders.
    unknown = after_deploy("value")
    outputs = read(out / "outputs.json")
    assert outputs == {"network": unknown, "stack": "org/net/prod", "subnet": unknown, "vpcId": unknown}
    resources = read(out / "cloud" / "resources.json")
    groups = [r for r in resources if r["type"] == "aws:ec2/securityGroup:SecurityGroup"]
    assert groups and {g["inputs"]["vpcId"] for g in groups} == {unknown}
    nodegroups = [r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    assert nodegroups and all(n["inputs"]["subnetIds"] == [unknown] for n in nodegroups)
    # A stack reference reads an existing stack: nothing to deploy, so no resource of its own.
    assert not [r for r in resources if r["type"] == "pulumi:pulumi:StackReference"]
    written = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    assert "<pulumi output:" not in written

    result = invoke("check", str(stack), "--program", str(program))
    assert result.exit_code in (0, 1), result.output
    assert "check dev:" in result.output and "Traceback" not in result.output


def test_a_config_key_the_program_requires_and_the_stack_lacks_is_one_clear_error(tmp_path: Path) -> None:
    stack, program = write_project(tmp_path / "myinfra", {"myinfra:team": "research"})
    result = invoke("render", str(stack), "--program", str(program), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "error: the program requires config key 'myinfra:region'" in result.output
    assert "Traceback" not in result.output


def test_an_output_at_a_field_that_decides_the_plan_is_refused_naming_it(tmp_path: Path) -> None:
    hook = 'spec["pools"][0]["nodes"] = pulumi.Output.from_input(16)'
    stack, program = write_project(tmp_path / "myinfra", CONFIG, nodes_hook=hook)
    result = invoke("render", str(stack), "--program", str(program), "-o", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "pools[0].nodes: a Pulumi Output is not accepted here" in result.output
    assert (
        "fields that accept Outputs: aws.nodeRoleArn, aws.publicSubnetIds[*], aws.subnetIds[*], aws.vpcId"
        in result.output
    )
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_several_clusters_are_listed_by_name_and_none_is_the_plan(tmp_path: Path) -> None:
    import slonk_infra

    def program() -> None:
        for name in ("alpha", "beta"):
            raw = declaration("local")
            raw["name"] = name
            raw["kubernetes"]["namespace"] = name
            slonk_infra.Cluster(name, raw)

    run = run_program("dev", {}, program)
    summary = write_render(run, tmp_path)
    assert summary["plan"] == {} and run.plan is None
    assert set(summary["clusters"]) == {"alpha", "beta"}
    assert summary["clusters"]["beta"]["cluster"] == "beta" and summary["outputs"] == {}
    assert read(tmp_path / "outputs.json") == {}


def test_the_project_name_comes_from_the_nearest_pulumi_yaml(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text("name: nested\nruntime: python\nmain: src/\n", encoding="utf-8")
    assert program_project(project / "src" / "__main__.py") == "nested"
    lone = tmp_path / "lone" / "__main__.py"
    lone.parent.mkdir()
    assert program_project(lone) == PROJECT  # no project file: slonk-infra's own namespace
    (lone.parent / "Pulumi.yaml").write_text("runtime: python\n", encoding="utf-8")
    with pytest.raises(StackFileError, match="needs 'name:'"):
        program_project(lone)
