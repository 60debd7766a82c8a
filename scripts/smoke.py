"""Smoke-test the chat or the decision endpoint with boto3 (or the System One API), against AWS or locally.

    python -m scripts.smoke chat [--stream] --env dev            # names from the stack's outputs
    python -m scripts.smoke decision --endpoint NAME             # a named endpoint
    python -m scripts.smoke chat --stream --local [PORT]         # the local gateway (default port 8080)
    python -m scripts.smoke decision --local --shared            # the gateway's shared endpoint (components)
    python -m scripts.smoke systemone --env api                  # the System One API, key in $TYPESAFE_API_KEY

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
`base_url` and a key (scripts/smoke_systemone.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from semif_decision_client import DecisionClient, DecisionError, DecisionRequest, as_boto3_session, runtime_client

from .usage import command_parser

PAYLOADS = Path(__file__).resolve().parent / "payloads"
CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"  # the checkout's; installed, the one in the cwd
APP = "semif"  # when cdk.json cannot say
LOCAL_PORT = 8080
LOCAL_PREFIX = "local"
LOCAL_REGION = "us-east-1"
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}  # never checked locally
# CloudFormation output keys of the stack (stacks/), by endpoint role: endpoint, its config, and (shared hosting
# only) the inference component that serves the role.
OUTPUT_KEYS = {
    "chat": ("ChatEndpointName", "ChatEndpointConfigName", "ChatInferenceComponentName"),
    "decision": ("DecisionEndpointName", "DecisionEndpointConfigName", "DecisionInferenceComponentName"),
}
ENDPOINT_WAITING = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
COMPONENT_WAITING = frozenset({"Creating", "Updating"})
WAIT_TIMEOUT_S = 900.0
POLL_INTERVAL_S = 15.0
SYSTEMONE = "systemone"  # the environment's System One API (scripts/smoke_systemone.py)
PREVIEW_CHARS = 120

Sleep = Callable[[float], None]
Progress = Callable[[str], None]


class SmokeFailure(Exception):  # noqa: N818 (a verdict, not a programming error)
    """The endpoint is not fit: the message is the one-line reason shown to the operator."""


@dataclass(frozen=True)
class Target:
    """The endpoint to smoke-test, what it must be running, and the inference component to invoke (shared)."""

    endpoint: str
    expected_config: str | None = None
    component: str | None = None

    @property
    def label(self) -> str:
        return f"{self.endpoint}/{self.component}" if self.component else self.endpoint

    @property
    def invoke_args(self) -> dict[str, str]:
        return {"InferenceComponentName": self.component} if self.component else {}


@dataclass(frozen=True)
class Poller:
    """Bounded polling: a timeout, an interval, and injectable time for tests."""

    timeout_s: float = WAIT_TIMEOUT_S
    interval_s: float = POLL_INTERVAL_S
    sleep: Sleep = time.sleep
    clock: Callable[[], float] = time.monotonic
    progress: Progress = print

    def run(self, what: str, step: Callable[[], tuple[bool, str]]) -> None:
        """Call `step` until it reports done; it returns (done, state shown in the progress line)."""
        start = self.clock()
        while True:
            done, state = step()
            if done:
                return
            waited = self.clock() - start
            if waited >= self.timeout_s:
                raise SmokeFailure(f"{what}: still {state} after {self.timeout_s:.0f} s")
            self.progress(f"waiting for {what}: {state} ({waited:.0f}/{self.timeout_s:.0f} s)")
            self.sleep(min(self.interval_s, self.timeout_s - waited))


# ---- which endpoint, and is it the deployed one ------------------------------------------------------------

def cdk_json_path() -> Path:
    """The checkout's cdk.json; installed (no checkout around us), the one of the project in the cwd."""
    return CDK_JSON if CDK_JSON.is_file() else Path.cwd() / "cdk.json"


def _semif_context(cdk_json: Path) -> dict[str, Any]:
    return json.loads(cdk_json.read_text())["context"]["semif"]


def deployment_defaults(env_name: str, cdk_json: Path | None = None) -> tuple[str, str | None]:
    """App name and region of an environment, from the cdk.json the stack was deployed from.

    Read as plain JSON: importing the CDK app (and its Node runtime) to learn two strings is not worth it.
    """
    try:
        context = _semif_context(cdk_json or cdk_json_path())
        region = context.get("environments", {}).get(env_name, {}).get("region")
        return str(context.get("app_name") or APP), region
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return APP, None


def environment_region(env_name: str, cdk_json: Path | None = None) -> str | None:
    """The region of `--env NAME` from cdk.json; None (boto3's configured region) without a readable cdk.json.

    An environment cdk.json does not define is refused here, naming it and the ones it does define: otherwise
    boto3 would only say "You must specify a region." about a stack that cannot exist.
    """
    path = cdk_json or cdk_json_path()
    try:
        environments = _semif_context(path)["environments"]
        known = sorted(environments)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if env_name not in environments:
        raise SmokeFailure(f"environment {env_name!r} is not defined in {path} (environments: {', '.join(known)}); "
                           "pick one with --env, or name the endpoint with --endpoint and --region")
    return deployment_defaults(env_name, path)[1]


def stack_outputs(cloudformation: Any, stack: str, poller: Poller) -> dict[str, str]:
    """The stack's outputs once no update is in progress (outputs change when it completes)."""
    found: dict[str, Any] = {}

    def settled() -> tuple[bool, str]:
        try:
            found["stack"] = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
        except ClientError as error:
            raise SmokeFailure(f"stack {stack}: {error.response['Error'].get('Message', error)}") from error
        status = found["stack"]["StackStatus"]
        return not status.endswith("_IN_PROGRESS"), status

    poller.run(f"stack {stack}", settled)
    status = found["stack"]["StackStatus"]
    if status.endswith("_FAILED") or status in {"ROLLBACK_COMPLETE", "DELETE_COMPLETE"}:
        raise SmokeFailure(f"stack {stack} is {status}: deploy it again before smoke-testing")
    if "ROLLBACK" in status:
        poller.progress(f"warning: stack {stack} is {status}: the last deployment failed and was "
                        "rolled back; testing the previous version")
    return {o["OutputKey"]: o["OutputValue"] for o in found["stack"].get("Outputs", [])}


def target_from_outputs(outputs: Mapping[str, str], role: str, stack: str) -> Target:
    name_key, config_key, component_key = OUTPUT_KEYS[role]
    if name_key not in outputs:
        raise SmokeFailure(f"stack {stack} has no output {name_key} (outputs: {', '.join(sorted(outputs))})")
    return Target(outputs[name_key], outputs.get(config_key), outputs.get(component_key))


def wait_in_service(sagemaker: Any, target: Target, poller: Poller) -> dict[str, Any]:
    """Wait until the endpoint is InService; then check it runs the expected endpoint config."""
    found: dict[str, Any] = {}

    def in_service() -> tuple[bool, str]:
        try:
            found["endpoint"] = sagemaker.describe_endpoint(EndpointName=target.endpoint)
        except ClientError as error:
            message = error.response["Error"].get("Message", error)
            raise SmokeFailure(f"endpoint {target.endpoint}: {message}") from error
        status = found["endpoint"]["EndpointStatus"]
        if status != "InService" and status not in ENDPOINT_WAITING:
            reason = found["endpoint"].get("FailureReason", "no failure reason given")
            raise SmokeFailure(f"endpoint {target.endpoint} is {status}: {reason}")
        return status == "InService", status

    poller.run(f"endpoint {target.endpoint}", in_service)
    running = found["endpoint"]["EndpointConfigName"]
    if target.expected_config and running != target.expected_config:
        raise SmokeFailure(
            f"endpoint {target.endpoint} is InService on endpoint config {running}, but the stack expects "
            f"{target.expected_config}: the last update did not take (SageMaker rolled it back); see the "
            "endpoint's events and the stack's")
    if target.component:
        wait_component_in_service(sagemaker, target, poller)
    return found["endpoint"]


def wait_component_in_service(sagemaker: Any, target: Target, poller: Poller) -> None:
    """Wait until the inference component is InService on the endpoint (it deploys after the endpoint does)."""

    def in_service() -> tuple[bool, str]:
        try:
            found = sagemaker.describe_inference_component(InferenceComponentName=target.component)
        except ClientError as error:
            message = error.response["Error"].get("Message", error)
            raise SmokeFailure(f"inference component {target.component}: {message}") from error
        status = found["InferenceComponentStatus"]
        if found.get("EndpointName") != target.endpoint:
            raise SmokeFailure(f"inference component {target.component} runs on endpoint "
                               f"{found.get('EndpointName')}, not {target.endpoint}")
        if status != "InService" and status not in COMPONENT_WAITING:
            reason = found.get("FailureReason", "no failure reason given")
            raise SmokeFailure(f"inference component {target.component} is {status}: {reason}")
        return status == "InService", status

    poller.run(f"inference component {target.component}", in_service)


# ---- invoking and checking -----------------------------------------------------------------------------

def _client_error(endpoint: str, error: ClientError) -> SmokeFailure:
    response = error.response
    code = response.get("Error", {}).get("Code", "error")
    if code == "ModelError":
        original = str(response.get("OriginalMessage", ""))[:300]
        return SmokeFailure(f"endpoint {endpoint}: the container answered "
                            f"{response.get('OriginalStatusCode')}: {original}")
    return SmokeFailure(f"endpoint {endpoint}: {code}: {response.get('Error', {}).get('Message', error)}")


def chat_content(body: bytes) -> str:
    """`choices[0].message.content` of a chat completion; SmokeFailure if absent or empty."""
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise SmokeFailure(f"the answer is not a chat completion ({error!r}): {body[:200]!r}") from error
    if not isinstance(content, str) or not content.strip():
        raise SmokeFailure(f"choices[0].message.content is empty: {body[:200]!r}")
    return content


class SseText:
    """Reassembles the text of a streamed chat completion from byte parts cut anywhere.

    The DLC streams llama-server's server-sent events (`data: {...}` lines);
    SageMaker cuts them into PayloadParts wherever it likes, so lines are rebuilt
    across parts before parsing.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.pieces: list[str] = []
        self.done = False  # saw `data: [DONE]`
        self.finish_reason: str | None = None

    def feed(self, part: bytes) -> None:
        self._buffer += part
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return  # blank separators, comments, other SSE fields
        data = line[len(b"data:"):].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            choice = json.loads(data)["choices"][0]
        except (ValueError, KeyError, IndexError) as error:
            raise SmokeFailure(f"a stream event is not a chat completion chunk: {data[:200]!r}") from error
        self.pieces.append(choice.get("delta", {}).get("content") or "")
        self.finish_reason = choice.get("finish_reason") or self.finish_reason

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def stream_text(parts: Iterable[bytes]) -> SseText:
    sse = SseText()
    for part in parts:
        sse.feed(part)
    sse.feed(b"\n")  # flush a last line without its newline
    return sse


def smoke_chat(runtime: Any, target: Target, payload: Mapping[str, Any], stream: bool) -> str:
    """Invoke the chat endpoint once and check the answer; returns the report line."""
    body = dict(payload)
    endpoint = target.label
    started = time.monotonic()
    try:
        if not stream:
            body.pop("stream", None)
            response = runtime.invoke_endpoint(EndpointName=target.endpoint, ContentType="application/json",
                                               Body=json.dumps(body).encode(), **target.invoke_args)
            content = chat_content(response["Body"].read())
            return f"answered in {time.monotonic() - started:.2f} s: {content[:PREVIEW_CHARS]!r}"
        body["stream"] = True
        response = runtime.invoke_endpoint_with_response_stream(
            EndpointName=target.endpoint, ContentType="application/json", Body=json.dumps(body).encode(),
            **target.invoke_args)
        arrivals: list[float] = []

        def parts() -> Iterable[bytes]:
            for event in response["Body"]:
                if "PayloadPart" in event:
                    arrivals.append(time.monotonic() - started)
                    yield event["PayloadPart"]["Bytes"]

        sse = stream_text(parts())
    except ClientError as error:
        raise _client_error(endpoint, error) from error
    except BotoCoreError as error:
        raise SmokeFailure(f"endpoint {endpoint}: {error}") from error
    if not sse.text.strip():
        raise SmokeFailure(f"endpoint {endpoint}: the stream ({len(arrivals)} parts) carried no text")
    if not (sse.done or sse.finish_reason):
        raise SmokeFailure(f"endpoint {endpoint}: the stream ended without a finish_reason or [DONE]")
    return (f"streamed {len(arrivals)} parts, first after {arrivals[0]:.2f} s, "
            f"all in {time.monotonic() - started:.2f} s: {sse.text[:PREVIEW_CHARS]!r}")


def smoke_decision(runtime: Any, target: Target, payload: Mapping[str, Any]) -> str:
    """Invoke the decision endpoint once: option ids must match the request, probabilities sum to 1."""
    request = DecisionRequest.from_payload(payload)
    started = time.monotonic()
    try:
        decision = DecisionClient(target.endpoint, client=runtime,
                                  inference_component_name=target.component).decide(request)
    except DecisionError as error:
        raise SmokeFailure(f"endpoint {target.label}: {error}") from error
    probabilities = ", ".join(f"{i}={decision.probabilities[i]:.3f}" for i in decision.option_ids)
    return (f"decided in {time.monotonic() - started:.2f} s: best {decision.best!r} "
            f"(margin {decision.margin:.3f}; {probabilities})")


# ---- command line ----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser(__doc__, "smoke")
    parser.add_argument("role", choices=[*sorted(OUTPUT_KEYS), SYSTEMONE],
                        help="which endpoint to test (systemone: the environment's System One API)")
    where = parser.add_argument_group("which endpoint")
    where.add_argument("--stack", help="CloudFormation stack holding the endpoint names (default: APP-ENV)")
    where.add_argument("--app", help="application name of the stack (default: cdk.json's app_name)")
    where.add_argument("--env", default="dev", help="environment of the stack (default %(default)s)")
    where.add_argument("--endpoint", help="endpoint name (skips the stack; no endpoint config check)")
    where.add_argument("--inference-component", metavar="NAME",
                       help="with --endpoint: the inference component to invoke (shared hosting)")
    where.add_argument("--local", nargs="?", type=int, const=0, metavar="PORT",
                       help=f"the local gateway (local_endpoints.py) on 127.0.0.1:PORT (default port {LOCAL_PORT}, "
                            "or --port)")
    where.add_argument("--shared", action="store_true",
                       help="with --local: the gateway's shared endpoint PREFIX-models (local_endpoints.py --shared)")
    where.add_argument("--port", type=int, default=LOCAL_PORT, help="with --local: gateway port (default %(default)s)")
    where.add_argument("--prefix", default=LOCAL_PREFIX, help="with --local: endpoint name prefix")
    where.add_argument("--endpoint-url", help="SageMaker runtime URL (default: AWS's; --local: the gateway)")
    where.add_argument("--region", help="AWS region (default: with --env, its region in cdk.json; else configured)")
    api = parser.add_argument_group("systemone")
    api.add_argument("--api-url", help="the API's base URL (default: the stack's SystemOneApiUrl; --local: gateway)")
    api.add_argument("--key-env", default="TYPESAFE_API_KEY", metavar="VAR",
                     help="environment variable holding the API key (default %(default)s)")
    parser.add_argument("--payload", type=Path, help="request body (default: scripts/payloads/ROLE.json)")
    parser.add_argument("--stream", action="store_true", help="chat: invoke_endpoint_with_response_stream")
    parser.add_argument("--wait-timeout", type=float, default=WAIT_TIMEOUT_S, metavar="SECONDS")
    parser.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S, metavar="SECONDS")
    args = parser.parse_args(argv)
    if args.local:  # `--local PORT`
        args.port = args.local
    args.local = args.local is not None
    if args.stream and args.role != "chat":
        parser.error("--stream applies to the chat endpoint only")
    if args.local and (args.stack or args.endpoint):
        parser.error("--local uses the gateway's names (--prefix); drop --stack/--endpoint")
    if args.inference_component and not args.endpoint:
        parser.error("--inference-component goes with --endpoint (the stack's outputs name the component)")
    if args.shared and not args.local:
        parser.error("--shared goes with --local (against AWS the stack's outputs say whether it is shared)")
    if args.role == SYSTEMONE and (args.endpoint or args.inference_component):
        parser.error("systemone calls the API, not an endpoint: name it with --api-url (or --env)")
    if args.api_url and args.role != SYSTEMONE:
        parser.error("--api-url goes with systemone")
    return args


def resolve_target(args: argparse.Namespace, session: Any, poller: Poller) -> Target:
    """The endpoint to test: local name, explicit name, or the stack's outputs (then checked on AWS)."""
    if args.local:
        component = f"{args.prefix}-{args.role}"
        return Target(f"{args.prefix}-models", component=component) if args.shared else Target(component)
    if args.endpoint:
        target = Target(args.endpoint, component=args.inference_component)
    else:
        stack = args.stack or f"{args.app or deployment_defaults(args.env)[0]}-{args.env}"  # as stacks/ names it
        outputs = stack_outputs(session.client("cloudformation"), stack, poller)
        target = target_from_outputs(outputs, args.role, stack)
    wait_in_service(session.client("sagemaker"), target, poller)
    return target


def run(args: argparse.Namespace, session: Any | None = None, poller: Poller | None = None) -> str:
    """Resolve, check and invoke; the report line, or SmokeFailure.

    `session`: a boto3 Session or the sagemaker SDK's (`as_boto3_session`); None builds one from the arguments.
    """
    session = as_boto3_session(session) if session is not None else None
    poller = poller or Poller(timeout_s=args.wait_timeout, interval_s=args.poll_interval)
    payload_file = args.payload or PAYLOADS / f"{args.role}.json"
    try:
        payload = json.loads(payload_file.read_text())
    except (OSError, ValueError) as error:
        raise SmokeFailure(f"payload {payload_file}: {error}") from error
    if args.role == SYSTEMONE:
        return run_systemone(args, payload, session, poller)
    if args.local:
        session = session or boto3.Session(region_name=args.region or LOCAL_REGION, **LOCAL_CREDENTIALS)
        endpoint_url = args.endpoint_url or f"http://127.0.0.1:{args.port}"
    else:
        from_env = not (args.stack or args.endpoint)  # the environment's region only for the env's stack
        region = args.region or (environment_region(args.env) if from_env else None)
        session = session or boto3.Session(region_name=region)
        endpoint_url = args.endpoint_url
    target = resolve_target(args, session, poller)
    runtime = runtime_client(session=session, endpoint_url=endpoint_url, max_attempts=3)
    if args.role == "chat":
        report = smoke_chat(runtime, target, payload, args.stream)
    else:
        report = smoke_decision(runtime, target, payload)
    return f"{target.label}: {report}"


def run_systemone(args: argparse.Namespace, payload: Mapping[str, Any], session: Any | None, poller: Poller) -> str:
    """The System One API: its URL (an output of the stack), then the official SDK against it with a key."""
    from . import smoke_systemone

    key = smoke_systemone.api_key(args.key_env)
    if not (args.api_url or args.local):
        region = args.region or (environment_region(args.env) if not args.stack else None)
        session = session or boto3.Session(region_name=region)
    url = smoke_systemone.resolve_url(args, session, poller)
    return f"{url}: {smoke_systemone.smoke_api(url, key, payload)}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    label = f"smoke {args.role}" + (" --stream" if args.stream else "")
    try:
        report = run(args)
    except (SmokeFailure, BotoCoreError) as error:  # BotoCoreError: no credentials, no region, unreachable AWS
        print(f"{label}: FAILED: {error}", file=sys.stderr)
        return 1
    print(f"{label}: OK: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
