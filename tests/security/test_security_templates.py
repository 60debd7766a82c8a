"""Issue 7, deployed infrastructure: each property asserted on the synthesized templates of dev (CPU), prod (GPU),
the hosting modes (shared: inference components; serverless) and the optional-features variant (pinned S3 model,
VPC with service endpoints, data capture and batch buckets, notifications)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from cdk_support import Synth, acknowledgements_in_effect, as_list

from stacks.config.instances import describe_instance
from stacks.security.iam_hardening import UNCONFINED
from stacks.security.vpc_endpoints import INTERFACE_SERVICES

SYNTHS = ("dev", "prod", "shared", "serverless", "variant", "api")
POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")

# Independent of stacks/config/secrets.py on purpose: broader names, and values that are credentials whatever their key.
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


def build_key(synth: Synth) -> dict[str, Any]:
    """The key of the image repository and its build (stacks/security/keys.py)."""
    key_id, _ = synth.one("AWS::KMS::Key", "/Key/")
    return {"Fn::GetAtt": [key_id, "Arn"]}


def data_key(synth: Synth) -> dict[str, Any]:
    """The key of logs, captured data and endpoint volumes, which the build may not use."""
    key_id, _ = synth.one("AWS::KMS::Key", "/DataKey/")
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
    dlc = synthesized.stack.registry.repository_arn()
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
    if synthesized.stack.capture is None and synthesized.stack.batch is None:
        assert buckets == {}, "without data capture or batch the stack creates no bucket (the model is a CDK asset)"
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
    assert len(buckets) == 4  # data capture and batch transform data, each with its access-log bucket
    assert sum("LoggingConfiguration" in b["Properties"] for b in buckets.values()) == 2


# --- ECR, CodeBuild ----------------------------------------------------------------------------------------------

def test_repositories_are_immutable_and_scanned_on_push(synthesized: Synth) -> None:
    repositories = synthesized.resources("AWS::ECR::Repository")
    assert len(repositories) == 1
    for repository in repositories.values():
        props = repository["Properties"]
        assert props["ImageTagMutability"] == "IMMUTABLE"
        assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
        assert props["EncryptionConfiguration"]["KmsKey"] == build_key(synthesized)


def test_build_projects_are_encrypted_logged_and_only_the_image_build_is_privileged(synthesized: Synth) -> None:
    groups = synthesized.resources("AWS::Logs::LogGroup")
    privileged = []
    for logical_id, project in synthesized.resources("AWS::CodeBuild::Project").items():
        props = project["Properties"]
        assert props["EncryptionKey"] == build_key(synthesized), logical_id
        logs = props["LogsConfig"]["CloudWatchLogs"]
        assert logs["Status"] == "ENABLED" and groups[logs["GroupName"]["Ref"]]["Properties"]["RetentionInDays"] > 0
        if props["Environment"].get("PrivilegedMode"):
            privileged.append(logical_id)
            assert "docker build" in props["Source"]["BuildSpec"], "privileged mode only for docker build"
    image_build, _ = synthesized.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    assert privileged == [image_build]


# --- Encryption at rest ------------------------------------------------------------------------------------------

def test_endpoint_configs_use_the_data_key_unless_the_instance_keeps_its_data_on_local_storage(
        synthesized: Synth) -> None:
    configs = synthesized.resources("AWS::SageMaker::EndpointConfig")
    assert len(configs) == (1 if synthesized.stack.deployment.settings.shared else 2)
    for logical_id, config in configs.items():
        variant = config["Properties"]["ProductionVariants"][0]
        if "ServerlessConfig" in variant:  # no instance: SageMaker manages the compute (acknowledged, with why)
            assert "KmsKeyId" not in config["Properties"], logical_id
            acknowledged = acknowledgements_in_effect(synthesized.construct(logical_id))
            assert "instance" in acknowledged["NIST.800.53.R5-SageMakerEndpointConfigurationKMSKeyConfigured"]
        elif describe_instance(variant["InstanceType"]).local_storage:
            assert "KmsKeyId" not in config["Properties"], logical_id
        else:
            assert config["Properties"]["KmsKeyId"] == data_key(synthesized), logical_id
        capture = config["Properties"].get("DataCaptureConfig")
        if capture:
            assert capture["KmsKeyId"] == data_key(synthesized)


def test_the_sagemaker_api_reference_still_says_a_key_does_not_cover_local_storage() -> None:
    """Why prod's ml.g5 configs carry no key: re-check the vendor's statement whenever botocore is upgraded."""
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model(
        "CreateEndpointConfig").input_shape
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", shape.members["KmsKeyId"].documentation))
    assert "Local storage volumes are encrypted using a hardware module on the instance" in text
    assert ("the KmsKeyId parameter does not encrypt instance local storage" in text
            or "You can't request a KmsKeyId when using an instance type with local storage" in text)


def test_every_log_group_is_retained_and_encrypted_with_the_data_key(synthesized: Synth) -> None:
    groups = synthesized.resources("AWS::Logs::LogGroup")
    assert len(groups) >= 7
    for logical_id, group in groups.items():
        assert group["Properties"]["KmsKeyId"] == data_key(synthesized), logical_id
        assert group["Properties"]["RetentionInDays"] == synthesized.stack.deployment.settings.log_retention_days
    _, key = synthesized.one("AWS::KMS::Key", "/DataKey/")
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
    vpc = variant.stack.deployment.settings.vpc
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


# --- Issue 13: trust, keys, the build waiter, VPC interfaces, the model's bucket ----------------------------------

# What Step Functions' execution logging needs on "*" (AWS's documented policy; no resource-level permissions).
LOG_DELIVERY_ACTIONS = {"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
                        "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
                        "logs:DescribeResourcePolicies", "logs:DescribeLogGroups"}

def key_policies(synth: Synth) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, key in synth.resources("AWS::KMS::Key").items():
        for statement in key["Properties"]["KeyPolicy"]["Statement"]:
            yield logical_id, statement


def test_no_key_policy_statement_has_a_wildcard_action_or_principal(synthesized: Synth) -> None:
    """CDK's default key policy gives the account kms:*; ours name each action (stacks/security/keys.py)."""
    seen = 0
    for logical_id, statement in key_policies(synthesized):
        seen += 1
        assert "NotAction" not in statement and "NotPrincipal" not in statement, logical_id
        for action in as_list(statement["Action"]):
            assert "*" not in action, f"{logical_id}: {action} in its key policy"
        assert statement["Principal"] not in ("*", {"AWS": "*"}), logical_id
    assert seen >= 5


def test_the_build_can_use_the_build_key_and_never_the_data_key(synthesized: Synth) -> None:
    build_role, _ = synthesized.one("AWS::IAM::Role", "/DecisionImage/Build/Role")
    own = statements_of_role(synthesized, build_role)
    granted = [s for s in own if any(a.startswith("kms:") for a in as_list(s["Action"]))]
    assert [s["Resource"] for s in granted] == [build_key(synthesized)]
    data_key_id = data_key(synthesized)["Fn::GetAtt"][0]
    assert data_key_id not in json.dumps(own), "no statement of the build role names the data key"
    _, key = synthesized.one("AWS::KMS::Key", "/DataKey/")
    denies = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s["Effect"] == "Deny"]
    assert denies == [{"Sid": "TheImageBuildNeverUsesThisKey", "Effect": "Deny", "Resource": "*",
                       "Principal": {"AWS": {"Fn::GetAtt": [build_role, "Arn"]}},
                       "Action": sorted(denies[0]["Action"])}]
    assert {"kms:Decrypt", "kms:CreateGrant", "kms:ReEncryptFrom"} <= set(denies[0]["Action"])


def statements_of_role(synth: Synth, role_id: str) -> list[dict[str, Any]]:
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def test_every_service_trust_policy_names_the_source_account_and_arn(synthesized: Synth) -> None:
    arn_services = {"sagemaker.amazonaws.com": ":sagemaker:", "codebuild.amazonaws.com": ":codebuild:",
                    "states.amazonaws.com": ":states:"}
    roles = synthesized.resources("AWS::IAM::Role")
    assert len(roles) >= 9
    for logical_id, role in roles.items():
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        service = statement["Principal"]["Service"]
        if service in UNCONFINED:  # API Gateway's logging role (the System One API): no documented condition
            assert "Condition" not in statement and role["DeletionPolicy"] == "Retain", logical_id
            continue
        condition = statement["Condition"]
        assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}, logical_id
        if service in arn_services:
            arn = json.dumps(condition["ArnLike"]["aws:SourceArn"])
            assert arn_services[service] in arn and "AWS::AccountId" in arn and ":us-east-1:" in arn, logical_id
        else:
            assert service == "lambda.amazonaws.com" and set(condition) == {"StringEquals"}, logical_id


def test_the_build_waiters_check_reads_builds_and_cannot_start_one(synthesized: Synth) -> None:
    check_role, _ = synthesized.one("AWS::IAM::Role", "/DecisionImage/CheckBuild/Role")
    start_role, _ = synthesized.one("AWS::IAM::Role", "/DecisionImage/StartBuild/Role")
    check = [a for s in statements_of_role(synthesized, check_role) for a in as_list(s["Action"])]
    assert "codebuild:BatchGetBuilds" in check and "codebuild:StartBuild" not in check
    starters = [logical_id for logical_id, s in policy_statements(synthesized)
                if "codebuild:StartBuild" in as_list(s["Action"])]
    assert len(starters) == 1 and {"Ref": start_role} in synthesized.json["Resources"][starters[0]]["Properties"][
        "Roles"]


def test_the_waiter_state_machine_writes_only_to_its_own_log_group(synthesized: Synth) -> None:
    _, machine = synthesized.one("AWS::StepFunctions::StateMachine", "/BuildWaiter/waiter-state-machine")
    log_group = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"][
        "LogGroupArn"]
    _, policy = synthesized.one("AWS::IAM::Policy", "/BuildWaiter/waiter-state-machine/Role/DefaultPolicy")
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions = as_list(statement["Action"])
        if {"logs:CreateLogStream", "logs:PutLogEvents"} & set(actions):
            assert statement["Resource"] == log_group and sorted(actions) == ["logs:CreateLogStream",
                                                                             "logs:PutLogEvents"]
        elif statement["Resource"] == "*":
            assert set(actions) == LOG_DELIVERY_ACTIONS, actions


def test_vpc_interfaces_are_created_only_in_the_configured_subnets_and_groups(variant: Synth) -> None:
    vpc = variant.stack.deployment.settings.vpc
    assert vpc is not None
    for kind in ("Chat", "Decision"):
        _, policy = variant.one("AWS::IAM::Policy", f"/{kind}/ExecutionPolicy")
        by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
        create = by_sid["CreateInterfacesInTheConfiguredSubnets"]
        assert create["Action"] == "ec2:CreateNetworkInterface"
        resources = [json.dumps(r) for r in create["Resource"]]
        named = sorted(r.split(":")[-1].rstrip('"]}') for r in resources if "network-interface" not in r)
        assert named == sorted([f"subnet/{s}" for s in vpc.subnet_ids] +
                               [f"security-group/{g}" for g in vpc.security_group_ids])
        assert by_sid["ManageTheInterfaces"]["Resource"] == {"Fn::Join": ["", [
            "arn:aws:ec2:us-east-1:", {"Ref": "AWS::AccountId"}, ":network-interface/*"]]}
        assert all(a.startswith("ec2:Describe") for a in by_sid["DescribeTheNetwork"]["Action"])
        assert "*" not in [r for s in by_sid.values() if s["Sid"] != "DescribeTheNetwork" and "ec2" in str(
            s["Action"]) for r in as_list(s["Resource"])]


def test_the_model_is_read_only_from_a_bucket_of_its_expected_owner(synthesized: Synth) -> None:
    for kind in ("Chat", "Decision"):
        _, policy = synthesized.one("AWS::IAM::Policy", f"/{kind}/ExecutionPolicy")
        read = next(s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Sid"] == "ReadModelArtifact")
        assert read["Condition"] == {"StringEquals": {"s3:ResourceAccount": {"Ref": "AWS::AccountId"}}}
    checks = synthesized.resources("Custom::ModelArtifactPin")
    if synthesized.stack.deployment.settings.model.source == "s3":
        (check,) = checks.values()
        assert check["Properties"]["ExpectedBucketOwner"] == {"Ref": "AWS::AccountId"}
    else:
        assert checks == {}, "a CDK asset lives in this account's bootstrap bucket: nothing to check at deploy"


def test_every_decision_instance_gets_the_digest_to_verify_and_the_chat_container_none(synthesized: Synth) -> None:
    artifact = synthesized.stack.artifact.artifact
    assert artifact.model_sha256, "dev/prod hash the embedded model; the variant's S3 model declares its sha256"
    _, decision = synthesized.one("AWS::SageMaker::Model", "/Decision/Model")
    _, chat = synthesized.one("AWS::SageMaker::Model", "/Chat/Model")
    assert decision["Properties"]["PrimaryContainer"]["Environment"]["SEMIF_MODEL_SHA256"] == artifact.model_sha256
    assert "SEMIF_MODEL_SHA256" not in chat["Properties"]["PrimaryContainer"]["Environment"]


# --- Issue 15: alarms that notify, an encrypted topic, isolation given up only where serverless requires it -------

def test_every_alarm_has_an_action_and_it_is_the_encrypted_tls_only_alarm_topic(synthesized: Synth) -> None:
    topic_id, topic = synthesized.one("AWS::SNS::Topic", "/Alarms/Topic")
    assert topic["Properties"]["KmsMasterKeyId"] == data_key(synthesized)
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    assert len(alarms) >= 7
    for logical_id, alarm in alarms.items():
        actions = alarm["Properties"].get("AlarmActions", [])
        assert {"Ref": topic_id} in actions, f"{logical_id} notifies nobody"
    (policy,) = [p for p in synthesized.resources("AWS::SNS::TopicPolicy").values()
                 if p["Properties"]["Topics"] == [{"Ref": topic_id}]]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
               for s in statements)
    publish = next(s for s in statements if s.get("Sid") == "CloudWatchAlarmsOfThisStack")
    assert publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and publish["Action"] == "sns:Publish"
    assert publish["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert ":alarm:" in json.dumps(publish["Condition"]["ArnLike"]["aws:SourceArn"])


def test_network_isolation_is_off_only_for_a_serverless_model_and_acknowledged_there(synthesized: Synth) -> None:
    for logical_id, model in synthesized.resources("AWS::SageMaker::Model").items():
        isolated = model["Properties"]["EnableNetworkIsolation"]
        serverless = synthesized.construct(logical_id).node.scope.props.hosting.mode == "serverless"
        assert isolated is not serverless, logical_id
        if not isolated:
            skips = {s["id"]: s["comment"] for s in model["Metadata"]["checkov"]["skip"]}
            assert "does not support network isolation" in skips["CKV_AWS_370"]
