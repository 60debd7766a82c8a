"""Optional features, synthesized together once (the `variant` fixture): pinned S3 model, VPC with endpoints,
data capture."""

from __future__ import annotations

import json
from pathlib import Path

from cdk_support import GROUPS, KEY_ARN, PAGING_TOPIC, SUBNETS, Synth

from stacks.endpoints.timeouts import derive_timeouts


def test_an_existing_pinned_object_is_loaded_and_only_that_object_is_readable(variant: Synth) -> None:
    for kind in ("Chat", "Decision"):
        _, model = variant.one("AWS::SageMaker::Model", f"/{kind}/Model")
        container = model["Properties"]["PrimaryContainer"]
        assert container["ModelDataUrl"] == "s3://models-bucket/llm/model.tar.gz"
        assert container["Environment"]["SM_LLAMA_CPP_MODEL"] == "/opt/ml/model/llm/q4.gguf"
        _, policy = variant.one("AWS::IAM::Policy", f"/{kind}/ExecutionPolicy")
        found = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
        assert found["ReadModelArtifact"]["Resource"] == "arn:aws:s3:::models-bucket/llm/model.tar.gz"
        assert found["DecryptModelArtifact"] == {"Sid": "DecryptModelArtifact", "Action": "kms:Decrypt",
                                                 "Effect": "Allow", "Resource": KEY_ARN}
    # Nothing is packaged or uploaded for an existing object.
    assert not list(Path(variant.app.outdir).glob("asset.*.tar.gz"))


def test_the_version_pin_is_checked_before_the_models_exist(variant: Synth) -> None:
    pin_id, pin = variant.one("Custom::ModelArtifactPin", "/ModelArtifact/PinCheck")
    assert {k: pin["Properties"][k] for k in ("Bucket", "Key", "VersionId")} == {
        "Bucket": "models-bucket", "Key": "llm/model.tar.gz", "VersionId": "v2"}
    for kind in ("Chat", "Decision"):
        _, model = variant.one("AWS::SageMaker::Model", f"/{kind}/Model")
        assert pin_id in model["DependsOn"]


def test_a_given_model_size_sizes_the_timeouts_and_an_override_wins(variant: Synth) -> None:
    expected = derive_timeouts(4_000_000_000)
    _, chat = variant.one("AWS::SageMaker::EndpointConfig", "/Chat/Config")
    chat_variant = chat["Properties"]["ProductionVariants"][0]
    assert chat_variant["ContainerStartupHealthCheckTimeoutInSeconds"] == expected.container_startup_health_check_s
    assert chat_variant["ModelDataDownloadTimeoutInSeconds"] == expected.model_data_download_s
    _, decision = variant.one("AWS::SageMaker::EndpointConfig", "/Decision/Config")
    assert decision["Properties"]["ProductionVariants"][0]["ContainerStartupHealthCheckTimeoutInSeconds"] == 1800


def test_vpc_mode_places_both_models_in_the_subnets_with_private_service_endpoints(variant: Synth) -> None:
    for kind in ("Chat", "Decision"):
        _, model = variant.one("AWS::SageMaker::Model", f"/{kind}/Model")
        assert model["Properties"]["VpcConfig"] == {"Subnets": SUBNETS, "SecurityGroupIds": GROUPS}
        assert model["Properties"]["EnableNetworkIsolation"] is True
    endpoints = {e["Properties"]["ServiceName"]: e["Properties"] for e in
                 variant.resources("AWS::EC2::VPCEndpoint").values()}
    assert set(endpoints) == {f"com.amazonaws.us-east-1.{s}" for s in ("s3", "ecr.api", "ecr.dkr", "logs")}
    assert endpoints["com.amazonaws.us-east-1.s3"]["VpcEndpointType"] == "Gateway"
    assert endpoints["com.amazonaws.us-east-1.ecr.dkr"]["SubnetIds"] == SUBNETS


def test_data_capture_writes_encrypted_to_a_locked_down_bucket(variant: Synth) -> None:
    key_id, _ = variant.one("AWS::KMS::Key", "/DataKey")
    bucket_id, bucket = variant.one("AWS::S3::Bucket", "/DataCapture/Bucket")
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]}}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert "DestinationBucketName" in props["LoggingConfiguration"]
    _, policy = variant.one("AWS::S3::BucketPolicy", "/DataCapture/Bucket/Policy")
    deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny and deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}

    _, chat = variant.one("AWS::SageMaker::EndpointConfig", "/Chat/Config")
    capture = chat["Properties"]["DataCaptureConfig"]
    assert capture["EnableCapture"] is True and capture["InitialSamplingPercentage"] == 20
    assert capture["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert capture["CaptureOptions"] == [{"CaptureMode": "Input"}]
    assert bucket_id in json.dumps(capture["DestinationS3Uri"])
    _, decision = variant.one("AWS::SageMaker::EndpointConfig", "/Decision/Config")
    assert "DataCaptureConfig" not in decision["Properties"], "capture is per endpoint, off unless asked"
    _, chat_policy = variant.one("AWS::IAM::Policy", "/Chat/ExecutionPolicy")
    sids = {s["Sid"] for s in chat_policy["Properties"]["PolicyDocument"]["Statement"]}
    assert {"WriteDataCapture", "EncryptDataCapture", "CreateInterfacesInTheConfiguredSubnets"} <= sids


def test_batch_transform_gets_encrypted_logged_locations_and_the_decision_role_only_the_access_it_needs(
        variant: Synth) -> None:
    key_id, _ = variant.one("AWS::KMS::Key", "/DataKey")
    bucket_id, bucket = variant.one("AWS::S3::Bucket", "/BatchTransform/Data/Bucket")
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]}}
    assert props["LoggingConfiguration"]["LogFilePrefix"] == "batch/"
    assert props["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == 30
    outputs = variant.json["Outputs"]
    for name, prefix in (("BatchInputUri", "input/"), ("BatchOutputUri", "output/")):
        assert outputs[name]["Value"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, f"/{prefix}"]]}
    assert outputs["BatchInstanceType"]["Value"] == "ml.m5.xlarge"
    _, policy = variant.one("AWS::IAM::Policy", "/Decision/ExecutionPolicy")
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    arn = {"Fn::GetAtt": [bucket_id, "Arn"]}
    assert by_sid["ListBatchInput"] == {"Sid": "ListBatchInput", "Action": "s3:ListBucket", "Effect": "Allow",
                                        "Resource": arn, "Condition": {"StringLike": {"s3:prefix": "input/*"}}}
    assert by_sid["ReadBatchInput"]["Resource"] == {"Fn::Join": ["", [arn, "/input/*"]]}
    assert by_sid["ReadBatchInput"]["Action"] == "s3:GetObject"
    assert by_sid["WriteBatchOutput"]["Resource"] == {"Fn::Join": ["", [arn, "/output/*"]]}
    assert sorted(by_sid["WriteBatchOutput"]["Action"]) == ["s3:AbortMultipartUpload", "s3:PutObject"]
    assert by_sid["UseTheBatchDataKey"]["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert ":log-group:/aws/sagemaker/TransformJobs:*" in json.dumps(by_sid["WriteTransformLogs"]["Resource"])
    assert by_sid["PutTransformMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TransformJobs"}}
    _, chat = variant.one("AWS::IAM::Policy", "/Chat/ExecutionPolicy")
    assert bucket_id not in json.dumps(chat), "the chat model's role never sees the batch data"
    _, model = variant.one("AWS::SageMaker::Model", "/Decision/Model")
    assert model["Properties"]["EnableNetworkIsolation"] is True, "SageMaker moves the data; the container never"


def test_alarms_notify_the_subscribed_topic_and_the_configured_paging_topic(variant: Synth) -> None:
    topic_id, _ = variant.one("AWS::SNS::Topic", "/Alarms/Topic")
    subscriptions = variant.resources("AWS::SNS::Subscription").values()
    assert sorted((s["Properties"]["Protocol"], s["Properties"]["Endpoint"]) for s in subscriptions) == [
        ("email", "oncall@example.com"), ("email", "ops@example.com")]
    assert all(s["Properties"]["TopicArn"] == {"Ref": topic_id} for s in subscriptions)
    alarms = variant.resources("AWS::CloudWatch::Alarm").values()
    assert alarms and all(a["Properties"]["AlarmActions"] == [{"Ref": topic_id}, PAGING_TOPIC] for a in alarms)
