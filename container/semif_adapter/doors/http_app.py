"""HTTP: the SageMaker container contract (`GET /ping`, `POST /invocations`), the System One API
(`POST /v1/systemone`) and OpenAI's Decisions API (`POST /v1/decisions`), with `GET /v1/models` for both, over
Starlette.

Three contracts, three doors onto one core, each one object (`door.Door`, in `*_door/`) that the app iterates over.
SageMaker routes only `/invocations`, so there the body says which door it speaks: the first door in `DOORS` that
speaks it (`input` with a list of `questions` is OpenAI's, an object of `questions` System One's, anything else
SemIf's). Every error is JSON in the shape of the contract that was spoken and leaves the server serving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..core.decided import Decided
from ..core.decider import Decider
from ..core.question import Question, canonical_state
from ..errors import NotReadyError, RequestError
from . import jsonlines, openai_contract
from .api_keys import ApiKeys
from .door import JSON, ROUTE_ATTRIBUTE, Door, Reading
from .openai_door import OpenAIDoor
from .request_body import decode_body, read_body
from .request_context import CUSTOM_ATTRIBUTES, RequestContext
from .semif_door import SemIfDoor, error_response
from .strict_json import load_json
from .systemone_door import SystemOneDoor

# One decision at a time per instance, and 1 MB of JSON Lines is about 2,000 decisions: more per request would
# outlast a transform job's default 600 s invocation timeout on a CPU instance (set InvocationsTimeoutInSeconds).
EXECUTION_PARAMETERS = {"MaxConcurrentTransforms": 1, "BatchStrategy": "MULTI_RECORD", "MaxPayloadInMB": 1}
# In the order a body is recognised; the last one speaks whatever no other does (and answers the endpoint's own
# routes' errors). A fourth contract is one more door here.
DOORS: tuple[Door, ...] = (OpenAIDoor(), SystemOneDoor(), SemIfDoor())
SERVED_ROUTES = ("GET /ping, POST /invocations, GET /execution-parameters, POST /v1/systemone, POST /v1/decisions "
                 "and GET /v1/models")

T = TypeVar("T")


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
        doors = [Route(door.route, self._door_route(door), methods=["POST"]) for door in DOORS if door.route]
        app = Starlette(routes=[Route("/ping", self.ping, methods=["GET"]),
                                Route("/invocations", self.invocations, methods=["POST"]),
                                Route("/execution-parameters", self.execution_parameters, methods=["GET"]),
                                *doors, Route("/v1/models", self.models, methods=["GET"])],
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

    @property
    def reading(self) -> Reading:
        """What a door parses with (NotReadyError before the model is loaded: the door's 503)."""
        return Reading(self.settings.scoring, self.service.identity, self.settings.frames,
                       self.service.saves_prefixes)

    @staticmethod
    def door_of(document: Any, attributes: str = "") -> Door:
        return next(door for door in DOORS if door.speaks(document, attributes))

    @staticmethod
    def owner(path: str) -> Door:
        """The door whose shapes a route's own errors take: its owner's, else the endpoint's first contract's."""
        return next((door for door in DOORS if path in door.error_routes), DOORS[-1])

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
        door = self.owner("/v1/models")
        refused = self.refused_key(request)
        if refused is not None:
            return door.refused_key(*refused)
        try:
            identity = self.service.identity
            return JSONResponse({**openai_contract.model_list(identity), **identity.listing()})
        except NotReadyError as error:
            return door.failure(error, request.state.request_id, invocations=False)

    def _door_route(self, door: Door) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            return await self.door_route(request, door)
        return route

    async def door_route(self, request: Request, door: Door) -> Response:
        """A contract's own route: its key refusal, its body parsed into a ticket, the core's answers rendered, and
        any failure in its shapes (the server serves on)."""
        refused = self.refused_key(request)
        if refused is not None:
            return door.refused_key(*refused)
        fields, request_id = request.state.log_fields, request.state.request_id
        try:
            door.check(request)
            _media_type(request, (JSON,))
            ticket = door.parse(load_json(await self.body_of(request)), self.reading)
            fields.update(ticket.log_fields())
            return ticket.respond(await self.decide(request, ticket.questions), request_id, invocations=False)
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error; the server serves on
            return door.failure(error, request_id, invocations=False)

    async def invocations(self, request: Request) -> Response:
        """SageMaker's one route: the body says which door it speaks (a key is refused before it is read, in
        SemIf's shape)."""
        fields, request_id = request.state.log_fields, request.state.request_id
        refused = self.refused_key(request)
        if refused is not None:
            return DOORS[-1].refused_key(*refused)
        attributes = request.headers.get(CUSTOM_ATTRIBUTES, "")
        if ROUTE_ATTRIBUTE + "/v1/models" in attributes:
            return await self.models(request)
        document: Any = None
        try:
            media_type = _media_type(request, (JSON, *sorted(jsonlines.MEDIA_TYPES)))
            body = await self.body_of(request)
            if media_type != JSON:
                return await self.lines(request, body)
            document = load_json(body)
            del body
            ticket = self.door_of(document, attributes).parse(document, self.reading)
            fields.update(ticket.log_fields())
            answers = await self.decide(request, ticket.questions)
            fields.update(ticket.log_fields(answers))
            return ticket.respond(answers, request_id, invocations=True)
        except ClientDisconnect:
            fields["client_disconnected"] = True
            return Response(status_code=499)
        except Exception as error:  # every failure becomes a JSON error in the contract spoken; serving goes on
            return self.door_of(document, attributes).failure(error, request_id, invocations=True)

    def parse_line(self, document: Any, _number: int) -> jsonlines.LineTicket:
        return self.door_of(document).parse(document, self.reading, line=True)

    async def lines(self, request: Request, body: bytes) -> Response:
        """Each line in its own contract; the questions of all lines decided together, answered line by line."""
        request_id = request.state.request_id

        def refuse(error: BaseException, document: Any, number: int) -> bytes:
            return self.door_of(document).refused_line(error, number, request_id)

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
        """A route's 404 or 405 in the shapes of the contract the route speaks (e.g. GET /v1/systemone)."""
        assert isinstance(exc, HTTPException)
        message = f"{exc.detail}: this container serves {SERVED_ROUTES}"
        response = self.owner(request.url.path).route_error(exc.status_code, message)
        if exc.headers:
            response.headers.update(exc.headers)
        return response


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
