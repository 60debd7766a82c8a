"""System One's own routes on the gateway (`POST /v1/systemone`, `GET /v1/models`), for the local decision endpoint.

SageMaker routes only `/invocations`; locally there is no such limit, so the gateway also answers System One's paths
and the official SDK's `base_url` can point at it. They go to the decision container's own `/v1/systemone` and
`/v1/models`, unchanged: body, Content-Type, Content-Encoding and Authorization on the way in; status, headers
(Retry-After, x-typesafe-request-id) and body on the way out, so the container's System One error shapes and its
API-key checks reach the client as they are. Only what the container cannot answer (no decision endpoint behind
the gateway, the container down or silent) is answered here, in System One's error shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from starlette.requests import Request
from starlette.responses import Response

from .endpoints import names_decision_role
from .proxy import forwardable

SYSTEMONE_PATH, MODELS_PATH = "/v1/systemone", "/v1/models"
PASSED_HEADERS = ("content-type", "content-encoding", "authorization", "accept")
UNAVAILABLE_RETRY_AFTER_S = 1


@dataclass(frozen=True)
class DecisionDoor:
    """Where System One calls go: a container (`label`: endpoint, or endpoint/component), or why nowhere."""

    label: str | None
    url: str | None
    reason: str = ""


def decision_door(containers: Mapping[str, str], named: str | None = None) -> DecisionDoor:
    """The container that answers System One: the one `named` (an endpoint, or `endpoint/component`), else the one
    whose endpoint or component name is the decision role's (`{prefix}-decision`, as the local endpoints name it).

    Several decision-named containers and no `named`: none is picked, and the routes say so (a guess would send a
    client's questions to a model it did not choose).
    """
    if named is not None:
        if named not in containers:
            raise ValueError(f"decision endpoint {named!r} is not served by this gateway ({sorted(containers)})")
        return DecisionDoor(named, containers[named])
    found = [label for label in containers if names_decision_role(label.rsplit("/", 1)[-1])]
    if len(found) == 1:
        return DecisionDoor(found[0], containers[found[0]])
    if not found:
        return DecisionDoor(None, None, f"no decision endpoint is served here (endpoints: {sorted(containers)})")
    return DecisionDoor(None, None, f"several decision endpoints are served here ({sorted(found)}); start the "
                                    "gateway with the one System One should reach (create_gateway(..., decision=))")


def error(status: int, error_type: str, message: str, retry_after: int | None = None) -> Response:
    """System One's non-validation error shape, for what the gateway itself answers."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(json.dumps({"detail": {"error_type": error_type, "message": message}}), status_code=status,
                    media_type="application/json", headers=headers)


async def forward(client: httpx.AsyncClient, door: DecisionDoor, request: Request) -> Response:
    """The decision container's own answer to this System One call, byte for byte (or the gateway's error)."""
    if door.url is None:
        return error(404, "not_found_error", f"{request.method} {request.url.path}: {door.reason}")
    url = f"{door.url}{request.url.path}" + (f"?{request.url.query}" if request.url.query else "")
    headers = {name: request.headers[name] for name in PASSED_HEADERS if name in request.headers}
    try:
        answer = await client.request(request.method, url, content=await request.body(), headers=headers)
    except httpx.TimeoutException:
        return error(504, "timeout_error", f"{door.label}: the decision container did not answer in time")
    except httpx.TransportError:
        return error(503, "service_unavailable", f"{door.label}: the decision container at {door.url} is not "
                     "accepting connections (starting, or exited; see the local endpoints' log)",
                     UNAVAILABLE_RETRY_AFTER_S)
    # httpx decoded any Content-Encoding of the answer: the decoded body goes back without it.
    return Response(answer.content, status_code=answer.status_code,
                    headers=forwardable(answer.headers.items(), drop=frozenset({"content-encoding"})))
