"""The System One API's forwarding Lambda: API Gateway's proxy event in, `api_front.forward`, a proxy answer out,
for every route (System One's, OpenAI's Decisions API, the models list).

Configured by its environment (set by stacks/https_api.py, no secret in it): the decision endpoint, its inference
component on a shared endpoint, the decoded-body limit (the container's own) and the read timeout (under the
integration timeout, so that a slow decision is the front's System One 504, not API Gateway's). Bodies are parsed with
the container's own strict parser (`semif_adapter.doors.strict_json`), so the front reads a body as the container
does. The runtime client is made on first use, once per execution environment, and makes one attempt: the SDK's
retries are the one retry loop.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from semif_adapter.doors.strict_json import load_json
from semif_decision_client import runtime_client
from semif_decision_client.api_front import Limits, forward
from semif_decision_client.invoke_wire import CONTENT_TYPE, Answer, Call, Target, error_document

ENDPOINT_ENV, COMPONENT_ENV = "SEMIF_ENDPOINT_NAME", "SEMIF_INFERENCE_COMPONENT_NAME"
MAX_DECODED_ENV, TIMEOUT_ENV = "SEMIF_MAX_BODY_BYTES", "SEMIF_READ_TIMEOUT_S"


@dataclass(frozen=True)
class Forwarder:
    """What one execution environment forwards to, and how."""

    client: Any
    target: Target
    limits: Limits
    timeout_s: float

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Forwarder:
        timeout_s = float(environ[TIMEOUT_ENV])
        return cls(runtime_client(max_attempts=1, read_timeout_s=timeout_s),
                   Target(environ[ENDPOINT_ENV], environ.get(COMPONENT_ENV) or None),
                   Limits(max_decoded_bytes=int(environ[MAX_DECODED_ENV])), timeout_s)

    def answer(self, event: Mapping[str, Any]) -> dict[str, Any]:
        request_id = event["requestContext"]["requestId"]
        try:
            call = call_from_event(event)
        except (binascii.Error, ValueError):
            answer: Answer = 400, {"content-type": CONTENT_TYPE}, error_document(
                400, "the body is not valid base64", path=str(event.get("resource", "")))
        else:
            answer = forward(self.client, self.target, call, request_id=request_id, limits=self.limits,
                             timeout_s=self.timeout_s, parse=load_json)
        if answer[0] >= 500:  # the access log has every request; the function's log says why a 5xx was one
            print(json.dumps({"requestId": request_id, "status": answer[0],
                              "sagemakerRequestId": answer[1].get("x-amzn-sagemaker-request-id")}))
        return proxy_response(answer)


def call_from_event(event: Mapping[str, Any]) -> Call:
    """The call in a REST API proxy event: the route (its resource, without the stage), headers, body as sent (the
    API treats every body as binary, so it arrives base64-encoded, bytes exactly as the client sent them)."""
    headers = {name.lower(): value for name, value in (event.get("headers") or {}).items()}
    body = event.get("body") or ""
    raw = base64.b64decode(body, validate=True) if event.get("isBase64Encoded") else body.encode()
    return Call(event["httpMethod"], event["resource"], headers, raw)


def proxy_response(answer: Answer) -> dict[str, Any]:
    """A proxy answer: the body as text where it is UTF-8 (every JSON answer), else base64."""
    status, headers, body = answer
    try:
        return {"statusCode": status, "headers": headers, "body": body.decode("utf-8"), "isBase64Encoded": False}
    except UnicodeDecodeError:
        return {"statusCode": status, "headers": headers, "body": base64.b64encode(body).decode(),
                "isBase64Encoded": True}


@functools.cache
def _forwarder() -> Forwarder:
    return Forwarder.from_environment(os.environ)


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return _forwarder().answer(event)
