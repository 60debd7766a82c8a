"""Hosting modes in the templates (issue 15): `shared` (two inference components on one endpoint), `serverless`
(the decision endpoint), and `dedicated` (dev, prod); resource types, properties, and what each mode leaves out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk_support import Synth, load

from stacks.config.hosting.serverless import SERVERLESS_MAX_BODY_BYTES
from stacks.endpoints.timeouts import derive_timeouts

KINDS = ("Chat", "Decision")


def environment_of(synth: Synth, kind: str) -> dict[str, str]:
    _, model = synth.one("AWS::SageMaker::Model", f"/{kind}/Model")
    return model["Properties"]["PrimaryContainer"]["Environment"]


def alarm_dimensions(synth: Synth) -> list[dict[str, str]]:
    return [{d["Name"]: d["Value"] for d in a["Properties"]["Dimensions"]}
            for a in synth.resources("AWS::CloudWatch::Alarm").values() if "Dimensions" in a["Properties"]]


# --- shared -------------------------------------------------------------------------------------------------------

def test_shared_hosting_is_one_endpoint_with_two_inference_components(shared: Synth) -> None:
    assert len(shared.resources("AWS::SageMaker::Endpoint")) == 1
    assert len(shared.resources("AWS::SageMaker::EndpointConfig")) == 1
    assert len(shared.resources("AWS::SageMaker::Model")) == 2
    endpoint_id, endpoint = shared.one("AWS::SageMaker::Endpoint", "/Shared/Endpoint")
    assert endpoint["Properties"]["EndpointName"] == "semif-shared-models"
    assert "DeploymentConfig" not in endpoint["Properties"], "components roll their own updates"
    for kind in KINDS:
        model_id, _ = shared.one("AWS::SageMaker::Model", f"/{kind}/Model")
        _, component = shared.one("AWS::SageMaker::InferenceComponent", f"/{kind}/Component")
        props = component["Properties"]
        assert props["InferenceComponentName"] == f"semif-shared-{kind.lower()}"
        assert props["EndpointName"] == {"Fn::GetAtt": [endpoint_id, "EndpointName"]}  # created after the endpoint
        assert props["VariantName"] == "AllTraffic"
        assert props["Specification"]["ModelName"] == {"Fn::GetAtt": [model_id, "ModelName"]}
        assert props["Specification"]["ComputeResourceRequirements"] == {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 3072}
        assert props["RuntimeConfig"] == {"CopyCount": 1}
        expected = derive_timeouts(shared.stack.artifact.artifact.model_bytes,
                                   shared.stack.artifact.artifact.tarball_bytes)
        assert props["Specification"]["StartupParameters"] == {
            "ContainerStartupHealthCheckTimeoutInSeconds": expected.container_startup_health_check_s,
            "ModelDataDownloadTimeoutInSeconds": expected.model_data_download_s}
        assert "DeploymentConfig" not in props  # no auto_rollback in the example


def test_the_shared_endpoint_config_holds_instances_routing_role_and_key_but_no_model(shared: Synth) -> None:
    role_id, _ = shared.one("AWS::IAM::Role", "/Shared/ExecutionRole")
    key_id, _ = shared.one("AWS::KMS::Key", "/DataKey")
    _, config = shared.one("AWS::SageMaker::EndpointConfig", "/Shared/Config")
    props = config["Properties"]
    assert props["ExecutionRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert props["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert props["EnableNetworkIsolation"] is True
    (variant,) = props["ProductionVariants"]
    assert variant == {"VariantName": "AllTraffic", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1,
                       "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                       # Room for a second instance, where an update's new copy starts before the old one stops.
                       "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2}}
    assert "DataCaptureConfig" not in props
    assert not shared.resources("AWS::ApplicationAutoScaling::ScalableTarget")


def test_the_shared_endpoints_role_pulls_both_images_and_writes_every_log_group_of_it(shared: Synth) -> None:
    _, policy = shared.one("AWS::IAM::Policy", "/Shared/ExecutionPolicy")
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    repository_id, _ = shared.one("AWS::ECR::Repository", "/DecisionImage/Repository")
    assert by_sid["PullImageChat"]["Resource"] == shared.stack.registry.repository_arn()
    assert by_sid["PullImageDecision"]["Resource"] == {"Fn::GetAtt": [repository_id, "Arn"]}
    for kind, group in (("Chat", "/Chat/Logs"), ("Decision", "/Decision/Logs")):
        log_id, _ = shared.one("AWS::Logs::LogGroup", group)
        assert by_sid[f"WriteLogs{kind}"]["Resource"] == {"Fn::GetAtt": [log_id, "Arn"]}
    assert by_sid["ReadModelArtifact"]["Action"] == "s3:GetObject"
    names = {g["Properties"]["LogGroupName"] for g in shared.resources("AWS::Logs::LogGroup").values()
             if "LogGroupName" in g["Properties"]}
    assert {"/aws/sagemaker/Endpoints/semif-shared-models", "/aws/sagemaker/InferenceComponents/semif-shared-chat",
            "/aws/sagemaker/InferenceComponents/semif-shared-decision"} <= names


def test_each_component_uses_the_cores_it_reserves_and_the_adapter_knows_its_endpoint(shared: Synth) -> None:
    for kind in KINDS:
        assert environment_of(shared, kind)["SM_LLAMA_CPP_THREADS"] == "1"
    assert environment_of(shared, "Decision")["SEMIF_ENDPOINT_NAME"] == "semif-shared-models"


def test_shared_alarms_watch_each_component_and_outputs_name_it(shared: Synth) -> None:
    dimensions = alarm_dimensions(shared)
    for kind in ("chat", "decision"):
        assert dimensions.count({"InferenceComponentName": f"semif-shared-{kind}"}) == 3
    outputs = shared.json["Outputs"]
    config_id, _ = shared.one("AWS::SageMaker::EndpointConfig", "/Shared/Config")
    for kind in KINDS:
        assert outputs[f"{kind}EndpointName"]["Value"] == "semif-shared-models"
        assert outputs[f"{kind}EndpointConfigName"]["Value"] == {"Fn::GetAtt": [config_id, "EndpointConfigName"]}
        assert outputs[f"{kind}InferenceComponentName"]["Value"] == f"semif-shared-{kind.lower()}"


def test_components_scale_their_copies_the_endpoint_its_instances_and_updates_roll(scaled_sharing: Synth) -> None:
    _, config = scaled_sharing.one("AWS::SageMaker::EndpointConfig", "/Shared/Config")
    assert config["Properties"]["ProductionVariants"][0]["ManagedInstanceScaling"] == {
        "Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 3}
    for kind, bounds, target in (("Chat", (2, 4), 20), ("Decision", (1, 2), 200)):
        component_id, _ = scaled_sharing.one("AWS::SageMaker::InferenceComponent", f"/{kind}/Component")
        _, scalable = scaled_sharing.one("AWS::ApplicationAutoScaling::ScalableTarget", f"/{kind}/ScalableTarget")
        props = scalable["Properties"]
        assert props["ResourceId"] == f"inference-component/semif-shared-{kind.lower()}"
        assert props["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
        assert (props["MinCapacity"], props["MaxCapacity"]) == bounds
        assert component_id in scalable["DependsOn"]
        _, policy = scaled_sharing.one("AWS::ApplicationAutoScaling::ScalingPolicy", f"/{kind}/ScalableTarget")
        tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert tracking["PredefinedMetricSpecification"] == {
            "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"}
        assert tracking["TargetValue"] == target
    _, chat = scaled_sharing.one("AWS::SageMaker::InferenceComponent", "/Chat/Component")
    deployment = chat["Properties"]["DeploymentConfig"]
    assert deployment["RollingUpdatePolicy"]["MaximumBatchSize"] == {"Type": "COPY_COUNT", "Value": 1}  # half of 2
    alarm_ids = {scaled_sharing.one("AWS::CloudWatch::Alarm", f"/Chat/{a}")[0]
                 for a in ("Errors5xxAlarm", "ModelErrorsAlarm")}
    assert {a["AlarmName"]["Ref"] for a in deployment["AutoRollbackConfiguration"]["Alarms"]} == alarm_ids
    assert chat["Properties"]["Specification"]["ComputeResourceRequirements"]["MaxMemoryRequiredInMb"] == 3072


# --- serverless ---------------------------------------------------------------------------------------------------

def test_the_serverless_decision_endpoint_has_one_serverless_variant_and_nothing_instance_based(
        serverless: Synth) -> None:
    _, endpoint = serverless.one("AWS::SageMaker::Endpoint", "/Decision/Endpoint")
    assert endpoint["Properties"]["EndpointName"] == "semif-serverless-decision-serverless"
    _, config = serverless.one("AWS::SageMaker::EndpointConfig", "/Decision/Config")
    props = config["Properties"]
    (variant,) = props["ProductionVariants"]  # exactly one variant
    model_id, model = serverless.one("AWS::SageMaker::Model", "/Decision/Model")
    assert variant == {"VariantName": "AllTraffic", "ModelName": {"Fn::GetAtt": [model_id, "ModelName"]},
                       "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 2}}
    for absent in ("KmsKeyId", "DataCaptureConfig", "ShadowProductionVariants", "VpcConfig"):
        assert absent not in props, absent
    assert model["Properties"]["EnableNetworkIsolation"] is False
    assert "VpcConfig" not in model["Properties"]
    assert not serverless.resources("AWS::ApplicationAutoScaling::ScalableTarget")


def test_serverless_caps_the_adapter_body_at_the_4_mb_payload_and_the_chat_side_stays_dedicated(
        serverless: Synth) -> None:
    decision = environment_of(serverless, "Decision")
    assert decision["SEMIF_MAX_BODY_BYTES"] == str(SERVERLESS_MAX_BODY_BYTES) == "4194304"
    assert decision["SEMIF_ENDPOINT_NAME"] == "semif-serverless-decision-serverless"
    _, chat = serverless.one("AWS::SageMaker::EndpointConfig", "/Chat/Config")
    assert chat["Properties"]["ProductionVariants"][0]["InstanceType"] == "ml.m5.large"
    _, chat_model = serverless.one("AWS::SageMaker::Model", "/Chat/Model")
    assert chat_model["Properties"]["EnableNetworkIsolation"] is True, "only the serverless model gives it up"


def test_switching_to_serverless_is_a_new_endpoint_not_an_update(dev: Synth, serverless: Synth) -> None:
    """UpdateEndpoint cannot turn an instance-based endpoint into a serverless one: the name changes with the
    mode on the same construct, so CloudFormation creates the new endpoint and deletes the old one."""
    assert load("dev").endpoint_name("decision") == "semif-dev-decision"
    assert load("serverless").endpoint_name("decision") == "semif-serverless-decision-serverless"
    dev_id, _ = dev.one("AWS::SageMaker::Endpoint", "/Decision/Endpoint")
    serverless_id, _ = serverless.one("AWS::SageMaker::Endpoint", "/Decision/Endpoint")
    assert dev_id == serverless_id  # same logical id, new EndpointName: a replacement
    back = load("serverless", {"decision": {"hosting": "dedicated", "instance_type": "ml.m5.large",
                                            "serverless": None, "network_isolation": None}})
    assert back.endpoint_name("decision") == "semif-serverless-decision"


# --- every mode: the alarm topic, the warning-rate alarm, the dashboard, the outputs ------------------------------

@pytest.fixture(params=["dev", "prod", "shared", "serverless", "graviton", "pooled"])
def each_mode(request: pytest.FixtureRequest) -> Synth:
    return request.getfixturevalue(request.param)


def test_the_alarm_topic_is_encrypted_with_the_data_key_and_every_alarm_notifies_it(each_mode: Synth) -> None:
    key_id, key = each_mode.one("AWS::KMS::Key", "/DataKey")
    topic_id, topic = each_mode.one("AWS::SNS::Topic", "/Alarms/Topic")
    name = each_mode.stack.deployment.stack_name
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert topic["Properties"]["TopicName"] == f"{name}-alarms"
    alarms = each_mode.resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 7  # 3 per model and the decision warning rate
    for alarm in alarms.values():
        assert {"Ref": topic_id} in alarm["Properties"]["AlarmActions"]
        assert alarm["Properties"]["AlarmName"].startswith(f"{name}-")  # what the key policy's SourceArn allows
    statement = next(s for s in key["Properties"]["KeyPolicy"]["Statement"]
                     if s.get("Sid") == "CloudWatchAlarmsPublishToTheAlarmTopic")
    assert statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"]).endswith(f':alarm:{name}-*"]]}}')
    assert f":{name}-alarms" in json.dumps(statement["Condition"]["StringEquals"][
        "kms:EncryptionContext:aws:sns:topicArn"])
    assert each_mode.json["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic_id}


def test_the_warning_rate_alarm_divides_warned_by_decisions_of_the_adapter(each_mode: Synth) -> None:
    _, alarm = each_mode.one("AWS::CloudWatch::Alarm", "/Decision/WarningRateAlarm")
    props = alarm["Properties"]
    assert props["Threshold"] == 0.25 and props["ComparisonOperator"] == "GreaterThanThreshold"
    queries = {q["Id"]: q for q in props["Metrics"]}
    assert queries["expr_1"]["Expression"] == "IF(decisions > 0, warned / decisions, 0)"
    adapter_name = each_mode.stack.deployment.endpoint_name("decision")
    for query_id, metric in (("warned", "WarnedDecisions"), ("decisions", "Decisions")):
        stat = queries[query_id]["MetricStat"]
        assert stat["Metric"]["Namespace"] == "SemIf/Adapter" and stat["Metric"]["MetricName"] == metric
        assert stat["Metric"]["Dimensions"] == [{"Name": "EndpointName", "Value": adapter_name}]
        assert stat["Stat"] == "Sum" and queries[query_id]["ReturnData"] is False
    assert environment_of(each_mode, "Decision")["SEMIF_ENDPOINT_NAME"] == adapter_name


def dashboard_body(synth: Synth) -> str:
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard", "/Operations/Dashboard")
    assert dashboard["Properties"]["DashboardName"] == synth.stack.deployment.stack_name
    body = dashboard["Properties"]["DashboardBody"]
    return "".join(part if isinstance(part, str) else json.dumps(part) for part in body["Fn::Join"][1])


def widget_metrics(body: str) -> list[list[Any]]:
    widgets = json.loads(body.replace('{"Ref": "AWS::Region"}', "us-east-1"))["widgets"]
    return [m for w in widgets if w["type"] == "metric" for m in w["properties"]["metrics"]]


def test_the_dashboard_shows_traffic_latency_errors_utilisation_capacity_and_the_adapter(each_mode: Synth) -> None:
    metrics = widget_metrics(dashboard_body(each_mode))
    names = {m[1] for m in metrics if len(m) > 1 and not isinstance(m[0], dict)}
    assert {"Invocations", "ModelLatency", "Invocation4XXErrors", "Invocation5XXErrors",
            "InvocationModelErrors"} <= names
    adapter = {m[1] for m in metrics if m[0] == "SemIf/Adapter"}
    assert adapter == {"Decisions", "WarnedDecisions", "LowOptionMass", "NearTie", "ResultCacheHits",
                       "DecisionLatency", "QueueTime", "ForwardTime", "EvaluatedTokens", "CachedTokens",
                       "TopProbability", "AllowedTokenMass", "ClientErrors", "ServerErrors"}
    latency = [m[-1] for m in metrics if len(m) > 1 and m[1] == "ModelLatency"]
    assert {"p50", "p90", "p99"} <= {options.get("stat") for options in latency}
    expressions = [m[0]["expression"] for m in metrics if isinstance(m[0], dict) and "expression" in m[0]]
    assert "IF(decisions > 0, warned / decisions, 0)" in expressions
    # decisions per Scoring value, whichever occur: our methods' names or a decision head's native:TYPE
    adapter_name = environment_of(each_mode, "Decision")["SEMIF_ENDPOINT_NAME"]
    assert ("SEARCH('{SemIf/Adapter,EndpointName,Scoring} MetricName=\"Decisions\" "
            f"EndpointName=\"{adapter_name}\"', 'Sum', 60)") in expressions
    mode = each_mode.stack.deployment.settings.hosting_of("decision")
    if mode == "serverless":
        assert "ModelSetupTime" in names
    gpu = each_mode.stack.deployment.settings.accelerator == "gpu"
    if each_mode.stack.deployment.settings.shared:
        assert {"CPUUtilizationNormalized", "MemoryUtilizationNormalized", "InvocationsPerCopy"} <= names
        assert "invocations / per" in expressions
    else:
        assert {"CPUUtilization", "MemoryUtilization", "InvocationsPerInstance"} <= names
    assert ("GPUUtilization" in names or "GPUUtilizationNormalized" in names) == gpu


def test_the_decision_models_name_is_an_output_for_batch_transform(each_mode: Synth) -> None:
    model_id, _ = each_mode.one("AWS::SageMaker::Model", "/Decision/Model")
    assert each_mode.json["Outputs"]["DecisionModelName"]["Value"] == {"Fn::GetAtt": [model_id, "ModelName"]}
    assert "BatchInputUri" not in each_mode.json["Outputs"], "batch locations are opt-in"
