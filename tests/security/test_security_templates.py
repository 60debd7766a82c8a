"""Issue 7, deployed infrastructure: each property asserted on the synthesized templates of dev (CPU), prod (GPU)
and the optional-features variant (pinned S3 model, VPC with service endpoints, data capture buckets)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from cdk_support import Synth, acknowledgements_in_effect, as_list

from stacks.instances import describe_instance
from stacks.vpc_endpoints import INTERFACE_SERVICES

SYNTHS = ("dev", "prod", "variant")
POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")

# Independent of stacks/config.py on purpose: broader names, and values that are credentials whatever their key.
SECRET_NAME = re.compile(r"SECRET|PASSW(OR)?D|TOKEN|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|CREDENTIAL", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"(?<![A-Z0-9])(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"  # AWS access key id
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b(gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})\b")
CFN_OWNED_NAMES = frozenset({"ServiceToken"})  # custom-resource property names defined by CloudFormation


@pytest.fixture(params=SYNTHS)
def synthesized(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def policy_statements(synth: Synth) -> Iterator[tuple[str, dict[str, Any]]]:
    """(logical id of the policy, statement) for every identity policy of the template."""
    for policy_type in POLICY_TYPES:
        for logical_id, policy in synth.resources(policy_type).items():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                yield logical_id, statement
    for logical_id, role in synth.resources("AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def stack_key(synth: Synth) -> dict[str, Any]:
    key_id, _ = synth.one("AWS::KMS::Key", "/Key")
    return {"Fn::GetAtt": [key_id, "Arn"]}


# --- IAM ---------------------------------------------------------------------------------------------------------

def test_no_statement_grants_every_action_and_each_action_wildcard_is_acknowledged(synthesized: Synth) -> None:
    for logical_id, statement in policy_statements(synthesized):
        assert "NotAction" not in statement and "NotResource" not in statement, (logical_id, statement)
        acknowledged = acknowledgements_in_effect(synthesized.construct(logical_id))
        for action in as_list(statement["Action"]):
            assert action != "*" and not action.endswith(":*"), f"{logical_id}: {action} grants a whole service"
            if "*" in action:  # e.g. CDK's kms:GenerateDataKey* grant
                assert f"AwsSolutions-IAM5[Action::{action}]" in acknowledged, f"{logical_id}: {action}"


def test_every_resource_wildcard_is_acknowledged_with_a_reason_naming_its_actions(synthesized: Synth) -> None:
    wildcards = 0
    for logical_id, statement in policy_statements(synthesized):
        if "*" not in as_list(statement["Resource"]):
            continue
        wildcards += 1
        reason = acknowledgements_in_effect(synthesized.construct(logical_id)).get("AwsSolutions-IAM5[Resource::*]")
        assert reason, f"{logical_id}: Resource * on {statement['Action']} is not acknowledged"
        for action in as_list(statement["Action"]):
            service = action.split(":")[0] + ":"
            assert action in reason or service in reason, f"{logical_id}: the reason does not cover {action}"
    # ecr:GetAuthorizationToken (build + 2 endpoints), metric data (2), log delivery of the waiter: never zero.
    assert wildcards >= 4


def test_execution_roles_read_one_object_pull_one_repository_and_write_their_own_logs(synthesized: Synth) -> None:
    repository_id, _ = synthesized.one("AWS::ECR::Repository", "/DecisionImage/Repository")
    dlc = synthesized.stack.registry.repository_arn
    for kind, repository in (("Chat", dlc), ("Decision", {"Fn::GetAtt": [repository_id, "Arn"]})):
        log_id, _ = synthesized.one("AWS::Logs::LogGroup", f"/{kind}/Logs")
        _, policy = synthesized.one("AWS::IAM::Policy", f"/{kind}/ExecutionPolicy")
        by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
        object_arn = json.dumps(by_sid["ReadModelArtifact"]["Resource"])
        assert by_sid["ReadModelArtifact"]["Action"] == "s3:GetObject" and "*" not in object_arn
        assert by_sid["PullImage"]["Resource"] == repository
        assert by_sid["WriteLogs"]["Resource"] == {"Fn::GetAtt": [log_id, "Arn"]}
        assert by_sid["PutInstanceMetrics"]["Condition"] == {
            "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}


# --- S3 ----------------------------------------------------------------------------------------------------------

def test_every_bucket_is_encrypted_tls_only_private_and_logged_or_acknowledged(synthesized: Synth) -> None:
    buckets = synthesized.resources("AWS::S3::Bucket")
    if synthesized.stack.capture is None:
        assert buckets == {}, "without data capture the stack creates no bucket (the model is a CDK asset)"
    policies = {p["Properties"]["Bucket"]["Ref"]: p for p in synthesized.resources("AWS::S3::BucketPolicy").values()}
    for logical_id, bucket in buckets.items():
        props = bucket["Properties"]
        rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
        assert rule["SSEAlgorithm"] in ("aws:kms", "AES256"), logical_id
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True}, logical_id
        deny = [s for s in policies[logical_id]["Properties"]["PolicyDocument"]["Statement"]
                if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
        assert deny and deny[0]["Principal"] == {"AWS": "*"} and deny[0]["Action"] == "s3:*", logical_id
        assert len(as_list(deny[0]["Resource"])) == 2, "the bucket and its objects"
        if "LoggingConfiguration" not in props:
            acknowledged = acknowledgements_in_effect(synthesized.construct(logical_id))
            skips = {s["id"]: s["comment"] for s in bucket["Metadata"]["checkov"]["skip"]}
            assert "AwsSolutions-S1" in acknowledged and "CKV_AWS_18" in skips, f"{logical_id}: not logged"
        else:
            assert props["LoggingConfiguration"]["DestinationBucketName"]["Ref"] in buckets


def test_the_variant_has_buckets_so_the_bucket_test_is_not_vacuous(variant: Synth) -> None:
    buckets = variant.resources("AWS::S3::Bucket")
    assert len(buckets) == 2
    assert sum("LoggingConfiguration" in b["Properties"] for b in buckets.values()) == 1


# --- ECR, CodeBuild ----------------------------------------------------------------------------------------------

def test_repositories_are_immutable_and_scanned_on_push(synthesized: Synth) -> None:
    repositories = synthesized.resources("AWS::ECR::Repository")
    assert len(repositories) == 1
    for repository in repositories.values():
        props = repository["Properties"]
        assert props["ImageTagMutability"] == "IMMUTABLE"
        assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
        assert props["EncryptionConfiguration"]["KmsKey"] == stack_key(synthesized)


def test_build_projects_are_encrypted_logged_and_only_the_image_build_is_privileged(synthesized: Synth) -> None:
    groups = synthesized.resources("AWS::Logs::LogGroup")
    privileged = []
    for logical_id, project in synthesized.resources("AWS::CodeBuild::Project").items():
        props = project["Properties"]
        assert props["EncryptionKey"] == stack_key(synthesized), logical_id
        logs = props["LogsConfig"]["CloudWatchLogs"]
        assert logs["Status"] == "ENABLED" and groups[logs["GroupName"]["Ref"]]["Properties"]["RetentionInDays"] > 0
        if props["Environment"].get("PrivilegedMode"):
            privileged.append(logical_id)
            assert "docker build" in props["Source"]["BuildSpec"], "privileged mode only for docker build"
    image_build, _ = synthesized.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    assert privileged == [image_build]


# --- Encryption at rest ------------------------------------------------------------------------------------------

def test_endpoint_configs_use_the_stack_key_unless_the_instance_keeps_its_data_on_local_storage(
        synthesized: Synth) -> None:
    configs = synthesized.resources("AWS::SageMaker::EndpointConfig")
    assert len(configs) == 2
    for logical_id, config in configs.items():
        instance_type = config["Properties"]["ProductionVariants"][0]["InstanceType"]
        if describe_instance(instance_type).local_storage:
            assert "KmsKeyId" not in config["Properties"], logical_id
        else:
            assert config["Properties"]["KmsKeyId"] == stack_key(synthesized), logical_id
        capture = config["Properties"].get("DataCaptureConfig")
        if capture:
            assert capture["KmsKeyId"] == stack_key(synthesized)


def test_the_sagemaker_api_reference_still_says_a_key_does_not_cover_local_storage() -> None:
    """Why prod's ml.g5 configs carry no key: re-check the vendor's statement whenever botocore is upgraded."""
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model(
        "CreateEndpointConfig").input_shape
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", shape.members["KmsKeyId"].documentation))
    assert "Local storage volumes are encrypted using a hardware module on the instance" in text
    assert ("the KmsKeyId parameter does not encrypt instance local storage" in text
            or "You can't request a KmsKeyId when using an instance type with local storage" in text)


def test_every_log_group_is_retained_and_encrypted_with_the_stack_key(synthesized: Synth) -> None:
    groups = synthesized.resources("AWS::Logs::LogGroup")
    assert len(groups) >= 7
    for logical_id, group in groups.items():
        assert group["Properties"]["KmsKeyId"] == stack_key(synthesized), logical_id
        assert group["Properties"]["RetentionInDays"] == synthesized.stack.deployment.env.log_retention_days
    _, key = synthesized.one("AWS::KMS::Key", "/Key")
    statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    logs = statements["CloudWatchLogsOfThisAccount"]
    assert logs["Principal"] == {"Service": {"Fn::Join": ["", ["logs.us-east-1.", {"Ref": "AWS::URLSuffix"}]]}}
    arn = json.dumps(logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert ":logs:us-east-1:" in arn and "AWS::AccountId" in arn and arn.endswith(':log-group:*"]]}')
    assert key["Properties"]["EnableKeyRotation"] is True
    assert all(s["Principal"] != "*" and s["Principal"] != {"AWS": "*"} for s in statements.values())


# --- Secrets -----------------------------------------------------------------------------------------------------

def named_values(template: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(where, name, value) of every environment variable, parameter and custom-resource property."""
    for name, parameter in template.get("Parameters", {}).items():
        yield "Parameters", name, parameter.get("Default")
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SageMaker::Model":
            yield from ((logical_id, k, v) for k, v in props["PrimaryContainer"].get("Environment", {}).items())
        elif resource["Type"] == "AWS::Lambda::Function":
            yield from ((logical_id, k, v) for k, v in props.get("Environment", {}).get("Variables", {}).items())
        elif resource["Type"] == "AWS::CodeBuild::Project":
            for variable in props["Environment"].get("EnvironmentVariables", []):
                yield logical_id, variable["Name"], variable["Value"]
                if variable["Name"] == "DOCKER_BUILD_ARGS_JSON":  # docker build args: names and values
                    yield from ((logical_id, k, v) for k, v in json.loads(variable["Value"]).items())
        elif resource["Type"].startswith("Custom::"):
            yield from ((logical_id, k, v) for k, v in props.items() if k not in CFN_OWNED_NAMES)


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def secret_findings(template: dict[str, Any]) -> list[str]:
    found = [f"{where}: {name}" for where, name, _ in named_values(template) if SECRET_NAME.search(name)]
    found += [f"value {match.group(0)[:8]}..." for text in strings(template) for match in SECRET_VALUE.finditer(text)]
    return found


def test_no_template_holds_a_secret_looking_name_or_value(synthesized: Synth) -> None:
    names = [name for _, name, _ in named_values(synthesized.json)]
    assert "SM_LLAMA_CPP_MODEL" in names and "DOCKER_BUILD_ARGS_JSON" in names  # the scan sees the maps
    assert secret_findings(synthesized.json) == []


def test_the_secret_scan_finds_planted_secrets(dev: Synth) -> None:
    template = json.loads(json.dumps(dev.json))
    model_id, _ = dev.one("AWS::SageMaker::Model", "/Chat/Model")
    environment = template["Resources"][model_id]["Properties"]["PrimaryContainer"]["Environment"]
    environment["SM_LLAMA_CPP_API_KEY"] = "x"
    environment["SM_LLAMA_CPP_ALIAS"] = "AKIAIOSFODNN7EXAMPLE"
    project_id, _ = dev.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    for variable in template["Resources"][project_id]["Properties"]["Environment"]["EnvironmentVariables"]:
        if variable["Name"] == "DOCKER_BUILD_ARGS_JSON":
            variable["Value"] = json.dumps({"HF_TOKEN": "hf_" + "a" * 34})
    assert sorted(secret_findings(template)) == sorted([
        f"{model_id}: SM_LLAMA_CPP_API_KEY", f"{project_id}: HF_TOKEN", "value AKIAIOSF...", "value hf_aaaaa..."])


def test_logs_get_no_request_bodies_or_registry_passwords(synthesized: Synth) -> None:
    capture = [c for c in synthesized.resources("AWS::SageMaker::EndpointConfig").values()
               if "DataCaptureConfig" in c["Properties"]]
    assert len(capture) == (1 if synthesized.stack.capture else 0), "data capture is opt-in, per endpoint"
    for machine in synthesized.resources("AWS::StepFunctions::StateMachine").values():
        assert machine["Properties"]["LoggingConfiguration"]["IncludeExecutionData"] is False
    _, project = synthesized.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    script = project["Properties"]["Source"]["BuildSpec"]
    logins = script.count("docker login")  # one loop over the registries (DLC, this stack's, an ECR builder mirror)
    assert logins >= 1 and logins == script.count("docker login --username AWS --password-stdin")
    assert "set -x" not in script and "--password " not in script


# --- VPC mode ----------------------------------------------------------------------------------------------------

def test_vpc_mode_without_egress_gets_private_routes_to_s3_ecr_and_logs(variant: Synth) -> None:
    vpc = variant.stack.deployment.env.vpc
    assert vpc is not None and vpc.vpc_endpoints is not None
    endpoints = {e["Properties"]["ServiceName"]: e["Properties"]
                 for e in variant.resources("AWS::EC2::VPCEndpoint").values()}
    assert set(endpoints) == {f"com.amazonaws.us-east-1.{s}" for s in ("s3", *INTERFACE_SERVICES)}
    assert set(INTERFACE_SERVICES) == {"ecr.api", "ecr.dkr", "logs"}
    gateway = endpoints.pop("com.amazonaws.us-east-1.s3")
    assert gateway["VpcEndpointType"] == "Gateway"
    assert gateway["RouteTableIds"] == vpc.vpc_endpoints.route_table_ids
    for interface in endpoints.values():
        assert interface["VpcEndpointType"] == "Interface" and interface["PrivateDnsEnabled"] is True
        assert interface["SubnetIds"] == vpc.subnet_ids
        assert interface["SecurityGroupIds"] == vpc.security_group_ids
        assert interface["VpcId"] == vpc.vpc_endpoints.vpc_id


def test_without_vpc_mode_no_endpoint_is_made(dev: Synth, prod: Synth) -> None:
    for synth in (dev, prod):
        assert synth.resources("AWS::EC2::VPCEndpoint") == {}
        assert all("VpcConfig" not in m["Properties"] for m in synth.resources("AWS::SageMaker::Model").values())
