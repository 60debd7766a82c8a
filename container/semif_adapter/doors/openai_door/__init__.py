"""OpenAI's Decisions API as a door: `POST /v1/decisions`, and on `/invocations` a body with `input` and a list of
`questions` (or any body named `route=/v1/decisions` in SageMaker's custom attributes); errors in OpenAI's shape."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import openai_contract
from ..door import ROUTE_ATTRIBUTE, Reading, rendered_response
from ..openai_contract import DecisionsTicket
from ..openai_schema import speaks_decisions
from ..systemone_contract import Rendered

ROUTE = "/v1/decisions"


class OpenAIDoor:
    name = "openai_decisions"
    route: str | None = ROUTE
    error_routes = frozenset({ROUTE})

    def speaks(self, document: Any, attributes: str) -> bool:
        return ROUTE_ATTRIBUTE + ROUTE in attributes or speaks_decisions(document)

    def check(self, request: Request) -> None:
        """Nothing to refuse before the body: a JSON body is all this contract takes."""

    def parse(self, document: Any, reading: Reading, *, line: bool = False) -> DecisionsTicket:
        return DecisionsTicket.parse(document, reading.scoring, reading.identity, reading.frames,
                                     writes_prefix=reading.writes_prefix)

    def failure(self, error: BaseException, request_id: str, *, invocations: bool) -> Response:
        overload = openai_contract.SAGEMAKER_BUSY if invocations else openai_contract.OVERLOADED
        return rendered_response(openai_contract.failure(error, request_id, overload_status=overload))

    def refused_key(self, status: int, message: str) -> Response:
        """OpenAI's clients know one answer to a missing or wrong key: 401 `invalid_api_key`."""
        return rendered_response(Rendered(401, openai_contract.error_document(
            401, "Incorrect or missing API key: send Authorization: Bearer <key>", None, "invalid_api_key"), {}))

    def route_error(self, status: int, message: str) -> Response:
        return JSONResponse(openai_contract.error_document(status, message, "path"), status_code=status)

    def refused_line(self, error: BaseException, number: int, request_id: str) -> bytes:
        return openai_contract.refused_line(error, number, request_id)
