"""A batch run: the input read (a file, or an s3:// object through a download), the lines OUTPUT lacks sent to a
real-time target or a Batch Transform job, and the answers appended to OUTPUT in input order.

One job per module of this package: `records` reads the input and tells each line's contract (a SemIf decision known
by its id, a System One request by its line number), `chunking` packs lines into requests under the body limit,
`targets` sends one request (the local gateway, a container, a real-time endpoint), `realtime` runs the requests with
client-side concurrency, `transform` runs a Batch Transform job, `join` matches answers to input lines,
`systemone_lines` says where a System One answer or error belongs, `resume` reads and appends the output file,
`progress` shows the bar and the summary, `sample` writes a sample input.
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from semif_decision_client import runtime_client

from ..common.discovery import (
    LOCAL_PORT,
    LOCAL_PREFIX,
    DiscoveryError,
    aws_session,
    gateway_url,
    local_session,
    stack_name,
    stack_outputs,
)
from ..common.polling import Poller, StillWaiting
from .chunking import DECISIONS_PER_REQUEST, REQUEST_BYTES
from .errors import BatchFailure, BatchRefused
from .progress import Progress, Recorder, Summary, say
from .realtime import Sizing, run_requests
from .records import InputFile, InputRecord, parse_input, read_input
from .resume import OrderedWriter, Previous, read_previous
from .s3_objects import S3Location, download
from .targets import ATTEMPTS, REQUEST_TIMEOUT_S, ContainerTarget, RuntimeTarget
from .transform import (
    INVOCATIONS_MAX_RETRIES,
    INVOCATIONS_TIMEOUT_S,
    JobPlan,
    attach_transform,
    job_name,
    run_transform,
)

# ---- the pieces ------------------------------------------------------------------------------------------

def make_session(args: argparse.Namespace) -> Any:
    if args.local:
        return local_session(args.region)
    try:
        return aws_session(args.region, args.env)
    except DiscoveryError as error:  # an environment cdk.json does not define: say so, not boto3's region message
        raise BatchRefused(str(error)) from None


def load_input(args: argparse.Namespace, session: Any, work: Path) -> tuple[InputFile, S3Location | None]:
    """The input records, and its S3 location when the input is an s3:// object (read through a download)."""
    if not args.input.startswith("s3://"):
        return read_input(Path(args.input)), None
    source = S3Location.parse(args.input)
    path = work / (source.name or "input.jsonl")
    download(session.client("s3"), source, path)
    return parse_input(path.read_bytes(), source.uri), source


def realtime_target(args: argparse.Namespace, session: Any) -> RuntimeTarget | ContainerTarget:
    attempts = args.attempts or ATTEMPTS
    timeout = args.request_timeout or REQUEST_TIMEOUT_S
    if args.endpoint_url:
        return ContainerTarget(args.endpoint_url, attempts=attempts, timeout_s=timeout)
    endpoint_url = gateway_url(args.port or LOCAL_PORT) if args.local else None
    client = runtime_client(session=session, endpoint_url=endpoint_url, max_attempts=attempts,
                            read_timeout_s=timeout)
    name = f"{args.prefix or LOCAL_PREFIX}-decision" if args.local else args.endpoint
    return RuntimeTarget(client, name)


def _instance_type(sagemaker: Any, outputs: dict[str, str]) -> str:
    config = outputs.get("DecisionEndpointConfigName")
    if not config:
        raise BatchRefused("pass --instance-type (the stack names no decision endpoint config to copy it from)")
    try:
        return sagemaker.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]["InstanceType"]
    except (ClientError, BotoCoreError, KeyError, IndexError) as error:
        raise BatchFailure(f"cannot read the instance type of endpoint config {config}: {error}; "
                           "pass --instance-type") from error


def job_plan(args: argparse.Namespace, session: Any, poller: Poller) -> tuple[JobPlan, str]:
    """The job's settings (flags first, then the stack's outputs, then the adapter's values), and a name prefix."""
    from semif_adapter.doors.http_app import EXECUTION_PARAMETERS  # loads llama.cpp's bindings: only when needed

    outputs: dict[str, str] = {}
    stack = stack_name(args.env, stack=args.stack, app=args.app) if (args.stack or args.env) else None
    if stack:
        try:
            outputs = stack_outputs(session.client("cloudformation"), stack, poller)
        except (DiscoveryError, StillWaiting) as error:
            raise BatchFailure(str(error)) from error
    model = args.model_name or outputs.get("DecisionModelName")
    output_uri = args.output_uri or outputs.get("BatchOutputUri")
    if not model:
        raise BatchRefused(f"stack {stack} has no output DecisionModelName: pass --model-name")
    if not output_uri:
        raise BatchRefused("the job needs an S3 location for its output: pass --output-uri, or configure the "
                           "stack's batch locations (output BatchOutputUri)")
    input_uri = args.input_uri or outputs.get("BatchInputUri")
    plan = JobPlan(
        model_name=model, output=S3Location.parse(output_uri),
        input_prefix=S3Location.parse(input_uri) if input_uri else None,
        instance_type=args.instance_type or _instance_type(session.client("sagemaker"), outputs),
        instance_count=args.instance_count or 1,
        max_payload_mb=args.max_payload_mb or int(EXECUTION_PARAMETERS["MaxPayloadInMB"]),
        max_concurrent_transforms=args.max_concurrent_transforms or int(
            EXECUTION_PARAMETERS["MaxConcurrentTransforms"]),
        invocations_timeout_s=args.invocations_timeout or INVOCATIONS_TIMEOUT_S,
        invocations_max_retries=(INVOCATIONS_MAX_RETRIES if args.invocations_retries is None
                                 else args.invocations_retries),
        output_kms_key=args.output_kms_key)
    return plan, stack or model


def run_job(args: argparse.Namespace, session: Any, poller: Poller, *, inputs: InputFile,
            source: S3Location | None, pending: list[InputRecord], previous: Previous, recorder: Recorder) -> None:
    if args.attach:
        recorder.settle(attach_transform(session.client, inputs, previous, name=args.attach, poller=poller))
        return
    plan, prefix = job_plan(args, session, poller)
    name = args.job_name or job_name(prefix, datetime.datetime.now(datetime.UTC))
    input_name = source.name if source is not None else Path(args.input).name
    recorder.settle(run_transform(session.client, inputs, pending, previous, plan, source=source,
                                  input_name=input_name, name=name, poller=poller, say=say))


# ---- the run ---------------------------------------------------------------------------------------------

def answer(args: argparse.Namespace, session: Any | None = None, poller: Poller | None = None,
           clock: Callable[[], float] = time.monotonic) -> Summary:
    """Answer what OUTPUT lacks; the summary, which says why when the run stopped early (BatchRefused: nothing
    was sent)."""
    session = session or make_session(args)
    poller = poller or Poller(timeout_s=args.wait_timeout, interval_s=args.poll_interval, progress=say)
    with tempfile.TemporaryDirectory(prefix="semif-batch-input-") as directory:
        inputs, source = load_input(args, session, Path(directory))
    previous = read_previous(args.output, inputs)
    pending = [record for record in inputs.records if not previous.finished(record.key)]
    pending = pending[:args.limit] if args.limit else pending
    summary = Summary.start(inputs, previous)
    if not pending and not args.attach:
        return summary
    try:
        writer = OrderedWriter(args.output, previous)
    except OSError as error:
        raise BatchRefused(f"{args.output}: {error.strerror or error}") from error
    started = clock()
    try:
        with writer:
            if args.transform:
                run_job(args, session, poller, inputs=inputs, source=source, pending=pending, previous=previous,
                        recorder=Recorder(writer, summary))
            else:
                sizing = Sizing(args.concurrency or 1, args.max_request_bytes or REQUEST_BYTES,
                                args.max_decisions or DECISIONS_PER_REQUEST)
                with Progress(sum(r.decisions for r in pending), enabled=not args.no_progress) as progress:
                    run_requests(pending, realtime_target(args, session), sizing, Recorder(writer, summary, progress))
    except BatchFailure as error:
        summary.stopped = f"FAILED: {error}"
    except KeyboardInterrupt:
        summary.stopped = "interrupted"
    finally:
        summary.elapsed_s = clock() - started
    return summary


