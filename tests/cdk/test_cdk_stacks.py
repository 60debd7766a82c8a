"""The synthesized templates of dev (CPU) and prod (GPU): every property the issue asks for, asserted."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match
from aws_cdk.region_info import RegionInfo
from cdk_support import Synth, as_list

from stacks.endpoints.timeouts import derive_timeouts
from stacks.image.decision_image import CONTAINER_DIR, image_tag, source_fingerprint
from stacks.security.iam_hardening import confine_service_trust

KINDS = ("Chat", "Decision")
# What each shipped environment builds with: nothing extra on CPU; on GPU (prod: ml.g5, A10G) the CUDA builder
# and one CUDA architecture.
BUILD_ARGS = {"cpu": {}, "gpu": {"BUILDER_IMAGE": "nvidia/cuda:13.0.2-devel-amzn2023",
                                 "LLAMA_CMAKE_ARGS": "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86"}}


def dlc_image(region: str, tag: str) -> str:
    account = RegionInfo.get(region).dlc_repository_account
    return f"{account}.dkr.ecr.{region}.amazonaws.com/llama-cpp:{tag}"


def statements(synth: Synth, policy_path: str) -> list[dict[str, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", policy_path)
    return policy["Properties"]["PolicyDocument"]["Statement"]


@pytest.fixture(params=["dev", "prod"])
def both(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def test_one_model_config_and_named_endpoint_per_role(both: Synth) -> None:
    env_name = both.stack.deployment.environment_name
    for resource_type in ("AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Endpoint"):
        assert len(both.resources(resource_type)) == 2
    for kind in KINDS:
        _, endpoint = both.one("AWS::SageMaker::Endpoint", f"/{kind}/Endpoint")
        assert endpoint["Properties"]["EndpointName"] == f"semif-{env_name}-{kind.lower()}"
    # Only the endpoint is named: new Model/EndpointConfig on change, endpoint updated in place.
    for model in both.resources("AWS::SageMaker::Model").values():
        assert "ModelName" not in model["Properties"]
    for config in both.resources("AWS::SageMaker::EndpointConfig").values():
        assert "EndpointConfigName" not in config["Properties"]


def test_outputs_name_both_endpoints_for_the_smoke_scripts(both: Synth) -> None:
    env_name = both.stack.deployment.environment_name
    outputs = both.json["Outputs"]
    assert outputs["ChatEndpointName"]["Value"] == f"semif-{env_name}-chat"
    assert outputs["DecisionEndpointName"]["Value"] == f"semif-{env_name}-decision"
    config_id, _ = both.one("AWS::SageMaker::EndpointConfig", "/Chat/Config")
    assert outputs["ChatEndpointConfigName"]["Value"] == {"Fn::GetAtt": [config_id, "EndpointConfigName"]}


@pytest.mark.parametrize(("env_name", "tag"), [("dev", "server-sagemaker-cpu-v1"),
                                               ("prod", "server-sagemaker-cuda-v1")])
def test_chat_runs_the_stock_dlc_and_decision_the_child_image(env_name: str, tag: str,
                                                              request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(env_name)
    _, chat = synth.one("AWS::SageMaker::Model", "/Chat/Model")
    assert chat["Properties"]["PrimaryContainer"]["Image"] == dlc_image("us-east-1", tag)
    image_id, image = synth.one("Custom::DecisionImage", "/DecisionImage/Image")
    _, decision = synth.one("AWS::SageMaker::Model", "/Decision/Model")
    # The URI is an attribute of the build resource: CloudFormation creates the model only after the build.
    assert decision["Properties"]["PrimaryContainer"]["Image"] == {"Fn::GetAtt": [image_id, "ImageUri"]}
    props = image["Properties"]
    assert props["BaseImage"] == dlc_image("us-east-1", tag)
    accelerator = "gpu" if env_name == "prod" else "cpu"
    assert json.loads(props["BuildArgs"]) == BUILD_ARGS[accelerator]
    assert props["ImageTag"] == image_tag(source_fingerprint(CONTAINER_DIR), props["BaseImage"], accelerator,
                                          BUILD_ARGS[accelerator])
    assert props["ImageTag"].startswith("cuda-" if accelerator == "gpu" else "cpu-")


def test_image_tag_follows_the_adapter_source_and_the_base_image(tmp_path: Any) -> None:
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    (tmp_path / "app.py").write_text("print('v1')\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"cache")
    base = dlc_image("us-east-1", "server-sagemaker-cpu-v1")
    first = image_tag(source_fingerprint(tmp_path), base, "cpu")
    (tmp_path / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"other cache")
    assert image_tag(source_fingerprint(tmp_path), base, "cpu") == first, "caches are not source"
    assert image_tag(source_fingerprint(tmp_path), base.replace("cpu-v1", "cpu-v2"), "cpu") != first
    assert image_tag(source_fingerprint(tmp_path), base, "cpu", {"LLAMA_CMAKE_ARGS": "-DX=1"}) != first
    (tmp_path / "app.py").write_text("print('v2')\n")
    assert image_tag(source_fingerprint(tmp_path), base, "cpu") != first


def test_one_llama_map_for_both_with_the_model_path_pinned(both: Synth) -> None:
    settings = both.stack.deployment.settings
    artifact_file = both.stack.artifact.artifact.model_file
    environments = {}
    for kind in KINDS:
        _, model = both.one("AWS::SageMaker::Model", f"/{kind}/Model")
        environments[kind] = model["Properties"]["PrimaryContainer"]["Environment"]
        assert environments[kind]["SM_LLAMA_CPP_MODEL"] == f"/opt/ml/model/{artifact_file}"
    llama = {k: v for k, v in environments["Decision"].items() if k.startswith("SM_LLAMA_CPP_")}
    assert llama == environments["Chat"]
    assert {k for k in environments["Decision"] if not k.startswith("SM_LLAMA_CPP_")} == {
        *settings.decision.adapter_env, "SEMIF_MODEL_SHA256", "SEMIF_ENDPOINT_NAME"}
    assert environments["Decision"]["SEMIF_MODEL_SHA256"] == both.stack.artifact.artifact.model_sha256
    # The EndpointName dimension of the adapter's metrics, which the dashboard and the warning alarm read.
    assert environments["Decision"]["SEMIF_ENDPOINT_NAME"] == f"semif-{both.stack.deployment.environment_name}-decision"


def test_gpu_offloads_all_layers_on_a_recent_inference_ami(dev: Synth, prod: Synth) -> None:
    for kind in KINDS:
        _, gpu_model = prod.one("AWS::SageMaker::Model", f"/{kind}/Model")
        assert gpu_model["Properties"]["PrimaryContainer"]["Environment"]["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"
        _, gpu_config = prod.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
        variant = gpu_config["Properties"]["ProductionVariants"][0]
        assert variant["InstanceType"] == "ml.g5.xlarge"
        assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
        _, cpu_model = dev.one("AWS::SageMaker::Model", f"/{kind}/Model")
        assert "SM_LLAMA_CPP_N_GPU_LAYERS" not in cpu_model["Properties"]["PrimaryContainer"]["Environment"]
        _, cpu_config = dev.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
        assert "InferenceAmiVersion" not in cpu_config["Properties"]["ProductionVariants"][0]


def test_endpoint_configs_use_the_data_key_where_the_instance_allows_one(dev: Synth, prod: Synth) -> None:
    key_id, _ = dev.one("AWS::KMS::Key", "/DataKey")
    for kind in KINDS:
        _, config = dev.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
        assert config["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        # ml.g5 has NVMe instance storage, encrypted by the instance; SageMaker refuses a key for it.
        _, gpu_config = prod.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
        assert "KmsKeyId" not in gpu_config["Properties"]
    dev.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_startup_timeouts_are_derived_from_the_model_size(both: Synth) -> None:
    artifact = both.stack.artifact.artifact
    expected = derive_timeouts(artifact.model_bytes, artifact.tarball_bytes)
    for kind in KINDS:
        _, config = both.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
        variant = config["Properties"]["ProductionVariants"][0]
        assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == expected.container_startup_health_check_s
        assert variant["ModelDataDownloadTimeoutInSeconds"] == expected.model_data_download_s
        assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= 600


def test_each_model_waits_for_its_own_role_policy(both: Synth) -> None:
    for kind in KINDS:
        role_id, _ = both.one("AWS::IAM::Role", f"/{kind}/ExecutionRole")
        policy_id, policy = both.one("AWS::IAM::Policy", f"/{kind}/ExecutionPolicy")
        _, model = both.one("AWS::SageMaker::Model", f"/{kind}/Model")
        assert model["Properties"]["ExecutionRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
        assert policy["Properties"]["Roles"] == [{"Ref": role_id}]
        assert policy_id in model["DependsOn"]


def test_the_model_artifact_is_an_asset_hashed_from_the_model_digest(both: Synth) -> None:
    artifact = both.stack.artifact.artifact
    key = hashlib.sha256(artifact.asset_hash.encode()).hexdigest() + ".gz"
    for kind in KINDS:
        _, model = both.one("AWS::SageMaker::Model", f"/{kind}/Model")
        url = model["Properties"]["PrimaryContainer"]["ModelDataUrl"]
        assert url == {"Fn::Sub": f"s3://cdk-hnb659fds-assets-${{AWS::AccountId}}-us-east-1/{key}"}


def test_execution_roles_are_least_privilege(both: Synth) -> None:
    asset_key = hashlib.sha256(both.stack.artifact.artifact.asset_hash.encode()).hexdigest() + ".gz"
    repository_id, _ = both.one("AWS::ECR::Repository", "/DecisionImage/Repository")
    dlc_arn = f"arn:aws:ecr:us-east-1:{RegionInfo.get('us-east-1').dlc_repository_account}:repository/llama-cpp"
    for kind, repository in (("Chat", dlc_arn), ("Decision", {"Fn::GetAtt": [repository_id, "Arn"]})):
        found = {s["Sid"]: s for s in statements(both, f"/{kind}/ExecutionPolicy")}
        read = found["ReadModelArtifact"]
        assert read["Action"] == "s3:GetObject"
        resource = json.dumps(read["Resource"])
        assert asset_key in resource and resource.count("arn:aws:s3:::") == 1  # the object, not the bucket
        assert found["PullImage"]["Resource"] == repository
        log_id, _ = both.one("AWS::Logs::LogGroup", f"/{kind}/Logs")
        assert found["WriteLogs"]["Resource"] == {"Fn::GetAtt": [log_id, "Arn"]}
        assert found["PutInstanceMetrics"]["Condition"] == {
            "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}
        wildcard = {sid for sid, s in found.items() if s["Resource"] == "*"}
        assert wildcard == {"RegistryLogin", "PutInstanceMetrics"}


def test_no_policy_grants_a_whole_service(both: Synth) -> None:
    for policy in both.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                assert action != "*" and not action.endswith(":*"), action


def test_endpoint_log_groups_and_every_other_log_group_are_retained(dev: Synth, prod: Synth) -> None:
    for synth, days in ((dev, 30), (prod, 90)):
        groups = synth.resources("AWS::Logs::LogGroup")
        assert groups and all(g["Properties"].get("RetentionInDays") == days for g in groups.values())
        names = {g["Properties"].get("LogGroupName") for g in groups.values()}
        env_name = synth.stack.deployment.environment_name
        assert {f"/aws/sagemaker/Endpoints/semif-{env_name}-chat",
                f"/aws/sagemaker/Endpoints/semif-{env_name}-decision"} <= names


def test_ecr_repository_is_immutable_scanned_encrypted_and_pruned(dev: Synth) -> None:
    key_id, _ = dev.one("AWS::KMS::Key", "/Key")
    _, repository = dev.one("AWS::ECR::Repository", "/DecisionImage/Repository")
    props = repository["Properties"]
    assert props["ImageTagMutability"] == "IMMUTABLE"
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["EncryptionConfiguration"] == {"EncryptionType": "KMS", "KmsKey": {"Fn::GetAtt": [key_id, "Arn"]}}
    rules = json.loads(props["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    assert rules[0]["selection"]["countType"] == "imageCountMoreThan"
    assert repository["DeletionPolicy"] == "Retain"


def test_codebuild_builds_from_the_dlc_with_a_key_and_retained_logs(dev: Synth) -> None:
    key_id, _ = dev.one("AWS::KMS::Key", "/Key")
    logs_id, _ = dev.one("AWS::Logs::LogGroup", "/DecisionImage/BuildLogs")
    _, project = dev.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    props = project["Properties"]
    assert props["Environment"]["PrivilegedMode"] is True
    assert props["EncryptionKey"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert props["LogsConfig"]["CloudWatchLogs"] == {"GroupName": {"Ref": logs_id}, "Status": "ENABLED"}
    assert props["Source"]["Type"] == "NO_SOURCE"
    script = props["Source"]["BuildSpec"]
    variables = {v["Name"]: v["Value"] for v in props["Environment"]["EnvironmentVariables"]}
    assert variables["DLC_REGISTRY"] == f"{RegionInfo.get('us-east-1').dlc_repository_account}.dkr.ecr.us-east-1." \
                                        "amazonaws.com"
    for step in ('for registry in \\"$DLC_REGISTRY\\" \\"${REPOSITORY_URI%%/*}\\"', '--password-stdin \\"$registry\\"',
                 '--build-arg BASE_IMAGE=\\"$BASE_IMAGE\\"', 'docker push \\"$REPOSITORY_URI:$IMAGE_TAG\\"',
                 "exit 0; fi"):
        assert step in script, step
    build_statements = statements(dev, "/DecisionImage/Build/Role/DefaultPolicy")
    by_sid = {s.get("Sid"): s for s in build_statements}
    assert by_sid["ReadBuildContext"]["Action"] == "s3:GetObject"
    assert by_sid["PullBaseImage"]["Resource"].endswith(":repository/llama-cpp")


@pytest.mark.parametrize(("env_name", "build_minutes"), [("dev", 40), ("prod", 50)])
def test_the_build_waiter_is_bounded_and_polls(env_name: str, build_minutes: int,
                                               request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(env_name)
    _, project = synth.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    assert project["Properties"]["TimeoutInMinutes"] == build_minutes
    _, waiter = synth.one("AWS::StepFunctions::StateMachine", "/DecisionImage/BuildWaiter")
    definition = json.dumps(waiter["Properties"]["DefinitionString"])
    # (build timeout + 10 minutes margin) / 30 s query interval polls, then onTimeout fails the resource;
    # at most 60 minutes in all, the custom resource's own limit.
    polls = (build_minutes + 10) * 60 // 30
    assert f'\\"IntervalSeconds\\":30,\\"MaxAttempts\\":{polls},\\"BackoffRate\\":1' in definition
    assert polls * 30 <= 3600
    assert "framework-onTimeout-task" in definition
    _, image = synth.one("Custom::DecisionImage", "/DecisionImage/Image")
    assert image["Properties"]["ServiceTimeout"] == "3600"
    handlers = {f["Properties"]["Handler"] for f in synth.resources("AWS::Lambda::Function").values()}
    assert {"image_build.on_event", "image_build.is_complete"} <= handlers


def test_autoscaling_tracks_invocations_per_instance_only_where_configured(dev: Synth, prod: Synth) -> None:
    assert not dev.resources("AWS::ApplicationAutoScaling::ScalableTarget")
    for kind in KINDS:
        endpoint_id, _ = prod.one("AWS::SageMaker::Endpoint", f"/{kind}/Endpoint")
        target_id, target = prod.one("AWS::ApplicationAutoScaling::ScalableTarget", f"/{kind}/ScalableTarget")
        props = target["Properties"]
        assert (props["MinCapacity"], props["MaxCapacity"]) == (1, 4)
        assert props["ResourceId"] == f"endpoint/semif-prod-{kind.lower()}/variant/AllTraffic"
        assert props["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
        assert "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in json.dumps(props["RoleARN"])
        assert endpoint_id in target["DependsOn"]
        _, policy = prod.one("AWS::ApplicationAutoScaling::ScalingPolicy", f"/{kind}/ScalableTarget")
        tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert policy["Properties"]["ScalingTargetId"] == {"Ref": target_id}
        assert tracking["PredefinedMetricSpecification"] == {
            "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}
        expected = prod.stack.deployment.settings.endpoint(kind.lower()).autoscaling
        assert expected is not None and tracking["TargetValue"] == expected.target_invocations_per_instance
        _, endpoint = prod.one("AWS::SageMaker::Endpoint", f"/{kind}/Endpoint")
        assert endpoint["Properties"]["RetainAllVariantProperties"] is True


def test_alarms_watch_latency_5xx_and_model_errors(both: Synth) -> None:
    env_name = both.stack.deployment.environment_name
    for kind in KINDS:
        name = f"semif-{env_name}-{kind.lower()}"
        settings = both.stack.deployment.settings.endpoint(kind.lower()).alarms
        metrics = {}
        for alarm in both.resources("AWS::CloudWatch::Alarm").values():
            props = alarm["Properties"]
            dimensions = {d["Name"]: d["Value"] for d in props.get("Dimensions", [])}
            if dimensions == {"EndpointName": name, "VariantName": "AllTraffic"}:
                assert props["Namespace"] == "AWS/SageMaker"
                metrics[props["MetricName"]] = props
        assert set(metrics) == {"ModelLatency", "Invocation5XXErrors", "InvocationModelErrors"}
        assert metrics["ModelLatency"]["Threshold"] == settings.latency_p90_ms * 1000  # microseconds
        assert metrics["ModelLatency"]["ExtendedStatistic"] == "p90"
        assert metrics["Invocation5XXErrors"]["Threshold"] == settings.errors_5xx


def test_prod_deployments_roll_back_on_the_error_alarms(dev: Synth, prod: Synth) -> None:
    for kind in KINDS:
        _, endpoint = dev.one("AWS::SageMaker::Endpoint", f"/{kind}/Endpoint")
        assert "DeploymentConfig" not in endpoint["Properties"]
        _, endpoint = prod.one("AWS::SageMaker::Endpoint", f"/{kind}/Endpoint")
        config = endpoint["Properties"]["DeploymentConfig"]
        alarm_ids = {prod.one("AWS::CloudWatch::Alarm", f"/{kind}/{a}")[0]
                     for a in ("Errors5xxAlarm", "ModelErrorsAlarm")}
        assert {a["AlarmName"]["Ref"] for a in config["AutoRollbackConfiguration"]["Alarms"]} == alarm_ids
        assert config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == "ALL_AT_ONCE"


def test_models_run_network_isolated_and_data_capture_is_off_by_default(both: Synth) -> None:
    for kind in KINDS:
        _, model = both.one("AWS::SageMaker::Model", f"/{kind}/Model")
        assert model["Properties"]["EnableNetworkIsolation"] is True
        assert "VpcConfig" not in model["Properties"]
        _, config = both.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
        assert "DataCaptureConfig" not in config["Properties"]
    assert not both.resources("AWS::S3::Bucket")


def test_no_secret_reaches_the_template(both: Synth) -> None:
    text = json.dumps(both.json)
    for word in ("API_KEY", "HF_TOKEN", "PASSWORD", "SECRET_KEY", "AKIA"):
        assert word not in text
    both.template.has_resource_properties("AWS::SageMaker::Model", Match.object_like({
        "PrimaryContainer": Match.object_like({"Mode": "SingleModel"})}))


def test_a_role_trusting_a_service_without_a_known_source_condition_fails_the_synth() -> None:
    stack = Stack(App(), "Trust")
    iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    with pytest.raises(ValueError, match=r"no confused-deputy condition known for ec2\.amazonaws\.com"):
        confine_service_trust(stack)
