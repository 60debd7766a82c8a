"""HTTP: the SageMaker container contract (`GET /ping`, `POST /invocations`), the System One API
(`POST /v1/systemone`) and OpenAI's Decisions API (`POST /v1/decisions`), with `GET /v1/models` for both, over
Starlette.

Three contracts, three doors onto one core. SageMaker routes only `/invocations`, so there the body says which door
it speaks: `input` with a list of `questions` is OpenAI's, an object of `questions` System One's, anything else
SemIf's. Every error is JSON in the shape of the contract that was spoken and leaves the server serving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..core.decider import Decider
from ..core.question import Question, canonical_state
from ..core.service import Decided
from ..errors import NotReadyError, RequestError
from . import jsonlines, openai_contract, semif_contract, systemone_contract
from .api_keys import ApiKeys
from .openai_contract import DecisionsTicket
from .openai_schema import speaks_decisions
from .request_body import decode_body, read_body
from .request_context import CUSTOM_ATTRIBUTES, RequestContext
from .semif_contract import Failure, SemIfTicket
from .strict_json import load_json
from .systemone_contract import Rendered, SystemOneTicket, encode
from .systemone_schema import SystemOneValidationError, detail

JSON = "application/json"
ROUTE_ATTRIBUTE = "route="  # custom attributes `route=/v1/models` (or `/v1/decisions`): a route through /invocations
# One decision at a time per instance, and 1 MB of JSON Lines is about 2,000 decisions: more per request would
# outlast a transform job's default 600 s invocation timeout on a CPU instance (set InvocationsTimeoutInSeconds).
EXECUTION_PARAMETERS = {"MaxConcurrentTransforms": 1, "BatchStrategy": "MULTI_RECORD", "MaxPayloadInMB": 1}
SYSTEMONE_ROUTES = frozenset({"/v1/systemone", "/v1/models"})
SERVED_ROUTES = ("GET /ping, POST /invocations, GET /execution-parameters, POST /v1/systemone, POST /v1/decisions "
                 "and GET /v1/models")

T = TypeVar("T")


def error_response(status: int, code: str, message: str, field: str | None = None,
                   retry_after: int | None = None) -> JSONResponse:
    """SemIf's error shape."""
    return JSONResponse({"error": Failure(status, code, message, field).error()}, status_code=status,
                        headers={"Retry-After": str(retry_after)} if retry_after is not None else None)


def semif_response(failure: Failure) -> JSONResponse:
    return error_response(failure.status, failure.code, failure.message, failure.field, failure.retry_after)


def rendered_response(rendered: Rendered) -> Response:
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

    def __init__(self, service: Decider, api_keys: ApiKeys | None = None) -> None:
        self.service, self.settings, self.api_keys = service, service.settings, api_keys

    def app(self) -> Starlette:
        app = Starlette(routes=[Route("/ping", self.ping, methods=["GET"]),
                                Route("/invocations", self.invocations, methods=["POST"]),
                                Route("/execution-parameters", self.execution_parameters, methods=["GET"]),
                                Route("/v1/systemone", self.systemone, methods=["POST"]),
                                Route("/v1/decisions", self.decisions, methods=["POST"]),
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

    def decisions_ticket(self, document: Any) -> DecisionsTicket:
        return DecisionsTicket.parse(document, self.settings.scoring, self.service.identity, self.settings.frames,
                                     writes_prefix=self.service.saves_prefixes)

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
            return rendered_response(Rendered(refused[0], systemone_contract.error_document(*refused), {}))
        try:
            identity = self.service.identity
            return JSONResponse({**openai_contract.model_list(identity), **identity.listing()})
        except NotReadyError as error:
            return rendered_response(systemone_contract.failure(error, request.state.request_id))

    async def systemone(self, request: Request) -> Response:
        refused = self.refused_key(request)
        refusal = None if refused is None else Rendered(refused[0], systemone_contract.error_document(*refused), {})
        return await self._door_route(request, self.systemone_ticket, systemone_contract.failure, refusal,
                                      _no_assets)

    async def decisions(self, request: Request) -> Response:
        refusal = None if self.refused_key(request) is None else Rendered(401, openai_contract.error_document(
            401, "Incorrect or missing API key: send Authorization: Bearer <key>", None, "invalid_api_key"), {})
        return await self._door_route(request, self.decisions_ticket, openai_contract.failure, refusal)

    async def _door_route(self, request: Request, parse: Callable[[Any], RouteTicket],
                          failure: Callable[[BaseException, str], Rendered], refusal: Rendered | None,
                          check: Callable[[Request], None] | None = None) -> Response:
        """A contract's own route: its key refusal, its body parsed into a ticket, the core's answers rendered, and
        any failure in its shapes (the server serves on)."""
        if refusal is not None:
            return rendered_response(refusal)
        fields, request_id = request.state.log_fields, request.state.request_id
        try:
            if check is not None:
                check(request)
            _media_type(request, (JSON,))
            ticket = parse(load_json(await self.body_of(request)))
            fields.update(ticket.log_fields())
            rendered = ticket.render(await self.decide(request, ticket.questions), request_id)
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error; the server serves on
            rendered = failure(error, request_id)
        return rendered_response(rendered)

    async def invocations(self, request: Request) -> Response:
        fields, request_id = request.state.log_fields, request.state.request_id
        refused = self.refused_key(request)
        if refused is not None:
            return error_response(refused[0], "authentication_error", refused[1], "Authorization")
        attributes = request.headers.get(CUSTOM_ATTRIBUTES, "")
        if ROUTE_ATTRIBUTE + "/v1/models" in attributes:
            return await self.models(request)
        named = ROUTE_ATTRIBUTE + "/v1/decisions" in attributes  # the door named, whatever the body's shape
        document: Any = None
        try:
            media_type = _media_type(request, (JSON, *sorted(jsonlines.MEDIA_TYPES)))
            body = await self.body_of(request)
            if media_type != JSON:
                return await self.lines(request, body)
            document = load_json(body)
            del body
            if named or speaks_decisions(document):
                return await self.decisions_invocation(request, document)
            if _speaks_systemone(document):
                return await self.systemone_invocation(request, document)
            return await self.semif_invocation(request, document)
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error in the contract spoken; serving goes on
            if named or speaks_decisions(document):
                return rendered_response(openai_contract.failure(
                    error, request_id, overload_status=openai_contract.SAGEMAKER_BUSY))
            if _speaks_systemone(document):
                return rendered_response(systemone_contract.failure(
                    error, request_id, overload_status=systemone_contract.SAGEMAKER_BUSY))
            return semif_response(Failure.of(error, request_id))

    async def systemone_invocation(self, request: Request, document: Any) -> Response:
        ticket = self.systemone_ticket(document)
        return await self._ticket_invocation(request, ticket, systemone_contract.SAGEMAKER_BUSY)

    async def decisions_invocation(self, request: Request, document: Any) -> Response:
        ticket = self.decisions_ticket(document)
        return await self._ticket_invocation(request, ticket, openai_contract.SAGEMAKER_BUSY)

    async def _ticket_invocation(self, request: Request, ticket: RouteTicket, overload_status: int) -> Response:
        """A contract's request on SageMaker's /invocations: overload is its 503, what SageMaker's clients retry."""
        request.state.log_fields.update(ticket.log_fields())
        answers = await self.decide(request, ticket.questions)
        return rendered_response(ticket.render(answers, request.state.request_id, overload_status=overload_status))

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
        if speaks_decisions(document):
            return self.decisions_ticket(document)
        if _speaks_systemone(document):
            return self.systemone_ticket(document)
        return SemIfTicket.parse(document, self.settings.scoring, self.service.identity, line=True)

    async def lines(self, request: Request, body: bytes) -> Response:
        """Each line in its own contract; the questions of all lines decided together, answered line by line."""
        request_id = request.state.request_id

        def refuse(error: BaseException, document: Any, number: int) -> bytes:
            if speaks_decisions(document):
                return openai_contract.refused_line(error, number, request_id)
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
        elif request.url.path == "/v1/decisions":
            response = JSONResponse(openai_contract.error_document(exc.status_code, message, "path"),
                                    status_code=exc.status_code)
        else:
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
            response = error_response(exc.status_code, code, message, "path")
        if exc.headers:
            response.headers.update(exc.headers)
        return response


class RouteTicket(Protocol):
    """What a contract's parsed request gives its route (SystemOneTicket, DecisionsTicket)."""

    @property
    def questions(self) -> tuple[Question, ...]: ...

    def log_fields(self) -> dict[str, Any]: ...

    def render(self, answers: Sequence[Decided | BaseException], request_id: str,
               overload_status: int = ...) -> Rendered: ...


def _no_assets(request: Request) -> None:
    """System One's image assets come as multipart/form-data: refused with a reason, as a validation failure."""
    if request.headers.get("content-type", "").lower().startswith("multipart/"):
        raise SystemOneValidationError([detail(
            ["assets"], "image assets are not supported: this endpoint's model reads text only", "unsupported_asset")])


def build_app(service: Decider, api_keys: ApiKeys | None = None) -> Starlette:
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
