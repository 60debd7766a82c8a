"""System One as a door: `POST /v1/systemone` (and the errors of `/v1/models`), and on `/invocations` a body with
an object of `questions` and no SemIf `decision`; errors in System One's shapes."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import systemone_contract
from ..door import Reading, rendered_response
from ..systemone_contract import Rendered, SystemOneTicket
from ..systemone_schema import SystemOneValidationError, detail

ROUTE = "/v1/systemone"


class SystemOneDoor:
    name = "systemone"
    route: str | None = ROUTE
    error_routes = frozenset({ROUTE, "/v1/models"})

    def speaks(self, document: Any, attributes: str) -> bool:
        """A body with `questions` (and no SemIf `decision`) is a System One request."""
        return isinstance(document, dict) and "questions" in document and "decision" not in document \
            and "decisions" not in document

    def check(self, request: Request) -> None:
        """System One's image assets come as multipart/form-data: refused with a reason, as a validation failure."""
        if request.headers.get("content-type", "").lower().startswith("multipart/"):
            raise SystemOneValidationError([detail(["assets"], "image assets are not supported: this endpoint's "
                                                   "model reads text only", "unsupported_asset")])

    def parse(self, document: Any, reading: Reading, *, line: bool = False) -> SystemOneTicket:
        return SystemOneTicket.parse(document, reading.scoring, reading.identity, reading.frames)

    def failure(self, error: BaseException, request_id: str, *, invocations: bool) -> Response:
        overload = systemone_contract.SAGEMAKER_BUSY if invocations else systemone_contract.OVERLOADED
        return rendered_response(systemone_contract.failure(error, request_id, overload_status=overload))

    def refused_key(self, status: int, message: str) -> Response:
        return rendered_response(Rendered(status, systemone_contract.error_document(status, message), {}))

    def route_error(self, status: int, message: str) -> Response:
        return JSONResponse(systemone_contract.error_document(status, message), status_code=status)

    def refused_line(self, error: BaseException, number: int, request_id: str) -> bytes:
        return systemone_contract.refused_line(error, number, request_id)
