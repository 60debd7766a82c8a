"""Answer a JSON Lines file of decision requests through an endpoint or a Batch Transform job, resumably.

    python -m scripts.batch INPUT.jsonl -o OUTPUT.jsonl --local [--port 8080]        # the local gateway
    python -m scripts.batch INPUT.jsonl -o OUTPUT.jsonl --endpoint-url http://HOST:8080  # a container
    python -m scripts.batch INPUT.jsonl -o OUTPUT.jsonl --endpoint NAME --concurrency 4  # a real-time endpoint
    python -m scripts.batch INPUT.jsonl -o OUTPUT.jsonl --transform --env prod --instance-count 2
    python -m scripts.batch s3://bucket/in.jsonl -o OUTPUT.jsonl --transform --model-name M --output-uri s3://...

Each INPUT line is one adapter request in either of its contracts: a SemIf decision (`{"decision": {"id": ...},
...}`, ids unique) or a System One request (`{"state": ..., "questions": {...}}`); a file may mix them. OUTPUT gets
one line per input line, in input order: the adapter's answer byte for byte (a System One answer followed by
`"x_line": N, "x_request_sha256": ...`, since a request has no id), or the adapter's error for a line it refused
(`{"error": {...}, "line": N, "decision_id"}`; System One's `{"detail": ..., "line": N, "x_request_sha256"}`). A
rerun skips the lines OUTPUT already holds and appends the rest; lines that failed for the moment (busy, stopping,
unreachable) are not written, so a rerun asks them again. Exit status:
0 when every line is answered, 1 when some failed or the run stopped (one line on stderr says why), 2 for bad
usage or an input/output file that cannot be used.
"""

from __future__ import annotations

import argparse
import datetime
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from semif_decision_client import runtime_client

from .batching.chunking import DECISIONS_PER_REQUEST, REQUEST_BYTES
from .batching.errors import BatchFailure, BatchRefused
from .batching.progress import Progress, Recorder, Summary
from .batching.realtime import Sizing, run_requests
from .batching.records import InputFile, InputRecord, parse_input, read_input
from .batching.resume import OrderedWriter, Previous, read_previous
from .batching.s3_objects import S3Location, download
from .batching.targets import REQUEST_TIMEOUT_S, ContainerTarget, RuntimeTarget
from .batching.transform import (
    INVOCATIONS_MAX_RETRIES,
    INVOCATIONS_TIMEOUT_S,
    JobPlan,
    attach_transform,
    job_name,
    run_transform,
)
from .smoke import (
    LOCAL_CREDENTIALS,
    LOCAL_PORT,
    LOCAL_PREFIX,
    LOCAL_REGION,
    Poller,
    SmokeFailure,
    deployment_defaults,
    environment_region,
    stack_outputs,
)
from .usage import command_parser

WAIT_TIMEOUT_S = 24 * 3600.0
POLL_INTERVAL_S = 30.0
ATTEMPTS = 3
TRANSFORM_ONLY = ("env", "stack", "app", "model_name", "input_uri", "output_uri", "instance_type", "instance_count",
                  "max_payload_mb", "max_concurrent_transforms", "invocations_timeout", "invocations_retries",
                  "output_kms_key", "job_name", "attach")
REALTIME_ONLY = ("concurrency", "max_decisions", "max_request_bytes", "attempts", "request_timeout")


def say(message: str) -> None:
    print(f"batch: {message}", file=sys.stderr, flush=True)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--local", action="store_true", help="the local gateway (scripts/local_endpoints.py)")
    target.add_argument("--endpoint-url", metavar="URL", help="a decision container: POST URL/invocations")
    target.add_argument("--endpoint", metavar="NAME", help="a real-time SageMaker endpoint (boto3)")
    target.add_argument("--transform", action="store_true", help="a Batch Transform job on the decision model")
    local = parser.add_argument_group("--local")
    local.add_argument("--port", type=int, help=f"gateway port (default {LOCAL_PORT})")
    local.add_argument("--prefix", help=f"endpoint name prefix: PREFIX-decision (default {LOCAL_PREFIX})")
    realtime = parser.add_argument_group("real-time targets (--local, --endpoint-url, --endpoint)")
    realtime.add_argument("--concurrency", type=_positive, help="requests in flight (default 1)")
    realtime.add_argument("--max-decisions", type=_positive,
                          help=f"decisions per request: a SemIf line is one, a System One line one per question "
                               f"(default {DECISIONS_PER_REQUEST})")
    realtime.add_argument("--max-request-bytes", type=_positive,
                          help=f"request body limit (default {REQUEST_BYTES:,}, under SageMaker's 6 MB)")
    realtime.add_argument("--attempts", type=_positive,
                          help=f"tries per request, retries included (default {ATTEMPTS})")
    realtime.add_argument("--request-timeout", type=float, metavar="SECONDS",
                          help=f"wait for one answer (default {REQUEST_TIMEOUT_S:.0f})")


def _transform_arguments(parser: argparse.ArgumentParser) -> None:
    job = parser.add_argument_group("--transform")
    job.add_argument("--env", help="environment of the stack: its outputs name the model and the S3 locations")
    job.add_argument("--stack", help="CloudFormation stack (default: APP-ENV)")
    job.add_argument("--app", help="application name of the stack (default: cdk.json's app_name)")
    job.add_argument("--model-name", help="SageMaker model (default: the stack's DecisionModelName)")
    job.add_argument("--input-uri", help="s3:// prefix for the uploaded input (default: the stack's BatchInputUri)")
    job.add_argument("--output-uri", help="s3:// prefix for the job's output (default: the stack's BatchOutputUri)")
    job.add_argument("--instance-type", help="default: the decision endpoint's instance type")
    job.add_argument("--instance-count", type=_positive, help="instances (default 1)")
    job.add_argument("--max-payload-mb", type=_positive, help="MaxPayloadInMB (default: the adapter's)")
    job.add_argument("--max-concurrent-transforms", type=_positive,
                     help="MaxConcurrentTransforms per instance (default: the adapter's)")
    job.add_argument("--invocations-timeout", type=_positive, metavar="SECONDS",
                     help=f"ModelClientConfig.InvocationsTimeoutInSeconds (default {INVOCATIONS_TIMEOUT_S})")
    job.add_argument("--invocations-retries", type=int, choices=range(4), metavar="0-3",
                     help=f"ModelClientConfig.InvocationsMaxRetries (default {INVOCATIONS_MAX_RETRIES})")
    job.add_argument("--output-kms-key", help="KMS key for the job's output (default: the bucket's encryption)")
    job.add_argument("--job-name", help="default: STACK-batch-UTCTIME")
    job.add_argument("--attach", metavar="JOB", help="collect a job an earlier run started instead of starting one")
    job.add_argument("--wait-timeout", type=float, default=WAIT_TIMEOUT_S, metavar="SECONDS")
    job.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S, metavar="SECONDS")


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of options, if anything."""
    given = {name for name, value in vars(args).items() if value is not None}
    if args.transform:
        misplaced = [name for name in REALTIME_ONLY if name in given]
        if not (args.env or args.stack or args.model_name or args.attach):
            return "--transform needs --env (or --stack) or --model-name, or --attach JOB"
        if args.attach and args.job_name:
            return "--attach names the job; drop --job-name"
    else:
        misplaced = [name for name in TRANSFORM_ONLY if name in given]
        if args.input.startswith("s3://"):
            return "an s3:// INPUT is read by a Batch Transform job: add --transform"
    if not args.local:
        misplaced += [name for name in ("port", "prefix") if name in given]
    if misplaced:
        return f"--{misplaced[0].replace('_', '-')} does not apply to this target"
    if not args.input.startswith("s3://") and Path(args.input).resolve() == args.output.resolve():
        return "OUTPUT must not be INPUT"
    return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = command_parser(__doc__, "batch")
    parser.add_argument("input", metavar="INPUT", help="JSON Lines requests (a file; with --transform also s3://)")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="OUTPUT",
                        help="answers, a line per input line (appended to on a rerun)")
    parser.add_argument("--region", help="AWS region (default: with --env, its region in cdk.json; else configured)")
    parser.add_argument("--limit", type=_positive, metavar="N", help="ask at most N of the lines not yet answered")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _target_arguments(parser)
    _transform_arguments(parser)
    args = parser.parse_args(argv)
    problem = _usage_problem(args)
    if problem:
        parser.error(problem)
    return args


# ---- the pieces ------------------------------------------------------------------------------------------

def make_session(args: argparse.Namespace) -> Any:
    if args.local:
        return boto3.Session(region_name=args.region or LOCAL_REGION, **LOCAL_CREDENTIALS)
    try:
        region = args.region or (environment_region(args.env) if args.env else None)
    except SmokeFailure as error:  # an environment cdk.json does not define: say so, not boto3's region message
        raise BatchRefused(str(error)) from None
    return boto3.Session(region_name=region)


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
    endpoint_url = f"http://127.0.0.1:{args.port or LOCAL_PORT}" if args.local else None
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
    from semif_adapter.http_app import EXECUTION_PARAMETERS  # loads llama.cpp's bindings: only when needed

    outputs: dict[str, str] = {}
    stack = args.stack or (f"{args.app or deployment_defaults(args.env)[0]}-{args.env}" if args.env else None)
    if stack:
        try:
            outputs = stack_outputs(session.client("cloudformation"), stack, poller)
        except SmokeFailure as error:
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

def run(args: argparse.Namespace, session: Any | None = None, poller: Poller | None = None,
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


def _stop_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)  # as Ctrl-C: stop sending; what is written stays
    try:
        summary = run(args)
    except BatchRefused as error:
        say(f"refused: {error}")
        return 2
    except BatchFailure as error:  # before anything was sent: the input could not be read from S3
        say(f"FAILED: {error}")
        return 1
    except KeyboardInterrupt:
        say("interrupted before anything was sent")
        return 1
    for line in summary.report():
        print(f"batch: {line}", flush=True)
    if summary.stopped:
        say(f"{summary.stopped}; the lines answered so far are in {args.output}: run the same command to resume")
    return 0 if summary.complete and not summary.stopped else 1


if __name__ == "__main__":
    sys.exit(main())
