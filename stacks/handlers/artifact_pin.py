"""Custom resource `Custom::ModelArtifactPin`: refuse to deploy when a version-pinned S3 model has moved on.

SageMaker's ModelDataUrl has no version: it always loads the object's current version. A config pinned by
`version_id` therefore only means something if the deployment checks that the current version is the pinned
one, before the models are created. Delete does nothing.
"""

from __future__ import annotations

from typing import Any

import boto3


class ArtifactMovedError(RuntimeError):
    """The object's current version is not the pinned one."""


def on_event(event: dict[str, Any], context: Any = None, *, s3: Any = None) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    props = event["ResourceProperties"]
    bucket, key, pinned = props["Bucket"], props["Key"], props["VersionId"]
    s3 = s3 or boto3.client("s3")
    current = s3.head_object(Bucket=bucket, Key=key).get("VersionId")
    if current != pinned:
        raise ArtifactMovedError(
            f"s3://{bucket}/{key}: current version is {current or 'none (bucket not versioned)'}, but the "
            f"configuration pins {pinned}; SageMaker would load the current one. Pin the new version or restore "
            "the old one as current."
        )
    return {"PhysicalResourceId": f"s3://{bucket}/{key}?versionId={pinned}", "Data": {"VersionId": pinned}}
