"""HTTP: the SageMaker container contract (`GET /ping`, `POST /invocations`) over Starlette.

Every error is JSON `{"error": {"code", "message", "field"?}}` and leaves the
server serving. A pure-ASGI middleware gives each request an id, echoes
`X-Amzn-SageMaker-Custom-Attributes`, and writes one JSON log line per request
(bodies are never logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import jsonlines, metrics
from .prompt import canonical_state
from .request_schema import DecisionRequest, RequestError, parse_body
from .service import Decided, DecisionService, NotReadyError, QueueFullError, ShuttingDownError
from .tokens import PromptTooLongError

LOG = logging.getLogger("semif_adapter.access")
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
JSON = "application/json"
# One decision at a time per instance, and 1 MB of JSON Lines is about 2,000 decisions: more per request would
# outlast a transform job's default 600 s invocation timeout on a CPU instance (set InvocationsTimeoutInSeconds).
EXECUTION_PARAMETERS = {"MaxConcurrentTransforms": 1, "BatchStrategy": "MULTI_RECORD", "MaxPayloadInMB": 1}

T = TypeVar("T")
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


async def _unless_client_leaves(request: Request, work: Coroutine[Any, Any, T]) -> T:
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


@dataclass(frozen=True)
class Failure:
    """An exception as the JSON error a caller gets: for a whole request, or for one line of a batch."""

    status: int
    code: str
    message: str
    field: str | None = None
    retry_after: int | None = None

    def response(self) -> JSONResponse:
        return error_response(self.status, self.code, self.message, self.field, self.retry_after)

    def document(self) -> bytes:
        error = {"code": self.code, "message": self.message, **({"field": self.field} if self.field else {})}
        return json.dumps({"error": error}, separators=(",", ":")).encode()


def failure_of(error: BaseException, service: DecisionService, request_id: str) -> Failure:
    if isinstance(error, RequestError):
        return Failure(error.status, error.code, error.message, error.field)
    if isinstance(error, PromptTooLongError):
        return Failure(413, "prompt_too_long", str(error), error.field)
    if isinstance(error, QueueFullError):
        return Failure(503, "queue_full", f"{service.settings.queue_size} decisions are already admitted; retry",
                       retry_after=1)
    if isinstance(error, NotReadyError):
        return Failure(503, "not_ready", "the model is loading or warming up", retry_after=5)
    if isinstance(error, ShuttingDownError):
        return Failure(503, "shutting_down", "this instance is stopping; retry on another", retry_after=1)
    if isinstance(error, TimeoutError):
        seconds = service.settings.body_timeout_seconds
        return Failure(408, "body_timeout", f"body not received within {seconds} s", "body")
    LOG.error("internal error", exc_info=error, extra={"fields": {"request_id": request_id}})
    return Failure(500, "internal_error", f"internal error; request id {request_id}")


def _media_type(request: Request) -> str:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != JSON and media_type not in jsonlines.MEDIA_TYPES:
        raise RequestError("unsupported_media_type", f"Content-Type must be {JSON} or {jsonlines.MEDIA_TYPE}, "
                           f"not {media_type or 'missing'!r}", "Content-Type", status=415)
    return media_type


def _batch_fields(requests: list[DecisionRequest], answers: list[Decided | BaseException],
                  lines: int) -> dict[str, Any]:
    """What the access log says of a batch: its size, its states and what reuse saved."""
    decided = [answer for answer in answers if isinstance(answer, Decided)]
    return {"lines": lines, "decisions": len(requests), "errors": lines - len(decided),
            "states": len({canonical_state(r.decision.state) for r in requests}),
            "evaluated_tokens": sum(d.evaluated_tokens for d in decided),
            "cached_tokens": sum(d.cached_tokens for d in decided)}


def _single_response(answer: Decided | BaseException, fields: dict[str, Any],
                     fail: Callable[[BaseException], Failure]) -> Response:
    if not isinstance(answer, Decided):
        return fail(answer).response()
    fields.update(scoring=answer.method, prompt_tokens=answer.prompt_tokens, evaluated_tokens=answer.evaluated_tokens,
                  cached_tokens=answer.cached_tokens, cache_source=answer.cache_source)
    return Response(answer.body, media_type=JSON)


def _many_response(answers: list[Decided | BaseException], fail: Callable[[BaseException], Failure]) -> Response:
    """{"decisions": [...]}: each answer as it would be alone; an error object where a decision failed."""
    parts = [answer.body if isinstance(answer, Decided) else fail(answer).document() for answer in answers]
    return Response(b'{"decisions":[' + b",".join(parts) + b"]}", media_type=JSON)


def _lines_response(lines: list[jsonlines.Line], answers: list[Decided | BaseException],
                    fail: Callable[[BaseException], Failure]) -> Response:
    results = iter(answers)
    out = []
    for line in lines:
        if line.error is not None:
            out.append(jsonlines.error_line(line.number, line.error.code, line.error.message, line.error.field))
            continue
        answer = next(results)
        if isinstance(answer, Decided):
            out.append(answer.body)
        else:
            failure = fail(answer)
            out.append(jsonlines.error_line(line.number, failure.code, failure.message, failure.field))
    return Response(jsonlines.join(out), media_type=jsonlines.MEDIA_TYPE)


def build_app(service: DecisionService) -> Starlette:
    limit, endpoint = service.settings.max_body_bytes, service.settings.endpoint_name

    async def ping(_request: Request) -> Response:
        if service.ready:
            return Response(status_code=200)
        return not_ready_response()

    async def execution_parameters(_request: Request) -> Response:
        """Batch Transform asks this when a job leaves the three unset (the SageMaker container contract)."""
        return JSONResponse(EXECUTION_PARAMETERS)

    async def invocations(request: Request) -> Response:
        fields: dict[str, Any] = request.state.log_fields
        request_id = request.state.request_id

        def fail(error: BaseException) -> Failure:
            return failure_of(error, service, request_id)

        try:
            media_type = _media_type(request)
            body = await asyncio.wait_for(_read_body(request, limit), service.settings.body_timeout_seconds)
            if media_type == JSON:
                requests, many = parse_body(body)
                lines: list[jsonlines.Line] = []
            else:
                lines = jsonlines.parse_lines(body)
                requests, many = [line.request for line in lines if line.request is not None], True
            del body
            if not many:
                fields["decision_id"] = requests[0].decision.id
            answers = await _unless_client_leaves(request, service.decide_all(requests)) if requests else []
            request.state.decided = [answer for answer in answers if isinstance(answer, Decided)]
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error; the server serves on
            return fail(error).response()
        if not many:
            return _single_response(answers[0], fields, fail)
        fields.update(_batch_fields(requests, answers, len(lines) or len(requests)))
        return _lines_response(lines, answers, fail) if lines else _many_response(answers, fail)

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        response = error_response(exc.status_code, code, f"{exc.detail}: this container serves "
                                  "GET /ping, POST /invocations and GET /execution-parameters", "path")
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    app = Starlette(routes=[Route("/ping", ping, methods=["GET"]),
                            Route("/invocations", invocations, methods=["POST"]),
                            Route("/execution-parameters", execution_parameters, methods=["GET"])],
                    exception_handlers={HTTPException: http_error})
    app.add_middleware(RequestContext, endpoint=endpoint)  # type: ignore[arg-type]
    return app


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
            if scope["path"] == "/invocations":
                metrics.emit(self.endpoint, status, scope["state"].get("decided", ()))
