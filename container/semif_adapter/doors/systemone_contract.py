"""The System One door: a request's questions in, one answer per question id out, errors in its own shapes.

Each question is scored as if it were alone (the core never sees ids, order or neighbours), so its numbers are
bit-identical whatever else the request asks. The answer is jevcompat SPEC 0.1's: `model`, `answers` (exactly one per
question id, same type), `usage` (the state counted once), `confidence` by the reference formulas of SPEC 4.5, and
our own fields prefixed `x_`. Errors: validation 422 `{"detail": [{"loc", "msg", "type"}]}`, others
`{"detail": {"error_type", "message"}}`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from ..core.decided import Decided
from ..core.identity import ModelIdentity
from ..core.question import Kind, Question
from ..core.question_frames import DEFAULT_FRAMES, Frames
from ..errors import RequestError, ServiceError
from .response import timing_document
from .systemone_questions import to_questions
from .systemone_schema import SystemOneRequest, SystemOneValidationError, detail, validate

# Statuses and the error_type a System One client sees for them (validation failures are 422 with `detail[]`).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "authentication_error",
               404: "not_found_error", 405: "invalid_request_error", 408: "request_timeout",
               413: "request_too_large", 415: "invalid_request_error", 429: "rate_limit_error",
               500: "internal_error", 503: "service_unavailable", 529: "overloaded_error"}
PROMPT_TOO_LONG_TYPE = "context_length_exceeded"
OVERLOADED = 529  # the ecosystem's "busy, retry later" on /v1/systemone
SAGEMAKER_BUSY = 503  # SageMaker's /invocations keeps its own contract: 503 is what its clients retry
OPTION_FIELD = re.compile(r"^decision\.options\[(\d+)\]")


def error_document(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    return {"detail": {"error_type": error_type or ERROR_TYPES.get(status, "invalid_request_error"),
                       "message": message}}


@dataclass(frozen=True)
class Rendered:
    """A response's status, JSON document and extra headers, before any framework sees it."""

    status: int
    document: dict[str, Any]
    headers: dict[str, str]


def _loc(field: str | None, qid: str | None, question: Question | None) -> list[Any]:
    """A core error's field (SemIf's names: decision.state, decision.question, decision.options[i]) as a System One
    location."""
    if not field:
        return []
    if field == "decision.state":
        return ["state"]
    if qid is None:
        return [field]
    if field == "decision.question":
        return ["questions", qid, "instructions"]
    match = OPTION_FIELD.match(field)
    if match and question is not None:
        index = int(match[1])
        key: Any = question.answers[index].id if question.kind is Kind.CHOICE else index
        return ["questions", qid, "criteria", key]
    return ["questions", qid]


def failure(error: BaseException, request_id: str, *, overload_status: int = OVERLOADED, qid: str | None = None,
            question: Question | None = None) -> Rendered:
    """Any failure in System One's shapes: a client's mistake is never a 5xx."""
    if isinstance(error, SystemOneValidationError):
        if error.status == 422:
            return Rendered(422, {"detail": error.details}, {})
        return Rendered(error.status, error_document(error.status, str(error)), {})
    if isinstance(error, RequestError) and error.status == 400:  # malformed: a validation failure here
        return Rendered(422, {"detail": [detail(_loc(error.field, qid, question), error.message, error.code)]}, {})
    if isinstance(error, ServiceError):
        status = overload_status if error.code == "queue_full" else error.status
        error_type = PROMPT_TOO_LONG_TYPE if error.code == "prompt_too_long" else None
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else {}
        return Rendered(status, error_document(status, error.message, error_type), headers)
    return Rendered(500, error_document(500, f"internal error; request id {request_id}"), {})


@dataclass(frozen=True)
class SystemOneTicket:
    """A parsed request: its questions by id, in request order, ready for the core."""

    request: SystemOneRequest
    ids: tuple[str, ...]
    questions: tuple[Question, ...]
    identity: ModelIdentity

    @classmethod
    def parse(cls, document: Any, default_method: str, identity: ModelIdentity,
              frames: Frames = DEFAULT_FRAMES) -> SystemOneTicket:
        request = validate(document)
        if request.model is not None and not identity.serves(request.model):
            raise RequestError("model_not_found", f"model {request.model!r} is not served here; this endpoint "
                               f"serves {identity.name!r} (also as 'jev-latest')", "model", status=404)
        pairs = to_questions(request, default_method, frames)
        return cls(request, tuple(qid for qid, _ in pairs), tuple(q for _, q in pairs), identity)

    def log_fields(self, answers: Sequence[Decided | BaseException] = ()) -> dict[str, Any]:
        return {"contract": "systemone", "questions": len(self.ids), "scoring": self.questions[0].method.value}

    def render(self, answers: Sequence[Decided | BaseException], request_id: str,
               overload_status: int = OVERLOADED) -> Rendered:
        """Every answer, or the first failure (in question order): a response holds all answers or none."""
        for qid, question, answer in zip(self.ids, self.questions, answers, strict=True):
            if not isinstance(answer, Decided):
                return failure(answer, request_id, overload_status=overload_status, qid=qid, question=question)
        decided = [a for a in answers if isinstance(a, Decided)]
        identity = self.identity
        document = {
            "model": identity.name,
            "answers": {qid: _answer(answer, self.request.questions[qid]) for qid, answer in zip(self.ids, decided,
                                                                                               strict=True)},
            "usage": {"input_tokens": input_tokens(decided), "output_tokens": 0},
            "x_scoring": decided[0].method,
            "x_model": identity.document,
            "x_timing": request_timing(decided),
        }
        return Rendered(200, document, {})

    def respond(self, answers: Sequence[Decided | BaseException], request_id: str, *, invocations: bool) -> Response:
        """The answer on its route (overload: 529) or on SageMaker's /invocations (503, what its clients retry)."""
        return rendered_response(self.render(answers, request_id, SAGEMAKER_BUSY if invocations else OVERLOADED))

    def line(self, answers: Sequence[Decided | BaseException], number: int, request_id: str) -> bytes:
        """The line's answer, or its error with the line's number (SageMaker's /invocations: overload is 503)."""
        rendered = self.render(answers, request_id, overload_status=SAGEMAKER_BUSY)
        return encode(rendered.document if rendered.status == 200 else {**rendered.document, "line": number})


def rendered_response(rendered: Rendered) -> Response:
    return Response(encode(rendered.document), status_code=rendered.status, media_type="application/json",
                    headers=rendered.headers or None)


def refused_line(error: BaseException, number: int, request_id: str) -> bytes:
    return encode({**failure(error, request_id).document, "line": number})


def input_tokens(decided: Sequence[Decided]) -> int:
    """The prompt tokens the request was charged: the shared opening (template and state) once, then each
    question's own tokens (its criterion and every answer it scored)."""
    prefixes = [d.tokens.prefix for d in decided]
    if None in prefixes:  # no shared opening counted (llama-server counts per request): each question's whole share
        return sum(d.tokens.read for d in decided)
    return max(p for p in prefixes if p is not None) + sum(d.tokens.read - (d.tokens.prefix or 0) for d in decided)


def request_timing(decided: Sequence[Decided]) -> dict[str, Any]:
    """The request's time and tokens; `queue_ms` only where the engine measured one (not llama-server's path)."""
    queued = [d.queue_ms for d in decided if d.queue_ms is not None]
    document: dict[str, Any] = {"total_ms": round(max(d.total_ms for d in decided), 3)}
    if queued:
        document["queue_ms"] = round(min(queued), 3)
    return {**document, "evaluated_tokens": sum(d.evaluated_tokens for d in decided),
            "cached_tokens": sum(d.cached_tokens for d in decided)}


def choice_confidence(probabilities: Sequence[float]) -> float:
    """SPEC 4.5: how far the top probability is from uniform, 0 (uniform) to 1 (certain)."""
    n = len(probabilities)
    return min(1.0, max(0.0, (max(probabilities) - 1 / n) / (1 - 1 / n)))


def score_confidence(probabilities: Sequence[float]) -> float:
    """SPEC 4.5: 1 - the expected distance from the most likely level, over the uniform distribution's."""
    n = len(probabilities)
    mode = max(range(n), key=lambda i: probabilities[i])
    uniform = math.fsum(abs(i - (n - 1) / 2) for i in range(n)) / n
    spread = math.fsum(p * abs(i - mode) for i, p in enumerate(probabilities))
    return min(1.0, max(0.0, 1 - spread / uniform))


def _extras(answer: Decided) -> dict[str, Any]:
    question = answer.question
    return {"x_option_logits": {a.id: logit for a, logit in zip(question.answers, answer.scores.option_logits,
                                                                   strict=True)},
            "x_warnings": answer.scores.warnings,
            "x_calibration": answer.scores.calibration,
            "x_prompt": {"version": answer.prompt.version, "sha256": answer.prompt.sha256},
            "x_timing": timing_document(answer)}


def _answer(answer: Decided, asked: Any) -> dict[str, Any]:
    question, probabilities = answer.question, answer.scores.probabilities
    ids = [a.id for a in question.answers]
    if question.kind is Kind.NOUL:
        return {"type": "noul", "noul": probabilities[ids.index("true")], **_extras(answer)}
    if question.kind is Kind.SCORE:
        return {"type": "score", "score": math.fsum(i * p for i, p in enumerate(probabilities)),
                "legend": dict(zip(ids, asked.criteria, strict=True)),  # the levels as the caller wrote them
                "probabilities": dict(zip(ids, probabilities, strict=True)),
                "confidence": score_confidence(probabilities), **_extras(answer)}
    top = max(range(len(ids)), key=lambda i: probabilities[i])  # a tie goes to the option listed first
    return {"type": "choice", "choice": ids[top], "probabilities": dict(zip(ids, probabilities, strict=True)),
            "confidence": choice_confidence(probabilities), **_extras(answer)}


def encode(document: dict[str, Any]) -> bytes:
    """UTF-8 JSON; option names and ids stay byte for byte what the caller sent (they are lookup keys)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
