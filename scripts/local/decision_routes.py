"""The decision container's own routes on the gateway: System One's (`POST /v1/systemone`), OpenAI's Decisions API
(`POST /v1/decisions`) and the models list both read (`GET /v1/models`), for the local decision endpoint.

SageMaker routes only `/invocations`; locally there is no such limit, so the gateway also answers these paths and
the SDKs' `base_url` can point at it (the System One SDK's at the gateway, the openai SDK's at the gateway's `/v1`).
They go to the decision container's own routes, unchanged: body, Content-Type, Content-Encoding and Authorization
on the way in; status, headers (Retry-After, x-typesafe-request-id) and body on the way out, so the container's
error shapes and its API-key checks reach the client as they are. Only what the container cannot answer (no
decision endpoint behind the gateway, the container down or silent) is answered here, in the shape of the route
called (`invoke_wire.error_document`: OpenAI's on `/v1/decisions`, System One's elsewhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from starlette.requests import Request
from starlette.responses import Response

from semif_decision_client.invoke_wire import SYSTEMONE_PATH, error_document

from .endpoints import names_decision_role
from .proxy import forwardable

PASSED_HEADERS = ("content-type", "content-encoding", "authorization", "accept")
UNAVAILABLE_RETRY_AFTER_S = 1


@dataclass(frozen=True)
class DecisionDoor:
    """Where the container's own routes go: a container (`label`: endpoint, or endpoint/component), or why
    nowhere."""

    label: str | None
    url: str | None
    reason: str = ""


def decision_door(containers: Mapping[str, str], named: str | None = None) -> DecisionDoor:
    """The container that answers these routes: the one `named` (an endpoint, or `endpoint/component`), else the one
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


def error(status: int, error_type: str, message: str, retry_after: int | None = None,
          path: str = SYSTEMONE_PATH) -> Response:
    """What the gateway itself answers, in the shape of the route `path` names."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(error_document(status, message, error_type, path), status_code=status,
                    media_type="application/json", headers=headers)


async def forward(client: httpx.AsyncClient, door: DecisionDoor, request: Request) -> Response:
    """The decision container's own answer to this call, byte for byte (or the gateway's error)."""
    path = request.url.path
    if door.url is None:
        return error(404, "not_found_error", f"{request.method} {path}: {door.reason}", path=path)
    url = f"{door.url}{request.url.path}" + (f"?{request.url.query}" if request.url.query else "")
    headers = {name: request.headers[name] for name in PASSED_HEADERS if name in request.headers}
    try:
        answer = await client.request(request.method, url, content=await request.body(), headers=headers)
    except httpx.TimeoutException:
        return error(504, "timeout_error", f"{door.label}: the decision container did not answer in time", path=path)
    except httpx.TransportError:
        return error(503, "service_unavailable", f"{door.label}: the decision container at {door.url} is not "
                     "accepting connections (starting, or exited; see the local endpoints' log)",
                     UNAVAILABLE_RETRY_AFTER_S, path)
    # httpx decoded any Content-Encoding of the answer: the decoded body goes back without it.
    return Response(answer.content, status_code=answer.status_code,
                    headers=forwardable(answer.headers.items(), drop=frozenset({"content-encoding"})))
