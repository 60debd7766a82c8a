"""Custom resource `Custom::ModelArtifactPin`: refuse to deploy an existing S3 model that is not the configured one.

Two checks before the models are created, because SageMaker itself checks neither:
- the bucket belongs to the expected account (`ExpectedBucketOwner`: the deploying account unless the config
  names another), so a bucket name that now belongs to someone else is never loaded;
- with a version pin, the object's current version is the pinned one (SageMaker's ModelDataUrl has no version:
  it always loads the current one).
Delete does nothing.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

DENIED = frozenset({"403", "AccessDenied", "Forbidden"})


class ArtifactMovedError(RuntimeError):
    """The object's current version is not the pinned one."""


class ForeignBucketError(RuntimeError):
    """The bucket is not owned by the expected account (or the object cannot be read)."""


def on_event(event: dict[str, Any], context: Any = None, *, s3: Any = None) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    props = event["ResourceProperties"]
    bucket, key, owner = props["Bucket"], props["Key"], props["ExpectedBucketOwner"]
    pinned = props.get("VersionId") or None
    s3 = s3 or boto3.client("s3")
    try:
        current = s3.head_object(Bucket=bucket, Key=key, ExpectedBucketOwner=owner).get("VersionId")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in DENIED:
            raise ForeignBucketError(
                f"s3://{bucket}/{key}: S3 refused to read it for bucket owner {owner}: the bucket belongs to "
                "another account, or the object is not readable. If the model is meant to come from another "
                "account's bucket, set model.bucket_owner to that account's id") from None
        raise
    if pinned is not None and current != pinned:
        raise ArtifactMovedError(
            f"s3://{bucket}/{key}: current version is {current or 'none (bucket not versioned)'}, but the "
            f"configuration pins {pinned}; SageMaker would load the current one. Pin the new version or restore "
            "the old one as current."
        )
    version = f"?versionId={pinned}" if pinned else ""
    return {"PhysicalResourceId": f"s3://{bucket}/{key}{version}", "Data": {"VersionId": pinned or ""}}
