"""S3 locations of a transform job: parsing `s3://` URIs, moving files, finding the job's `.out` object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .errors import BatchFailure, BatchRefused

SCHEME = "s3://"


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str  # an object's key, or a prefix (no leading slash)

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        if not uri.startswith(SCHEME) or not uri[len(SCHEME):].split("/", 1)[0]:
            raise BatchRefused(f"{uri!r} is not an s3://bucket/key URI")
        bucket, _, key = uri[len(SCHEME):].partition("/")
        return cls(bucket, key)

    def child(self, *parts: str) -> S3Location:
        return S3Location(self.bucket, "/".join(p.strip("/") for p in (self.key, *parts) if p.strip("/")))

    @property
    def name(self) -> str:
        return self.key.rstrip("/").rsplit("/", 1)[-1]

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}"


def _failure(what: str, location: S3Location, error: Exception) -> BatchFailure:
    if isinstance(error, ClientError):
        detail = f"{error.response['Error'].get('Code')}: {error.response['Error'].get('Message', '')}".rstrip(": ")
    else:
        detail = str(error)
    return BatchFailure(f"{what} {location.uri}: {detail}")


def upload(s3: Any, path: Path, location: S3Location) -> None:
    try:
        s3.upload_file(str(path), location.bucket, location.key)
    except (ClientError, BotoCoreError) as error:
        raise _failure("cannot upload to", location, error) from error


def download(s3: Any, location: S3Location, path: Path) -> None:
    try:
        s3.download_file(location.bucket, location.key, str(path))
    except (ClientError, BotoCoreError) as error:
        raise _failure("cannot download", location, error) from error


def find_output(s3: Any, output: S3Location, input_name: str) -> S3Location:
    """The job's `<input name>.out` under its output path (SageMaker keeps the input's relative path)."""
    wanted = f"{input_name}.out"
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=output.bucket, Prefix=output.key.rstrip("/") + "/")
        keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
    except (ClientError, BotoCoreError) as error:
        raise _failure("cannot list", output, error) from error
    matches = [key for key in keys if key.rsplit("/", 1)[-1] == wanted]
    if len(matches) != 1:
        found = ", ".join(keys[:5]) or "nothing"
        raise BatchFailure(f"expected one {wanted} under {output.uri}, found {found}")
    return S3Location(output.bucket, matches[0])
