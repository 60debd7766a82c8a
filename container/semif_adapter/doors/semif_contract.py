"""The SemIf door: `{"decision": ...}` (or `{"decisions": [...]}`) in, SemIf's answer document out, errors as
`{"error": {"code", "message", "field"?}}`. The contract the endpoint started with, kept exactly."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from ..core.decided import Decided
from ..core.identity import ModelIdentity
from ..core.question import Question, canonical_state
from ..errors import ServiceError
from .request_schema import DecisionRequest, validate_document, validate_request
from .response import render

LOG = logging.getLogger("semif_adapter.access")


@dataclass(frozen=True)
class Failure:
    """An exception as the JSON error a caller gets: for a whole request, or for one line of a batch."""

    status: int
    code: str
    message: str
    field: str | None = None
    retry_after: int | None = None

    @classmethod
    def of(cls, error: BaseException, request_id: str) -> Failure:
        if isinstance(error, ServiceError):
            return cls(error.status, error.code, error.message, error.field, error.retry_after)
        LOG.error("internal error", exc_info=error, extra={"fields": {"request_id": request_id}})
        return cls(500, "internal_error", f"internal error; request id {request_id}")

    def error(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, **({"field": self.field} if self.field else {})}

    def document(self) -> bytes:
        return json.dumps({"error": self.error()}, separators=(",", ":")).encode()

    def line(self, number: int) -> bytes:
        """The error as a JSON Lines answer: the line it answers is named."""
        return json.dumps({"error": self.error(), "line": number}, separators=(",", ":")).encode()


@dataclass(frozen=True)
class SemIfTicket:
    """One decision, or several (`decisions`), parsed and ready for the core."""

    requests: tuple[DecisionRequest, ...]
    many: bool
    questions: tuple[Question, ...]
    identity: ModelIdentity

    @classmethod
    def parse(cls, document: Any, default_method: str, identity: ModelIdentity, *, line: bool = False) -> SemIfTicket:
        """A body's decision(s); a JSON Lines line holds exactly one decision."""
        requests, many = ([validate_request(document)], False) if line else validate_document(document)
        return cls(tuple(requests), many, tuple(r.to_question(default_method) for r in requests), identity)

    def log_fields(self, answers: Sequence[Decided | BaseException] = (), lines: int | None = None) -> dict[str, Any]:
        """What the access log says: the decision's facts, or of a batch its size, states and what reuse saved."""
        if not self.many:
            answer = answers[0] if answers else None
            fields: dict[str, Any] = {"decision_id": self.requests[0].decision.id}
            if isinstance(answer, Decided):
                fields.update(scoring=answer.method, prompt_tokens=answer.prompt_tokens,
                              evaluated_tokens=answer.evaluated_tokens, cached_tokens=answer.cached_tokens,
                              cache_source=answer.cache_source)
            return fields
        decided = [answer for answer in answers if isinstance(answer, Decided)]
        count = len(self.requests) if lines is None else lines
        return {"lines": count, "decisions": len(self.requests), "errors": count - len(decided),
                "states": len({canonical_state(r.decision.state) for r in self.requests}),
                "evaluated_tokens": sum(d.evaluated_tokens for d in decided),
                "cached_tokens": sum(d.cached_tokens for d in decided)}

    def body(self, answers: Sequence[Decided | BaseException], request_id: str) -> tuple[int, bytes, int | None]:
        """(status, body, Retry-After) of the response: one answer, or `{"decisions": [...]}` where each failed
        decision is its error object."""
        if not self.many:
            answer = answers[0]
            if isinstance(answer, Decided):
                return 200, render(self.requests[0], answer, self.identity), None
            failure = Failure.of(answer, request_id)
            return failure.status, failure.document(), failure.retry_after
        parts = [render(request, answer, self.identity) if isinstance(answer, Decided)
                 else Failure.of(answer, request_id).document()
                 for request, answer in zip(self.requests, answers, strict=True)]
        return 200, b'{"decisions":[' + b",".join(parts) + b"]}", None

    def respond(self, answers: Sequence[Decided | BaseException], request_id: str, *, invocations: bool) -> Response:
        status, body, retry_after = self.body(answers, request_id)
        return Response(body, status_code=status, media_type="application/json",
                        headers={"Retry-After": str(retry_after)} if retry_after is not None else None)

    def line(self, answers: Sequence[Decided | BaseException], number: int, request_id: str) -> bytes:
        """The line's answer, or its error object with the line's number."""
        answer = answers[0]
        if isinstance(answer, Decided):
            return render(self.requests[0], answer, self.identity)
        return Failure.of(answer, request_id).line(number)


def refused_line(error: BaseException, number: int, request_id: str) -> bytes:
    return Failure.of(error, request_id).line(number)
