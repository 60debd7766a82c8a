"""Per-request context for every route: a request id, the echo of SageMaker's custom attributes, and the one JSON
access-log line and EMF metrics, written once the response is sent (bodies and keys are never logged)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..core import metrics

LOG = logging.getLogger("semif_adapter.access")
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
DECISION_PATHS = ("/invocations", "/v1/systemone", "/v1/decisions")  # the routes whose answers the metrics count

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]


class RequestContext:
    """Request id, custom-attribute echo and the one access-log line, for every route."""

    def __init__(self, app: ASGIApp, endpoint: str | None = None) -> None:
        self.app, self.endpoint = app, endpoint

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        attributes = next((value for key, value in scope["headers"] if key.decode().lower() == CUSTOM_ATTRIBUTES),
                          None)
        fields: dict[str, Any] = {}
        scope.setdefault("state", {}).update(request_id=request_id, log_fields=fields)
        started = time.perf_counter()
        status = 0

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                headers.append((b"x-typesafe-request-id", request_id.encode()))
                if attributes is not None:
                    headers.append((CUSTOM_ATTRIBUTES.encode(), attributes))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            if scope["path"] != "/ping" or status != 200:  # health checks every few seconds are noise
                LOG.info("request", extra={"fields": {
                    "request_id": request_id, "method": scope["method"], "path": scope["path"],
                    "status": status, "ms": round((time.perf_counter() - started) * 1000, 2), **fields}})
            if scope["path"] in DECISION_PATHS:
                metrics.emit(self.endpoint, status, scope["state"].get("decided", ()))
