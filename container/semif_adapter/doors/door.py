"""What the app asks of a contract's door (`doors/*_door/`): one object per contract, which the app iterates over.

A door recognises its bodies (on SageMaker's `/invocations` and on JSON Lines), names its own routes, parses a body
into a ticket for the core, and answers in its own shapes: the answers, a failure, a refused API key, an HTTP error
on its route, a refused line. A fourth contract is one more door package and one more entry in the app's `DOORS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from ..core.decided import Decided
from ..core.identity import ModelIdentity
from ..core.question import Question
from ..core.question_frames import Frames
from .systemone_contract import rendered_response

__all__ = ["JSON", "ROUTE_ATTRIBUTE", "Door", "Reading", "Ticket", "rendered_response"]

JSON = "application/json"
ROUTE_ATTRIBUTE = "route="  # custom attributes `route=/v1/models` (or `/v1/decisions`): a route through /invocations


@dataclass(frozen=True)
class Reading:
    """What parsing a body needs from the endpoint: its default method, model, frames and whether it saves states."""

    scoring: str
    identity: ModelIdentity
    frames: Frames
    writes_prefix: bool


class Ticket(Protocol):
    """A parsed request: its questions, its access-log fields, its answer on a route or on a line."""

    @property
    def questions(self) -> tuple[Question, ...]: ...

    def log_fields(self, answers: Sequence[Decided | BaseException] = ()) -> dict[str, Any]: ...

    def respond(self, answers: Sequence[Decided | BaseException], request_id: str, *, invocations: bool) -> Response:
        ...

    def line(self, answers: Sequence[Any], number: int, request_id: str) -> bytes: ...


class Door(Protocol):
    name: str
    route: str | None  # its own POST route; None: it is spoken on /invocations only
    error_routes: frozenset[str]  # routes whose HTTP errors (404, 405) it answers

    def speaks(self, document: Any, attributes: str) -> bool:
        """Whether a body on /invocations (with its custom attributes) or a JSON Lines line is in this contract."""
        ...

    def check(self, request: Request) -> None:
        """What this contract refuses before the body is read (System One's multipart assets)."""
        ...

    def parse(self, document: Any, reading: Reading, *, line: bool = False) -> Ticket: ...

    def failure(self, error: BaseException, request_id: str, *, invocations: bool) -> Response: ...

    def refused_key(self, status: int, message: str) -> Response: ...

    def route_error(self, status: int, message: str) -> Response: ...

    def refused_line(self, error: BaseException, number: int, request_id: str) -> bytes: ...


