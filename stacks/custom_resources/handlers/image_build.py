"""Custom resource `Custom::DecisionImage`: build the decision image in CodeBuild and wait until it is in ECR.

Why a custom resource: the decision model must only be created once its image exists, and a failed build must
fail the deployment with a link to the build's log (instead of a model that can never start). The Provider
framework calls `on_event` once, then `is_complete` every query interval until it says done or the framework's
total timeout expires. The image tag is a content hash, so an image that is already in the (immutable-tag)
repository is never rebuilt, and Delete does nothing: images are kept for rollbacks and expire by the
repository's lifecycle rule.
"""

from __future__ import annotations

import logging
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

RUNNING = "IN_PROGRESS"
SUCCEEDED = "SUCCEEDED"


class ImageBuildFailedError(RuntimeError):
    """The build ended without pushing the image; the message carries the build's log link."""


def _image_uri(props: dict[str, Any]) -> str:
    return f"{props['RepositoryUri']}:{props['ImageTag']}"


def image_exists(ecr: Any, repository: str, tag: str) -> bool:
    try:
        ecr.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}])
    except ecr.exceptions.ImageNotFoundException:
        return False
    return True


def on_event(event: dict[str, Any], context: Any = None, *, codebuild: Any = None,
             ecr: Any = None) -> dict[str, Any]:
    """Create/Update: start the build unless the image is already there. Delete: nothing."""
    request = event["RequestType"]
    if request == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    props = event["ResourceProperties"]
    image_uri = _image_uri(props)
    ecr = ecr or boto3.client("ecr")
    if image_exists(ecr, props["RepositoryName"], props["ImageTag"]):
        LOG.info("%s: %s is already in ECR, no build", request, image_uri)
        return {"PhysicalResourceId": image_uri, "Data": {"ImageUri": image_uri, "BuildId": ""}}
    codebuild = codebuild or boto3.client("codebuild")
    build = codebuild.start_build(
        projectName=props["ProjectName"],
        environmentVariablesOverride=[
            {"name": "IMAGE_TAG", "value": props["ImageTag"], "type": "PLAINTEXT"},
            {"name": "BASE_IMAGE", "value": props["BaseImage"], "type": "PLAINTEXT"},
            {"name": "DOCKER_BUILD_ARGS_JSON", "value": props.get("BuildArgs", "{}"), "type": "PLAINTEXT"},
        ],
    )["build"]
    LOG.info("%s: started build %s for %s", request, build["id"], image_uri)
    return {"PhysicalResourceId": image_uri, "Data": {"ImageUri": image_uri, "BuildId": build["id"]}}


def is_complete(event: dict[str, Any], context: Any = None, *, codebuild: Any = None) -> dict[str, Any]:
    """Done when the build succeeded (or none was needed); raise with the log link when it failed."""
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    build_id = event.get("Data", {}).get("BuildId", "")
    if not build_id:
        return {"IsComplete": True}
    codebuild = codebuild or boto3.client("codebuild")
    builds = codebuild.batch_get_builds(ids=[build_id]).get("builds", [])
    if not builds:
        raise ImageBuildFailedError(f"build {build_id} disappeared from CodeBuild")
    build = builds[0]
    status = build["buildStatus"]
    if status == RUNNING:
        LOG.info("build %s still running (phase %s)", build_id, build.get("currentPhase"))
        return {"IsComplete": False}
    if status == SUCCEEDED:
        return {"IsComplete": True}
    raise ImageBuildFailedError(describe_failure(build))


def describe_failure(build: dict[str, Any]) -> str:
    """One line for the CloudFormation event: status, failing phase and its message, and the log link."""
    failed = [p for p in build.get("phases", []) if p.get("phaseStatus") not in (None, SUCCEEDED)]
    detail = ""
    if failed:
        phase = failed[0]
        messages = "; ".join(c.get("message", "") for c in phase.get("contexts", []) if c.get("message"))
        detail = f" in phase {phase.get('phaseType')}" + (f": {messages}" if messages else "")
    link = build.get("logs", {}).get("deepLink") or "(no log link: see the CodeBuild console)"
    return f"decision image build {build['id']} {build['buildStatus']}{detail}. Build log: {link}"
