"""The System One API as AWS serves it, on the local gateway (`semif local --api-keys FILE`): the same front code.

With a keys file (the container's format, `KEY_ID sha256:HEX` per line: `python -m semif_adapter.doors.api_keys create
NAME`), the gateway's `POST /v1/systemone`, `POST /v1/decisions` and `GET /v1/models` are the front the CDK app deploys
in front of the decision endpoint, running `semif_decision_client.api_front` as the two Lambda functions do:
- `admit` with `semif_adapter.doors.api_keys.ApiKeys` (the authorizer's checker): no header 401, not `Bearer` 403, an
  unknown key 401, all `authentication_error` with API Gateway's messages;
- `forward` through a boto3 `sagemaker-runtime` client pointed at this gateway's own SageMaker API (the address the
  request came in on), so the call meets SageMaker's error shapes (ModelError, ValidationError, ...) as on AWS, with
  the same limits (body as sent, body decoded, answer size) and the same read timeout under the API's integration
  timeout (29 s by default, as on AWS; `--api-timeout`).
Every request leaves one access-log line (JSON, the access log's fields: the key's id, never the key).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from semif_adapter.doors.api_keys import ApiKeys
from semif_adapter.doors.strict_json import load_json
from semif_adapter.settings import MAX_BODY_BYTES, SEMIF_PREFIX
from semif_decision_client import runtime_client
from semif_decision_client.api_front import (
    DEFAULT_TIMEOUT_S,
    REFUSALS,
    Admission,
    Limits,
    admit,
    forward,
    read_timeout_s,
    refusal,
)
from semif_decision_client.invoke_wire import Answer, Call, Target

from ..common.discovery import local_session
from .decision_routes import DecisionDoor, error


def _target(door: DecisionDoor) -> Target | None:
    """The door's endpoint (and inference component, `endpoint/component`) as InvokeEndpoint names them."""
    if door.label is None:
        return None
    endpoint, _, component = door.label.partition("/")
    return Target(endpoint, component or None)


class LocalFront:
    """The front on the gateway; keys are re-read when their file changes (they rotate without a restart)."""

    def __init__(self, keys_file: Path, door: DecisionDoor, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """`timeout_s`: the API's integration timeout (`https_api.integration_timeout_s`)."""
        self.keys = ApiKeys(str(keys_file))
        self.door, self.target = door, _target(door)
        decoded = os.environ.get(f"{SEMIF_PREFIX}MAX_BODY_BYTES", "")  # what the local container is given
        self.limits = Limits(max_decoded_bytes=int(decoded) if decoded.isdigit() else MAX_BODY_BYTES)
        self.read_timeout_s = read_timeout_s(timeout_s)
        self._clients: dict[str, Any] = {}

    def _client(self, request: Request) -> Any:
        """A runtime client for this gateway's own SageMaker API, at the address the request came in on."""
        host, port = request.scope["server"]
        url = f"http://{host}:{port}"
        if url not in self._clients:
            session = local_session()
            self._clients[url] = runtime_client(session=session, endpoint_url=url, max_attempts=1,
                                                read_timeout_s=self.read_timeout_s)
        return self._clients[url]

    async def answer(self, request: Request) -> Response:
        started = time.monotonic()
        request_id = str(uuid.uuid4())
        admission, key_id = admit(request.headers.get("authorization"), self.keys.check)
        answer: Answer | Response
        refused = ""
        if admission is not Admission.ALLOWED:
            answer = refusal(admission)
            refused = REFUSALS[admission][1]
        elif self.target is None:
            answer = error(404, "not_found_error", f"{request.method} {request.url.path}: {self.door.reason}",
                           path=request.url.path)
        else:
            call = Call(request.method, request.url.path, {k.lower(): v for k, v in request.headers.items()},
                        await request.body())
            answer = await anyio.to_thread.run_sync(
                lambda: forward(self._client(request), self.target, call, request_id=request_id, limits=self.limits,
                                timeout_s=self.read_timeout_s, parse=load_json))
        response = answer if isinstance(answer, Response) else Response(answer[2], status_code=answer[0],
                                                                         headers=answer[1])
        _access_log(request, response, request_id=request_id, key_id=key_id, started=started, refused=refused)
        return response


def _access_log(request: Request, response: Response, *, request_id: str, key_id: str | None, started: float,
                refused: str) -> None:
    """One JSON line per request, the fields of the API's access log (`api_front.ACCESS_LOG_FIELDS`); `error`
    is the front's own refusal (as API Gateway logs its own errors, not the decision endpoint's answers)."""
    line = {"requestId": request_id, "keyId": key_id or "-",
            "ip": request.client.host if request.client else "-", "method": request.method,
            "path": request.url.path, "status": response.status_code,
            "latencyMs": round((time.monotonic() - started) * 1000), "error": refused or "-"}
    print(f"gateway: access {json.dumps(line)}", file=sys.stdout, flush=True)
