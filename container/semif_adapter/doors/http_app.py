"""HTTP: the SageMaker container contract (`GET /ping`, `POST /invocations`) and the System One API
(`POST /v1/systemone`, `GET /v1/models`) over Starlette.

Two contracts, two doors onto one core: a body with `questions` is a System One request and is answered in System
One's shapes (on `/invocations` too, since SageMaker routes nothing else); anything else on `/invocations` is SemIf's.
Every error is JSON in the shape of the contract that was spoken and leaves the server serving. A pure-ASGI
middleware gives each request an id, echoes `X-Amzn-SageMaker-Custom-Attributes`, and writes one JSON log line per
request (bodies and keys are never logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..core import metrics
from ..core.question import Question, canonical_state
from ..core.service import Decided, DecisionService
from ..errors import NotReadyError, RequestError
from . import jsonlines, semif_contract, systemone_contract
from .api_keys import ApiKeys
from .request_body import decode_body, read_body
from .semif_contract import Failure, SemIfTicket
from .strict_json import load_json
from .systemone_contract import Rendered, SystemOneTicket, encode
from .systemone_schema import SystemOneValidationError, detail

LOG = logging.getLogger("semif_adapter.access")
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
JSON = "application/json"
ROUTE_ATTRIBUTE = "route="  # custom attributes `route=/v1/models`: the models list through SageMaker's /invocations
# One decision at a time per instance, and 1 MB of JSON Lines is about 2,000 decisions: more per request would
# outlast a transform job's default 600 s invocation timeout on a CPU instance (set InvocationsTimeoutInSeconds).
EXECUTION_PARAMETERS = {"MaxConcurrentTransforms": 1, "BatchStrategy": "MULTI_RECORD", "MaxPayloadInMB": 1}
SYSTEMONE_ROUTES = frozenset({"/v1/systemone", "/v1/models"})
SERVED_ROUTES = "GET /ping, POST /invocations, GET /execution-parameters, POST /v1/systemone and GET /v1/models"

T = TypeVar("T")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]


def error_response(status: int, code: str, message: str, field: str | None = None,
                   retry_after: int | None = None) -> JSONResponse:
    """SemIf's error shape."""
    return JSONResponse({"error": Failure(status, code, message, field).error()}, status_code=status,
                        headers={"Retry-After": str(retry_after)} if retry_after is not None else None)


def semif_response(failure: Failure) -> JSONResponse:
    return error_response(failure.status, failure.code, failure.message, failure.field, failure.retry_after)


def systemone_response(rendered: Rendered) -> Response:
    return Response(encode(rendered.document), status_code=rendered.status, media_type=JSON,
                    headers=rendered.headers or None)


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


def _media_type(request: Request, allowed: tuple[str, ...]) -> str:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in allowed:
        names = " or ".join(allowed[:2])
        raise RequestError("unsupported_media_type", f"Content-Type must be {names}, not "
                           f"{media_type or 'missing'!r}", "Content-Type", status=415)
    return media_type


class DecisionApi:
    """The routes, on one decision service (and its optional API keys)."""

    def __init__(self, service: DecisionService, api_keys: ApiKeys | None = None) -> None:
        self.service, self.settings, self.api_keys = service, service.settings, api_keys

    def app(self) -> Starlette:
        app = Starlette(routes=[Route("/ping", self.ping, methods=["GET"]),
                                Route("/invocations", self.invocations, methods=["POST"]),
                                Route("/execution-parameters", self.execution_parameters, methods=["GET"]),
                                Route("/v1/systemone", self.systemone, methods=["POST"]),
                                Route("/v1/models", self.models, methods=["GET"])],
                        exception_handlers={HTTPException: self.http_error})
        app.add_middleware(RequestContext, endpoint=self.settings.endpoint_name)
        return app

    # -- shared steps ----------------------------------------------------------------------------------------
    async def body_of(self, request: Request) -> bytes:
        """The body, decoded (gzip/zstd) and bounded; 408 if it does not arrive in time."""
        limit, seconds = self.settings.max_body_bytes, self.settings.body_timeout_seconds
        try:
            body = await asyncio.wait_for(read_body(request, limit), seconds)
        except TimeoutError:
            raise RequestError("body_timeout", f"body not received within {seconds} s", "body",
                               status=408) from None
        return decode_body(body, request.headers.get("content-encoding"), limit)

    def refused_key(self, request: Request) -> tuple[int, str] | None:
        """(status, message) when keys are required and this request's is missing or wrong."""
        if self.api_keys is None:
            return None
        verdict = self.api_keys.check(request.headers.get("authorization"))
        if verdict.allowed:
            request.state.log_fields["key_id"] = verdict.key_id
            return None
        if verdict.missing:
            return 403, "this endpoint needs an API key: send Authorization: Bearer <key>"
        return 401, "the API key is not valid"

    async def decide(self, request: Request, questions: tuple[Question, ...]) -> list[Decided | BaseException]:
        answers = await _unless_client_leaves(request, self.service.decide_all(questions)) if questions else []
        request.state.decided = [answer for answer in answers if isinstance(answer, Decided)]
        return answers

    def systemone_ticket(self, document: Any) -> SystemOneTicket:
        return SystemOneTicket.parse(document, self.settings.scoring, self.service.identity, self.settings.frames)

    # -- routes ----------------------------------------------------------------------------------------------
    async def ping(self, _request: Request) -> Response:
        if self.service.ready:
            return Response(status_code=200)
        error = NotReadyError()
        return error_response(error.status, error.code, error.message, retry_after=error.retry_after)

    async def execution_parameters(self, _request: Request) -> Response:
        """Batch Transform asks this when a job leaves the three unset (the SageMaker container contract)."""
        return JSONResponse(EXECUTION_PARAMETERS)

    async def models(self, request: Request) -> Response:
        refused = self.refused_key(request)
        if refused is not None:
            return systemone_response(Rendered(refused[0], systemone_contract.error_document(*refused), {}))
        try:
            return JSONResponse(self.service.identity.listing())
        except NotReadyError as error:
            return systemone_response(systemone_contract.failure(error, request.state.request_id))

    async def systemone(self, request: Request) -> Response:
        fields, request_id = request.state.log_fields, request.state.request_id
        refused = self.refused_key(request)
        if refused is not None:
            return systemone_response(Rendered(refused[0], systemone_contract.error_document(*refused), {}))
        try:
            if request.headers.get("content-type", "").lower().startswith("multipart/"):
                raise SystemOneValidationError([detail(
                    ["assets"], "image assets are not supported: this endpoint's model reads text only",
                    "unsupported_asset")])
            _media_type(request, (JSON,))
            ticket = self.systemone_ticket(load_json(await self.body_of(request)))
            fields.update(ticket.log_fields())
            rendered = ticket.render(await self.decide(request, ticket.questions), request_id)
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error; the server serves on
            rendered = systemone_contract.failure(error, request_id)
        return systemone_response(rendered)

    async def invocations(self, request: Request) -> Response:
        fields, request_id = request.state.log_fields, request.state.request_id
        refused = self.refused_key(request)
        if refused is not None:
            return error_response(refused[0], "authentication_error", refused[1], "Authorization")
        if ROUTE_ATTRIBUTE + "/v1/models" in request.headers.get(CUSTOM_ATTRIBUTES, ""):
            return await self.models(request)
        document: Any = None
        try:
            media_type = _media_type(request, (JSON, *sorted(jsonlines.MEDIA_TYPES)))
            body = await self.body_of(request)
            if media_type != JSON:
                return await self.lines(request, body)
            document = load_json(body)
            del body
            if _speaks_systemone(document):
                return await self.systemone_invocation(request, document)
            return await self.semif_invocation(request, document)
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error in the contract spoken; serving goes on
            if _speaks_systemone(document):
                return systemone_response(systemone_contract.failure(
                    error, request_id, overload_status=systemone_contract.SAGEMAKER_BUSY))
            return semif_response(Failure.of(error, request_id))

    async def systemone_invocation(self, request: Request, document: Any) -> Response:
        ticket = self.systemone_ticket(document)
        request.state.log_fields.update(ticket.log_fields())
        answers = await self.decide(request, ticket.questions)
        return systemone_response(ticket.render(answers, request.state.request_id,
                                                overload_status=systemone_contract.SAGEMAKER_BUSY))

    async def semif_invocation(self, request: Request, document: Any) -> Response:
        ticket = SemIfTicket.parse(document, self.settings.scoring, self.service.identity)
        if not ticket.many:
            request.state.log_fields["decision_id"] = ticket.requests[0].decision.id
        answers = await self.decide(request, ticket.questions)
        request.state.log_fields.update(ticket.log_fields(answers))
        status, answer_body, retry_after = ticket.body(answers, request.state.request_id)
        return Response(answer_body, status_code=status, media_type=JSON,
                        headers={"Retry-After": str(retry_after)} if retry_after is not None else None)

    def parse_line(self, document: Any, _number: int) -> jsonlines.LineTicket:
        if _speaks_systemone(document):
            return self.systemone_ticket(document)
        return SemIfTicket.parse(document, self.settings.scoring, self.service.identity, line=True)

    async def lines(self, request: Request, body: bytes) -> Response:
        """Each line in its own contract; the questions of all lines decided together, answered line by line."""
        request_id = request.state.request_id

        def refuse(error: BaseException, document: Any, number: int) -> bytes:
            if _speaks_systemone(document):
                return systemone_contract.refused_line(error, number, request_id)
            return semif_contract.refused_line(error, number, request_id)

        lines = jsonlines.parse_lines(body, self.parse_line, refuse)
        tickets = [line.ticket for line in lines if line.ticket is not None]
        answers = iter(await self.decide(request, tuple(q for t in tickets for q in t.questions)))
        out = []
        for line in lines:
            if line.ticket is None:
                assert line.error is not None
                out.append(line.error)
                continue
            mine = [next(answers) for _ in line.ticket.questions]
            out.append(line.ticket.line(mine, line.number, request_id))
        request.state.log_fields.update(_lines_fields(lines, tickets, getattr(request.state, "decided", [])))
        return Response(jsonlines.join(out), media_type=jsonlines.MEDIA_TYPE)

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = f"{exc.detail}: this container serves {SERVED_ROUTES}"
        if request.url.path in SYSTEMONE_ROUTES:  # e.g. GET /v1/systemone: 405 in the contract the route speaks
            response: Response = JSONResponse(systemone_contract.error_document(exc.status_code, message),
                                              status_code=exc.status_code)
        else:
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
            response = error_response(exc.status_code, code, message, "path")
        if exc.headers:
            response.headers.update(exc.headers)
        return response


def build_app(service: DecisionService, api_keys: ApiKeys | None = None) -> Starlette:
    return DecisionApi(service, api_keys).app()


def _lines_fields(lines: list[jsonlines.Line], tickets: list[jsonlines.LineTicket],
                  decided: list[Decided]) -> dict[str, Any]:
    """What the access log says of a batch: its size, its states and what reuse saved."""
    questions = [q for ticket in tickets for q in ticket.questions]
    answered = sum(1 for line in lines if line.ticket is not None)
    return {"lines": len(lines), "decisions": len(questions), "errors": len(lines) - answered,
            "states": len({canonical_state(q.state) for q in questions}),
            "evaluated_tokens": sum(d.evaluated_tokens for d in decided),
            "cached_tokens": sum(d.cached_tokens for d in decided)}


def _speaks_systemone(document: Any) -> bool:
    """A body with `questions` (and no SemIf `decision`) is a System One request."""
    return isinstance(document, dict) and "questions" in document and "decision" not in document \
        and "decisions" not in document


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
            if scope["path"] in ("/invocations", "/v1/systemone"):
                metrics.emit(self.endpoint, status, scope["state"].get("decided", ()))
