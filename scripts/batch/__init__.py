"""Answer a JSON Lines file of decision requests through an endpoint or a Batch Transform job, resumably.

    semif batch INPUT.jsonl -o OUTPUT.jsonl --local [--port 8080]        # the local gateway
    semif batch INPUT.jsonl -o OUTPUT.jsonl --endpoint-url http://HOST:8080  # a container
    semif batch INPUT.jsonl -o OUTPUT.jsonl --endpoint NAME --concurrency 4  # a real-time endpoint
    semif batch INPUT.jsonl -o OUTPUT.jsonl --transform --env prod --instance-count 2
    semif batch s3://bucket/in.jsonl -o OUTPUT.jsonl --transform --model-name M --output-uri s3://...

Each INPUT line is one adapter request in any of its contracts: a SemIf decision (`{"decision": {"id": ...},
...}`, ids unique), a System One request (`{"state": ..., "questions": {...}}`) or an OpenAI Decisions request
(`{"model": ..., "input": ..., "questions": [...]}`); a file may mix them. OUTPUT gets one line per input line, in
input order: the adapter's answer byte for byte (a System One or OpenAI answer followed by `"x_line": N,
"x_request_sha256": ...`, since a request has no id), or the adapter's error for a line it refused (`{"error": {...},
"line": N, "decision_id"}`; System One's `{"detail": ..., "line": N, "x_request_sha256"}`, OpenAI's `{"error":
{"message", "type", "param", "code"}, "line": N, "x_request_sha256"}`). A
rerun skips the lines OUTPUT already holds and appends the rest; lines that failed for the moment (busy, stopping,
unreachable) are not written, so a rerun asks them again. Exit status:
0 when every line is answered, 1 when some failed or the run stopped (one line on stderr says why), 2 for bad
usage or an input/output file that cannot be used.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from types import FrameType

from ..common.command import Subparsers, UsageError, add_command
from ..common.discovery import LOCAL_PORT, LOCAL_PREFIX
from .chunking import DECISIONS_PER_REQUEST, REQUEST_BYTES
from .progress import say
from .targets import ATTEMPTS, REQUEST_TIMEOUT_S
from .transform import INVOCATIONS_MAX_RETRIES, INVOCATIONS_TIMEOUT_S

WAIT_TIMEOUT_S = 24 * 3600.0
POLL_INTERVAL_S = 30.0
TRANSFORM_ONLY = ("env", "stack", "app", "model_name", "input_uri", "output_uri", "instance_type", "instance_count",
                  "max_payload_mb", "max_concurrent_transforms", "invocations_timeout", "invocations_retries",
                  "output_kms_key", "job_name", "attach")
REALTIME_ONLY = ("concurrency", "max_decisions", "max_request_bytes", "attempts", "request_timeout")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--local", action="store_true", help="the local gateway (semif local)")
    target.add_argument("--endpoint-url", metavar="URL", help="a decision container: POST URL/invocations")
    target.add_argument("--endpoint", metavar="NAME", help="a real-time SageMaker endpoint (boto3)")
    target.add_argument("--transform", action="store_true", help="a Batch Transform job on the decision model")
    local = parser.add_argument_group("--local")
    local.add_argument("--port", type=int, help=f"gateway port (default {LOCAL_PORT})")
    local.add_argument("--prefix", help=f"endpoint name prefix: PREFIX-decision (default {LOCAL_PREFIX})")
    realtime = parser.add_argument_group("real-time targets (--local, --endpoint-url, --endpoint)")
    realtime.add_argument("--concurrency", type=_positive, help="requests in flight (default 1)")
    realtime.add_argument("--max-decisions", type=_positive,
                          help=f"decisions per request: a SemIf line is one, a System One or OpenAI line one per "
                               f"question (default {DECISIONS_PER_REQUEST})")
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


def add_parser(subparsers: Subparsers) -> None:
    parser = add_command(subparsers, "batch", __doc__,
                         summary="answer a JSON Lines file through an endpoint or Batch Transform, resumably")
    parser.add_argument("input", metavar="INPUT", help="JSON Lines requests (a file; with --transform also s3://)")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="OUTPUT",
                        help="answers, a line per input line (appended to on a rerun)")
    parser.add_argument("--region", help="AWS region (default: with --env, its region in cdk.json; else configured)")
    parser.add_argument("--limit", type=_positive, metavar="N", help="ask at most N of the lines not yet answered")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _target_arguments(parser)
    _transform_arguments(parser)


def validate(args: argparse.Namespace) -> None:
    """Options that belong to another target, or an input that needs another one."""
    given = {name for name, value in vars(args).items() if value is not None}
    if args.transform:
        misplaced = [name for name in REALTIME_ONLY if name in given]
        if not (args.env or args.stack or args.model_name or args.attach):
            raise UsageError("--transform needs --env (or --stack) or --model-name, or --attach JOB")
        if args.attach and args.job_name:
            raise UsageError("--attach names the job; drop --job-name")
    else:
        misplaced = [name for name in TRANSFORM_ONLY if name in given]
        if args.input.startswith("s3://"):
            raise UsageError("an s3:// INPUT is read by a Batch Transform job: add --transform")
    if not args.local:
        misplaced += [name for name in ("port", "prefix") if name in given]
    if misplaced:
        raise UsageError(f"--{misplaced[0].replace('_', '-')} does not apply to this target")
    if not args.input.startswith("s3://") and Path(args.input).resolve() == args.output.resolve():
        raise UsageError("OUTPUT must not be INPUT")


def _stop_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from .errors import BatchFailure, BatchRefused
    from .runner import answer

    signal.signal(signal.SIGTERM, _stop_on_sigterm)  # as Ctrl-C: stop sending; what is written stays
    try:
        summary = answer(args)
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
