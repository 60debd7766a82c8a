"""SemIf's contract as a door: every body on `/invocations` no other door speaks (`{"decision": ...}` or
`{"decisions": [...]}`), and the endpoint's own routes' errors; errors as `{"error": {"code", "message", "field"?}}`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import semif_contract
from ..door import Reading
from ..semif_contract import Failure, SemIfTicket


def error_response(status: int, code: str, message: str, field: str | None = None,
                   retry_after: int | None = None) -> JSONResponse:
    """SemIf's error shape."""
    return JSONResponse({"error": Failure(status, code, message, field).error()}, status_code=status,
                        headers={"Retry-After": str(retry_after)} if retry_after is not None else None)


def semif_response(failure: Failure) -> JSONResponse:
    return error_response(failure.status, failure.code, failure.message, failure.field, failure.retry_after)


class SemIfDoor:
    name = "semif"
    route: str | None = None  # spoken on /invocations only
    error_routes: frozenset[str] = frozenset()  # and the answer to any route no other door owns

    def speaks(self, document: Any, attributes: str) -> bool:
        """The contract the endpoint started with: whatever no door before it speaks."""
        return True

    def check(self, request: Request) -> None:
        """Nothing to refuse before the body."""

    def parse(self, document: Any, reading: Reading, *, line: bool = False) -> SemIfTicket:
        return SemIfTicket.parse(document, reading.scoring, reading.identity, line=line)

    def failure(self, error: BaseException, request_id: str, *, invocations: bool) -> Response:
        return semif_response(Failure.of(error, request_id))

    def refused_key(self, status: int, message: str) -> Response:
        return error_response(status, "authentication_error", message, "Authorization")

    def route_error(self, status: int, message: str) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
        return error_response(status, code, message, "path")

    def refused_line(self, error: BaseException, number: int, request_id: str) -> bytes:
        return semif_contract.refused_line(error, number, request_id)
