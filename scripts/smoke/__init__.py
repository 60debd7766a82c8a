"""Smoke-test the chat or the decision endpoint with boto3 (or the System One API), against AWS or locally.

    semif smoke chat [--stream] --env dev            # names from the stack's outputs
    semif smoke decision --endpoint NAME             # a named endpoint
    semif smoke chat --stream --local [PORT]         # the local gateway (default port 8080)
    semif smoke decision --local --shared            # the gateway's shared endpoint (components)
    semif smoke systemone --env api                  # the System One API, key in $TYPESAFE_API_KEY

Against AWS it first waits (bounded, with a progress line) until the stack is
settled and the endpoint is InService on the endpoint config the stack expects:
a failed update that SageMaker rolled back leaves the endpoint InService on the
old config, and a smoke test that passes there proves nothing. In shared hosting
(the stack outputs an inference component for the role) it also waits for the
component to be InService and invokes with `InferenceComponentName`. Then it invokes
(`invoke_endpoint`, or `invoke_endpoint_with_response_stream` for `--stream`),
checks the answer's shape, prints the latency, and exits 0. Any failure is one
line naming the endpoint and the reason, with exit status 1 (2 for bad usage).
`systemone` calls an environment's System One API through the official SDK with its
`base_url` and a key (smoke/systemone.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from botocore.exceptions import BotoCoreError

from ..common.command import Subparsers, UsageError, add_command
from ..common.discovery import LOCAL_PORT, LOCAL_PREFIX, OUTPUT_KEYS, DiscoveryError
from ..common.polling import POLL_INTERVAL_S, WAIT_TIMEOUT_S, StillWaiting

SYSTEMONE = "systemone"  # the environment's System One API (smoke/systemone.py)


class _LocalPort(argparse.Action):
    """`--local` alone, or `--local PORT` (the same as `--local --port PORT`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        namespace.local = True
        if values is not None:
            namespace.port = values


def add_parser(subparsers: Subparsers) -> None:
    parser = add_command(subparsers, "smoke", __doc__, summary="smoke-test the chat or decision endpoint, or the "
                                                               "System One API (AWS or --local)")
    parser.add_argument("role", choices=[*sorted(OUTPUT_KEYS), SYSTEMONE],
                        help="which endpoint to test (systemone: the environment's System One API)")
    where = parser.add_argument_group("which endpoint")
    where.add_argument("--stack", help="CloudFormation stack holding the endpoint names (default: APP-ENV)")
    where.add_argument("--app", help="application name of the stack (default: cdk.json's app_name)")
    where.add_argument("--env", default="dev", help="environment of the stack (default %(default)s)")
    where.add_argument("--endpoint", help="endpoint name (skips the stack; no endpoint config check)")
    where.add_argument("--inference-component", metavar="NAME",
                       help="with --endpoint: the inference component to invoke (shared hosting)")
    where.add_argument("--local", nargs="?", type=int, default=False, action=_LocalPort, metavar="PORT",
                       help=f"the local gateway (semif local) on 127.0.0.1:PORT (default port {LOCAL_PORT}, "
                            "or --port)")
    where.add_argument("--shared", action="store_true",
                       help="with --local: the gateway's shared endpoint PREFIX-models (semif local --shared)")
    where.add_argument("--port", type=int, default=LOCAL_PORT, help="with --local: gateway port (default %(default)s)")
    where.add_argument("--prefix", default=LOCAL_PREFIX, help="with --local: endpoint name prefix")
    where.add_argument("--endpoint-url", help="SageMaker runtime URL (default: AWS's; --local: the gateway)")
    where.add_argument("--region", help="AWS region (default: with --env, its region in cdk.json; else configured)")
    api = parser.add_argument_group("systemone")
    api.add_argument("--api-url", help="the API's base URL (default: the stack's SystemOneApiUrl; --local: gateway)")
    api.add_argument("--key-env", default="TYPESAFE_API_KEY", metavar="VAR",
                     help="environment variable holding the API key (default %(default)s)")
    parser.add_argument("--payload", type=Path, help="request body (default: the tools' payloads/ROLE.json)")
    parser.add_argument("--stream", action="store_true", help="chat: invoke_endpoint_with_response_stream")
    parser.add_argument("--wait-timeout", type=float, default=WAIT_TIMEOUT_S, metavar="SECONDS")
    parser.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S, metavar="SECONDS")


def validate(args: argparse.Namespace) -> None:
    if args.stream and args.role != "chat":
        raise UsageError("--stream applies to the chat endpoint only")
    if args.local and (args.stack or args.endpoint):
        raise UsageError("--local uses the gateway's names (--prefix); drop --stack/--endpoint")
    if args.inference_component and not args.endpoint:
        raise UsageError("--inference-component goes with --endpoint (the stack's outputs name the component)")
    if args.shared and not args.local:
        raise UsageError("--shared goes with --local (against AWS the stack's outputs say whether it is shared)")
    if args.role == SYSTEMONE and (args.endpoint or args.inference_component):
        raise UsageError("systemone calls the API, not an endpoint: name it with --api-url (or --env)")
    if args.api_url and args.role != SYSTEMONE:
        raise UsageError("--api-url goes with systemone")


def run(args: argparse.Namespace) -> int:
    from .answers import SmokeFailure
    from .endpoints import smoke

    label = f"smoke {args.role}" + (" --stream" if args.stream else "")
    try:
        report = smoke(args)
    except (SmokeFailure, DiscoveryError, StillWaiting, BotoCoreError) as error:  # BotoCoreError: no credentials
        print(f"{label}: FAILED: {error}", file=sys.stderr)  # or region, unreachable AWS
        return 1
    print(f"{label}: OK: {report}")
    return 0
