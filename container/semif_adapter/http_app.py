"""HTTP: the SageMaker container contract (`GET /ping`, `POST /invocations`) over Starlette.

Every error is JSON `{"error": {"code", "message", "field"?}}` and leaves the
server serving. A pure-ASGI middleware gives each request an id, echoes
`X-Amzn-SageMaker-Custom-Attributes`, and writes one JSON log line per request
(bodies are never logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .request_schema import RequestError, parse_request
from .service import Decided, DecisionService, NotReadyError, QueueFullError, ShuttingDownError
from .tokens import PromptTooLongError

LOG = logging.getLogger("semif_adapter.access")
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
BODY_TIMEOUT_SECONDS = 30.0  # a sender slower than this loses its request, not the server's attention

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]


def error_response(status: int, code: str, message: str, field: str | None = None,
                   retry_after: int | None = None) -> JSONResponse:
    error: dict[str, str] = {"code": code, "message": message}
    if field:
        error["field"] = field
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def not_ready_response() -> JSONResponse:
    """One answer for `/ping` and `/invocations` while the model loads or warms up."""
    return error_response(503, "not_ready", "the model is loading or warming up", retry_after=5)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError("body_too_large", f"body of {declared} bytes exceeds the {limit}-byte limit",
                           "body", status=413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError("body_too_large", f"body exceeds the {limit}-byte limit", "body", status=413)
        chunks.append(chunk)
    return b"".join(chunks)


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body is read, so receive() reports nothing else)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_client_leaves(request: Request, work: Coroutine[Any, Any, Decided]) -> Decided:
    """Run `work`, but drop it if the client leaves first: queued work nobody waits for is never run.

    A decision already decoding finishes (llama.cpp cannot stop one request of its batch); its slot
    frees then. Raises ClientDisconnect when the client left.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise ClientDisconnect
    try:
        return task.result()
    finally:
        # The task holds its exception, whose traceback holds this frame and the handler's (the body, the
        # parsed request): a cycle that kept each refused 6 MB input resident until the cyclic GC ran.
        del task


def build_app(service: DecisionService) -> Starlette:
    limit = service.settings.max_body_bytes

    async def ping(_request: Request) -> Response:
        if service.ready:
            return Response(status_code=200)
        return not_ready_response()

    async def invocations(request: Request) -> Response:
        fields: dict[str, Any] = request.state.log_fields
        try:
            media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media_type != "application/json":
                raise RequestError("unsupported_media_type",
                                   f"Content-Type must be application/json, not {media_type or 'missing'!r}",
                                   "Content-Type", status=415)
            body = await asyncio.wait_for(_read_body(request, limit), BODY_TIMEOUT_SECONDS)
            decision_request = parse_request(body)
            fields["decision_id"] = decision_request.decision.id
            decided = await _unless_client_leaves(request, service.decide(decision_request))
        except RequestError as error:
            return error_response(error.status, error.code, error.message, error.field)
        except PromptTooLongError as error:
            return error_response(413, "prompt_too_long", str(error), error.field)
        except QueueFullError:
            return error_response(503, "queue_full",
                                  f"{service.settings.queue_size} decisions are already admitted; retry",
                                  retry_after=1)
        except NotReadyError:
            return not_ready_response()
        except ShuttingDownError:
            return error_response(503, "shutting_down", "this instance is stopping; retry on another",
                                  retry_after=1)
        except TimeoutError:
            return error_response(408, "body_timeout", f"body not received within {BODY_TIMEOUT_SECONDS:.0f} s",
                                  "body")
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception:
            LOG.exception("internal error", extra={"fields": {"request_id": request.state.request_id}})
            return error_response(500, "internal_error",
                                  f"internal error; request id {request.state.request_id}")
        fields.update(scoring=decided.method, prompt_tokens=decided.prompt_tokens,
                      evaluated_tokens=decided.evaluated_tokens, cached_tokens=decided.cached_tokens,
                      cache_source=decided.cache_source)
        return Response(decided.body, media_type="application/json")

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        response = error_response(exc.status_code, code, f"{exc.detail}: this container serves "
                                  "GET /ping and POST /invocations", "path")
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    app = Starlette(routes=[Route("/ping", ping, methods=["GET"]),
                            Route("/invocations", invocations, methods=["POST"])],
                    exception_handlers={HTTPException: http_error})
    app.add_middleware(RequestContext)  # type: ignore[arg-type]
    return app


class RequestContext:
    """Request id, custom-attribute echo and the one access-log line, for every route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
