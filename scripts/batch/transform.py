"""A Batch Transform job on the stack's decision model, and its output joined back to the input lines.

SageMaker splits the input object by line (`SplitType=Line`), packs lines into requests up to `MaxPayloadInMB`
(`BatchStrategy=MultiRecord`), posts them to the container as JSON Lines and writes the answers, a line each,
to `<input name>.out` (`AssembleWith=Line`). The adapter answers every line in its own contract (SemIf or System
One), a refused one with an error on its line, so the k-th output line belongs to the k-th input line; the join
checks each answer against its line (a SemIf answer's decision id, a System One answer's question ids).

The job reads only the lines still to answer: what OUTPUT already holds is not paid for twice. An `s3://`
input that is wholly pending is read in place; otherwise the pending lines are uploaded next to the job.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..common.polling import Poller, StillWaiting
from .chunking import line_bytes
from .errors import BatchFailure, BatchRefused
from .join import JoinError, Result, answer_lines, failed, join
from .records import InputFile, InputRecord, parse_input
from .resume import Previous
from .s3_objects import S3Location, download, find_output, upload
from .targets import MEDIA_TYPE

INVOCATIONS_TIMEOUT_S = 3600  # SageMaker's maximum; a request of MaxPayloadInMB lines, decided a few at a time
INVOCATIONS_MAX_RETRIES = 1  # SageMaker allows 0-3; a request of a thousand decisions is costly to repeat
RUNNING = frozenset({"InProgress", "Stopping"})
MEGABYTE = 1_000_000  # the smaller reading of MaxPayloadInMB's "MB", so a line that fits here fits there
NAME_CHARS = 63


@dataclass(frozen=True)
class JobPlan:
    """Everything CreateTransformJob needs besides the input."""

    model_name: str
    output: S3Location  # the job's output goes under output/<job name>/
    input_prefix: S3Location | None  # where pending lines are uploaded (under <job name>/)
    instance_type: str
    instance_count: int
    max_payload_mb: int
    max_concurrent_transforms: int
    invocations_timeout_s: int = INVOCATIONS_TIMEOUT_S
    invocations_max_retries: int = INVOCATIONS_MAX_RETRIES
    output_kms_key: str | None = None


def job_name(prefix: str, now: datetime.datetime) -> str:
    """`<prefix>-batch-<UTC time>`, within SageMaker's 63 characters of letters, digits and hyphens."""
    stamp = f"-batch-{now:%Y%m%d-%H%M%S}"
    cleaned = re.sub(r"[^A-Za-z0-9-]+", "-", prefix).strip("-") or "semif"
    return cleaned[:NAME_CHARS - len(stamp)].rstrip("-") + stamp


def job_request(plan: JobPlan, name: str, source: S3Location) -> dict[str, Any]:
    output: dict[str, Any] = {"S3OutputPath": plan.output.child(name).uri + "/", "Accept": MEDIA_TYPE,
                              "AssembleWith": "Line"}
    if plan.output_kms_key:
        output["KmsKeyId"] = plan.output_kms_key
    return {
        "TransformJobName": name,
        "ModelName": plan.model_name,
        "MaxConcurrentTransforms": plan.max_concurrent_transforms,
        "MaxPayloadInMB": plan.max_payload_mb,
        "BatchStrategy": "MultiRecord",
        "ModelClientConfig": {"InvocationsTimeoutInSeconds": plan.invocations_timeout_s,
                              "InvocationsMaxRetries": plan.invocations_max_retries},
        "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": source.uri}},
                           "ContentType": MEDIA_TYPE, "CompressionType": "None", "SplitType": "Line"},
        "TransformOutput": output,
        "TransformResources": {"InstanceType": plan.instance_type, "InstanceCount": plan.instance_count},
    }


@dataclass(frozen=True)
class Staged:
    """The job's input object and the records it holds, in order."""

    location: S3Location
    records: list[InputRecord]


def stage(s3: Any, inputs: InputFile, pending: Sequence[InputRecord], *, source: S3Location | None,
          plan: JobPlan, name: str, file_name: str, work: Path) -> Staged:
    """Use an s3:// input in place when the job is to read all of it as it is; otherwise upload `pending`."""
    if source is not None and len(pending) == len(inputs.records) and not inputs.blank_lines:
        return Staged(source, list(pending))
    if plan.input_prefix is None:
        raise BatchRefused("the job needs an S3 location to upload its input to: pass --input-uri, or configure "
                           "the stack's batch locations (output BatchInputUri)")
    path = work / file_name
    path.write_bytes(b"".join(record.raw + b"\n" for record in pending))
    location = plan.input_prefix.child(name, file_name)
    upload(s3, path, location)
    return Staged(location, list(pending))


def describe(sagemaker: Any, name: str) -> dict[str, Any]:
    try:
        return sagemaker.describe_transform_job(TransformJobName=name)
    except (ClientError, BotoCoreError) as error:
        detail = error.response["Error"].get("Message", "") if isinstance(error, ClientError) else str(error)
        raise BatchFailure(f"transform job {name}: {detail}") from error


def wait_for(sagemaker: Any, name: str, poller: Poller) -> dict[str, Any]:
    """The job once it has ended; BatchFailure unless it completed (the job keeps running on a timeout)."""
    found: dict[str, Any] = {}

    def ended() -> tuple[bool, str]:
        found["job"] = describe(sagemaker, name)
        status = found["job"]["TransformJobStatus"]
        return status not in RUNNING, status

    still_running = (f"it keeps running: collect it later with --attach {name}, or stop it with "
                     f"`aws sagemaker stop-transform-job --transform-job-name {name}`")
    try:
        poller.run(f"transform job {name}", ended)
    except StillWaiting as error:
        raise BatchFailure(f"{error}; {still_running}") from error
    except KeyboardInterrupt:
        raise BatchFailure(f"interrupted while transform job {name} runs; {still_running}") from None
    job = found["job"]
    if job["TransformJobStatus"] != "Completed":
        reason = job.get("FailureReason", "no failure reason given")
        raise BatchFailure(f"transform job {name} is {job['TransformJobStatus']}: {reason} (nothing was written; "
                           "SageMaker keeps no partial output)")
    return job


def collect(s3: Any, job: dict[str, Any], staged: Staged, work: Path) -> list[Result]:
    """Download the job's `.out` and join it to the records the job read."""
    output = find_output(s3, S3Location.parse(job["TransformOutput"]["S3OutputPath"]), staged.location.name)
    path = work / "output.jsonl.out"
    download(s3, output, path)
    try:
        return join(0, staged.records, answer_lines(path.read_bytes()))
    except JoinError as error:
        raise BatchFailure(f"the output {output.uri} does not match the job's input: {error}") from error


def attached(s3: Any, sagemaker: Any, name: str, inputs: InputFile, previous: Previous, *, work: Path) -> Staged:
    """The input of a job started earlier (by an interrupted run): its records must be lines of INPUT."""
    job = describe(sagemaker, name)
    location = S3Location.parse(job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"])
    path = work / (location.name or "input.jsonl")
    download(s3, location, path)
    records, strangers = inputs.locate(parse_input(path.read_bytes(), location.uri).records, previous.finished)
    if strangers:
        shown = ", ".join(f"{s.label} of the job's input" if s.numbered else s.label for s in strangers[:3])
        raise BatchRefused(f"transform job {name} read requests that the input does not hold ({shown}): is it "
                           "another input's job?")
    return Staged(location, records)


def _fresh(results: list[Result], previous: Previous) -> list[Result]:
    """The results OUTPUT does not hold yet, in input order, indexed for the writer."""
    fresh = sorted((r for r in results if not previous.finished(r.record.key)), key=lambda r: r.record.number)
    return [dataclasses.replace(result, index=index) for index, result in enumerate(fresh)]


def run_transform(clients: Callable[[str], Any], inputs: InputFile, pending: Sequence[InputRecord],
                  previous: Previous, plan: JobPlan, *, source: S3Location | None, input_name: str, name: str,
                  poller: Poller, say: Callable[[str], None]) -> list[Result]:
    """Start a job on the pending lines, wait for it, and return their results in input order."""
    s3, sagemaker = clients("s3"), clients("sagemaker")
    limit = plan.max_payload_mb * MEGABYTE
    oversized = [record for record in pending if line_bytes(record) > limit]
    sendable = [record for record in pending if line_bytes(record) <= limit]
    results = [failed(0, record, "body_too_large", f"the line is {line_bytes(record)} bytes, over the job's "
                      f"MaxPayloadInMB of {plan.max_payload_mb}", "body") for record in oversized]
    if sendable:
        with tempfile.TemporaryDirectory(prefix="semif-batch-") as directory:
            work = Path(directory)
            staged = stage(s3, inputs, sendable, source=None if oversized else source, plan=plan, name=name,
                           file_name=input_name, work=work)
            try:
                sagemaker.create_transform_job(**job_request(plan, name, staged.location))
            except (ClientError, BotoCoreError) as error:
                raise BatchFailure(f"cannot start transform job {name}: {error}") from error
            say(f"started transform job {name}: {len(sendable)} lines from {staged.location.uri} on "
                f"{plan.instance_count} x {plan.instance_type}")
            results += collect(s3, wait_for(sagemaker, name, poller), staged, work)
    return _fresh(results, previous)


def attach_transform(clients: Callable[[str], Any], inputs: InputFile, previous: Previous, *, name: str,
                     poller: Poller) -> list[Result]:
    """Wait for a job an earlier (interrupted) run started and return the results OUTPUT lacks."""
    s3, sagemaker = clients("s3"), clients("sagemaker")
    with tempfile.TemporaryDirectory(prefix="semif-batch-") as directory:
        work = Path(directory)
        staged = attached(s3, sagemaker, name, inputs, previous, work=work)
        return _fresh(collect(s3, wait_for(sagemaker, name, poller), staged, work), previous)
