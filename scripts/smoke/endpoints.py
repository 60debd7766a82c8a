"""Invoke the chat or the decision endpoint once, as a user's boto3 code does, and check what comes back.

Against AWS the endpoint comes from the stack's outputs (or `--endpoint`) and must be InService on the endpoint
config the stack expects (common/discovery.py); locally it is the gateway's. `systemone` goes to the API instead
(smoke/systemone.py).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from semif_decision_client import DecisionClient, DecisionError, DecisionRequest, as_boto3_session, runtime_client

from ..common.discovery import (
    Target,
    aws_session,
    deployed_target,
    gateway_url,
    local_session,
    local_target,
    stack_name,
    wait_in_service,
)
from ..common.polling import Poller
from .answers import SmokeFailure, chat_content, stream_text

PAYLOADS = Path(__file__).resolve().parents[1] / "payloads"
PREVIEW_CHARS = 120


def _client_error(endpoint: str, error: ClientError) -> SmokeFailure:
    response = error.response
    code = response.get("Error", {}).get("Code", "error")
    if code == "ModelError":
        original = str(response.get("OriginalMessage", ""))[:300]
        return SmokeFailure(f"endpoint {endpoint}: the container answered "
                            f"{response.get('OriginalStatusCode')}: {original}")
    return SmokeFailure(f"endpoint {endpoint}: {code}: {response.get('Error', {}).get('Message', error)}")


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


def resolve_target(args: argparse.Namespace, session: Any, poller: Poller) -> Target:
    """The endpoint to test: the gateway's name, an explicit name, or the stack's outputs (then checked on AWS)."""
    if args.local:
        return local_target(args.role, args.prefix, shared=args.shared)
    if args.endpoint:
        target = Target(args.endpoint, component=args.inference_component)
        wait_in_service(session.client("sagemaker"), target, poller)
        return target
    return deployed_target(session, args.role, stack_name(args.env, stack=args.stack, app=args.app), poller)


def smoke(args: argparse.Namespace, session: Any | None = None, poller: Poller | None = None) -> str:
    """Resolve, check and invoke; the report line, or SmokeFailure (DiscoveryError, StillWaiting: not found or
    not ready).

    `session`: a boto3 Session or the sagemaker SDK's (`as_boto3_session`); None builds one from the arguments.
    """
    session = as_boto3_session(session) if session is not None else None
    poller = poller or Poller(timeout_s=args.wait_timeout, interval_s=args.poll_interval)
    payload_file = args.payload or PAYLOADS / f"{args.role}.json"
    try:
        payload = json.loads(payload_file.read_text())
    except (OSError, ValueError) as error:
        raise SmokeFailure(f"payload {payload_file}: {error}") from error
    if args.role == "systemone":
        return smoke_systemone(args, payload, session, poller)
    if args.local:
        session = session or local_session(args.region)
        endpoint_url = args.endpoint_url or gateway_url(args.port)
    else:
        from_env = not (args.stack or args.endpoint)  # the environment's region only for the env's stack
        session = session or aws_session(args.region, args.env if from_env else None)
        endpoint_url = args.endpoint_url
    target = resolve_target(args, session, poller)
    runtime = runtime_client(session=session, endpoint_url=endpoint_url, max_attempts=3)
    if args.role == "chat":
        report = smoke_chat(runtime, target, payload, args.stream)
    else:
        report = smoke_decision(runtime, target, payload)
    return f"{target.label}: {report}"


def smoke_systemone(args: argparse.Namespace, payload: Mapping[str, Any], session: Any | None,
                    poller: Poller) -> str:
    """The System One API: its URL (an output of the stack), then the official SDK against it with a key."""
    from . import systemone

    key = systemone.api_key(args.key_env)
    if not (args.api_url or args.local):
        session = session or aws_session(args.region, args.env if not args.stack else None)
    url = systemone.resolve_url(args, session, poller)
    return f"{url}: {systemone.smoke_api(url, key, payload)}"
