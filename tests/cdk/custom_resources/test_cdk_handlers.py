"""Custom resource handlers against botocore Stubber: the AWS calls, their order, and the failure messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from stacks.custom_resources.handlers import artifact_pin, image_build

PROPS = {
    "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
    "ProjectName": "DecisionImageBuild",
    "RepositoryName": "semif-dev-decision",
    "RepositoryUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/semif-dev-decision",
    "ImageTag": "cpu-0123456789abcdef01234567",
    "BaseImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1",
    "BuildArgs": '{"LLAMA_CMAKE_ARGS": "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=75;80"}',
}
IMAGE_URI = f"{PROPS['RepositoryUri']}:{PROPS['ImageTag']}"
BUILD_ID = "DecisionImageBuild:7c1e9a2e-0000-4000-8000-000000000001"
LOG_LINK = "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEvent:group=build"


def client(name: str) -> Any:
    return boto3.client(name, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def stubbed(name: str) -> Iterator[tuple[Any, Stubber]]:
    """A client of `name` behind botocore's Stubber; every queued response must be used."""
    service = client(name)
    with Stubber(service) as stub:
        yield service, stub
        stub.assert_no_pending_responses()


@pytest.fixture
def ecr() -> Iterator[tuple[Any, Stubber]]:
    yield from stubbed("ecr")


@pytest.fixture
def codebuild() -> Iterator[tuple[Any, Stubber]]:
    yield from stubbed("codebuild")


def event(request: str, **extra: Any) -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": PROPS, **extra}


def build(status: str, **extra: Any) -> dict[str, Any]:
    return {"id": BUILD_ID, "buildStatus": status, **extra}


def test_create_starts_the_build_with_tag_and_base_image(ecr: tuple[Any, Stubber],
                                                         codebuild: tuple[Any, Stubber]) -> None:
    ecr[1].add_client_error("describe_images", "ImageNotFoundException", expected_params={
        "repositoryName": PROPS["RepositoryName"], "imageIds": [{"imageTag": PROPS["ImageTag"]}]})
    codebuild[1].add_response("start_build", {"build": build("IN_PROGRESS")}, expected_params={
        "projectName": PROPS["ProjectName"],
        "environmentVariablesOverride": [
            {"name": "IMAGE_TAG", "value": PROPS["ImageTag"], "type": "PLAINTEXT"},
            {"name": "BASE_IMAGE", "value": PROPS["BaseImage"], "type": "PLAINTEXT"},
            {"name": "DOCKER_BUILD_ARGS_JSON", "value": PROPS["BuildArgs"], "type": "PLAINTEXT"},
        ]})
    result = image_build.on_event(event("Create"), codebuild=codebuild[0], ecr=ecr[0])
    assert result == {"PhysicalResourceId": IMAGE_URI, "Data": {"ImageUri": IMAGE_URI, "BuildId": BUILD_ID}}


def test_an_image_already_in_ecr_is_not_rebuilt(ecr: tuple[Any, Stubber], codebuild: tuple[Any, Stubber]) -> None:
    ecr[1].add_response("describe_images", {"imageDetails": [{"imageTags": [PROPS["ImageTag"]]}]})
    result = image_build.on_event(event("Update", PhysicalResourceId="old"), codebuild=codebuild[0], ecr=ecr[0])
    assert result["Data"] == {"ImageUri": IMAGE_URI, "BuildId": ""}
    assert image_build.is_complete({**event("Update"), **result}, codebuild=codebuild[0]) == {"IsComplete": True}


def test_delete_is_a_no_op(ecr: tuple[Any, Stubber], codebuild: tuple[Any, Stubber]) -> None:
    deleting = event("Delete", PhysicalResourceId=IMAGE_URI)
    assert image_build.on_event(deleting, codebuild=codebuild[0], ecr=ecr[0]) == {"PhysicalResourceId": IMAGE_URI}
    assert image_build.is_complete(deleting, codebuild=codebuild[0]) == {"IsComplete": True}


def test_is_complete_waits_while_the_build_runs_then_succeeds(codebuild: tuple[Any, Stubber]) -> None:
    waiting = event("Create", PhysicalResourceId=IMAGE_URI, Data={"ImageUri": IMAGE_URI, "BuildId": BUILD_ID})
    codebuild[1].add_response("batch_get_builds", {"builds": [build("IN_PROGRESS", currentPhase="BUILD")]},
                              expected_params={"ids": [BUILD_ID]})
    codebuild[1].add_response("batch_get_builds", {"builds": [build("SUCCEEDED")]})
    assert image_build.is_complete(waiting, codebuild=codebuild[0]) == {"IsComplete": False}
    assert image_build.is_complete(waiting, codebuild=codebuild[0]) == {"IsComplete": True}


def test_a_failed_build_fails_the_deploy_with_its_log_link(codebuild: tuple[Any, Stubber]) -> None:
    waiting = event("Create", PhysicalResourceId=IMAGE_URI, Data={"ImageUri": IMAGE_URI, "BuildId": BUILD_ID})
    codebuild[1].add_response("batch_get_builds", {"builds": [build(
        "FAILED",
        phases=[{"phaseType": "PROVISIONING", "phaseStatus": "SUCCEEDED"},
                {"phaseType": "BUILD", "phaseStatus": "FAILED",
                 "contexts": [{"statusCode": "COMMAND_EXECUTION_ERROR",
                               "message": "Error while executing command: docker build. Reason: exit status 1"}]}],
        logs={"deepLink": LOG_LINK})]})
    with pytest.raises(image_build.ImageBuildFailedError) as caught:
        image_build.is_complete(waiting, codebuild=codebuild[0])
    message = str(caught.value)
    assert BUILD_ID in message and "FAILED in phase BUILD" in message and "docker build" in message
    assert message.endswith(f"Build log: {LOG_LINK}")


def test_a_build_that_timed_out_is_a_failure_too(codebuild: tuple[Any, Stubber]) -> None:
    waiting = event("Update", PhysicalResourceId=IMAGE_URI, Data={"ImageUri": IMAGE_URI, "BuildId": BUILD_ID})
    codebuild[1].add_response("batch_get_builds", {"builds": [build("TIMED_OUT")]})
    with pytest.raises(image_build.ImageBuildFailedError, match=r"TIMED_OUT\. Build log: \(no log link"):
        image_build.is_complete(waiting, codebuild=codebuild[0])


@pytest.fixture
def s3() -> Iterator[tuple[Any, Stubber]]:
    yield from stubbed("s3")


OWNER = "123456789012"
PIN = {"ServiceToken": "x", "Bucket": "models-bucket", "Key": "model.tar.gz", "VersionId": "v2",
       "ExpectedBucketOwner": OWNER}
HEAD = {"Bucket": "models-bucket", "Key": "model.tar.gz", "ExpectedBucketOwner": OWNER}


def test_the_pin_check_passes_when_the_current_version_is_pinned(s3: tuple[Any, Stubber]) -> None:
    s3[1].add_response("head_object", {"VersionId": "v2"}, expected_params=HEAD)
    result = artifact_pin.on_event({"RequestType": "Create", "ResourceProperties": PIN}, s3=s3[0])
    assert result["PhysicalResourceId"] == "s3://models-bucket/model.tar.gz?versionId=v2"


def test_the_pin_check_fails_when_the_object_moved_on(s3: tuple[Any, Stubber]) -> None:
    s3[1].add_response("head_object", {"VersionId": "v3"}, expected_params=HEAD)
    with pytest.raises(artifact_pin.ArtifactMovedError, match="current version is v3, but the configuration pins v2"):
        artifact_pin.on_event({"RequestType": "Update", "ResourceProperties": PIN}, s3=s3[0])
    deleting = {"RequestType": "Delete", "ResourceProperties": PIN, "PhysicalResourceId": "p"}
    assert artifact_pin.on_event(deleting, s3=s3[0]) == {"PhysicalResourceId": "p"}


def test_a_bucket_of_another_owner_is_refused_with_the_config_key_to_change(s3: tuple[Any, Stubber]) -> None:
    """S3 answers 403 to a HeadObject whose ExpectedBucketOwner is not the bucket's owner."""
    s3[1].add_client_error("head_object", service_error_code="403", http_status_code=403, expected_params=HEAD)
    with pytest.raises(artifact_pin.ForeignBucketError,
                       match=r"s3://models-bucket/model\.tar\.gz: S3 refused to read it for bucket owner "
                             r"123456789012: .* set model\.bucket_owner"):
        artifact_pin.on_event({"RequestType": "Create", "ResourceProperties": PIN}, s3=s3[0])


def test_a_content_pinned_object_is_checked_for_its_owner_only(s3: tuple[Any, Stubber]) -> None:
    by_content = {**PIN, "VersionId": ""}
    s3[1].add_response("head_object", {}, expected_params=HEAD)
    result = artifact_pin.on_event({"RequestType": "Create", "ResourceProperties": by_content}, s3=s3[0])
    assert result["PhysicalResourceId"] == "s3://models-bucket/model.tar.gz"
