"""The OpenAI Decisions door: `POST /v1/decisions` (and SageMaker's `/invocations` with such a body), in the
openai SDK's shapes (`openai.types.decision`, SDK 3.51.0).

A `predicate` is the core's yes/no question, a `choice` and a `score` the same questions the System One door builds
(`core.typed_questions`), so the same question gives the same numbers through either door. Answers come back as a
list in question order, each with its `name` (null when none was given). A question whose own prompt does not fit
the context is answered with a `refusal` while the others are answered; an input that alone does not fit is a 400
`context_length_exceeded`. Other failures answer the whole request in OpenAI's error shape,
`{"error": {"message", "type", "param", "code"}}`; a client's mistake is never a 5xx.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from ..core.decided import Decided
from ..core.identity import ModelIdentity
from ..core.question import Kind, Question, Scoring
from ..core.question_frames import DEFAULT_FRAMES, Frames
from ..core.typed_questions import YES, Asking, Option
from ..errors import PromptTooLongError, RequestError, ServiceError
from .openai_input import read, state
from .openai_schema import ChoiceQuestion, DecisionsRequest, DecisionsValidationError, Predicate, validate
from .response import timing_document
from .systemone_contract import (
    Rendered,
    choice_confidence,
    encode,
    input_tokens,
    rendered_response,
    request_timing,
    score_confidence,
)

ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
               404: "invalid_request_error", 405: "invalid_request_error", 408: "timeout",
               413: "invalid_request_error", 415: "invalid_request_error", 429: "rate_limit_error",
               500: "server_error", 503: "server_error", 504: "timeout"}
OVERLOADED = 429  # what OpenAI's clients retry (with Retry-After) on /v1/decisions
SAGEMAKER_BUSY = 503  # SageMaker's /invocations keeps its own contract
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
OWNER = "semif-sagemaker"  # `owned_by` in the models list: this endpoint, not a provider
OPTION_FIELD = re.compile(r"^decision\.options\[(\d+)\]")


def error_document(status: int, message: str, param: str | None = None, code: str | None = None,
                   error_type: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type or ERROR_TYPES.get(status, "invalid_request_error"),
                      "param": param or None, "code": code}}


def _param(field: str | None, index: int | None, question: Question | None) -> str | None:
    """A core error's field (SemIf's names: decision.state, decision.question, decision.options[i]) as OpenAI's
    `param`."""
    if not field:
        return None
    if field == "decision.state":
        return "input"
    if index is None:
        return field
    if field == "decision.question":
        return f"questions[{index}].instructions"
    match = OPTION_FIELD.match(field)
    if match and question is not None:
        items = "levels" if question.kind is Kind.SCORE else "choices"
        return f"questions[{index}].{items}[{match[1]}]"
    return f"questions[{index}]"


def failure(error: BaseException, request_id: str, *, overload_status: int = OVERLOADED, index: int | None = None,
            question: Question | None = None) -> Rendered:
    """Any failure in OpenAI's error shape."""
    if isinstance(error, DecisionsValidationError):
        return Rendered(400, error_document(400, str(error), error.param, error.code), {})
    if isinstance(error, PromptTooLongError):
        return Rendered(400, error_document(400, error.message, _param(error.field, index, question) or "input",
                                            CONTEXT_LENGTH_EXCEEDED), {})
    if isinstance(error, RequestError):
        code = {401: "invalid_api_key", 404: "model_not_found"}.get(error.status, error.code)
        return Rendered(error.status, error_document(error.status, error.message,
                                                     _param(error.field, index, question), code), {})
    if isinstance(error, ServiceError):
        status = overload_status if error.code == "queue_full" else error.status
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else {}
        return Rendered(status, error_document(status, error.message, None, error.code), headers)
    return Rendered(500, error_document(500, f"internal error; request id {request_id}", None, "internal_error"), {})


def _option_ids(question: ChoiceQuestion) -> list[str]:
    """The core's answer ids: a string value is its own id (as a System One option name), a boolean its JSON text
    unless a string value of the question already spells it."""
    strings = {choice.value for choice in question.choices if isinstance(choice.value, str)}
    ids = []
    for choice in question.choices:
        text = _value_text(choice.value)
        ids.append(text if isinstance(choice.value, str) or text not in strings else f"{text}\u0000boolean")
    return ids


def _value_text(value: str | bool) -> str:
    return value if isinstance(value, str) else ("true" if value else "false")


def to_questions(request: DecisionsRequest, default_method: str, frames: Frames = DEFAULT_FRAMES) -> list[Question]:
    asking = Asking(state(request.input), request.x_scoring or Scoring(default_method), request.x_temperature, frames,
                    request.prompt_cache_key or "")
    found = []
    for index, question in enumerate(request.questions):
        instructions = read(question.instructions)
        name = question.name or f"question_{index}"
        if isinstance(question, Predicate):
            found.append(asking.yes_no(instructions, name=name))
        elif isinstance(question, ChoiceQuestion):
            options = [Option(oid, _value_text(choice.value), choice.description)
                       for oid, choice in zip(_option_ids(question), question.choices, strict=True)]
            found.append(asking.choice(instructions, options, name))
        else:
            found.append(asking.score(instructions, [level.label if level.description is None
                                                     else f"{level.label}: {level.description}"
                                                     for level in question.levels], name))
    return found


@dataclass(frozen=True)
class DecisionsTicket:
    """A parsed request: its questions in order, ready for the core."""

    request: DecisionsRequest
    questions: tuple[Question, ...]
    identity: ModelIdentity
    writes_prefix: bool = True  # whether a computed input is saved to the host cache (`cache_write_tokens`)

    @classmethod
    def parse(cls, document: Any, default_method: str, identity: ModelIdentity, frames: Frames = DEFAULT_FRAMES,
              writes_prefix: bool = True) -> DecisionsTicket:
        request = validate(document)
        if not identity.serves(request.model):
            raise RequestError("model_not_found", f"the model {request.model!r} does not exist on this endpoint; it "
                               f"serves {identity.name!r} (GET /v1/models lists its names)", "model", status=404)
        return cls(request, tuple(to_questions(request, default_method, frames)), identity, writes_prefix)

    def log_fields(self, answers: Sequence[Decided | BaseException] = ()) -> dict[str, Any]:
        """The access-log line's fields; the caller's `safety_identifier` beside the request id (never a metric
        dimension: one per end user)."""
        fields = {"contract": "openai_decisions", "questions": len(self.questions),
                  "scoring": self.questions[0].method.value}
        if self.request.safety_identifier is not None:
            fields["safety_identifier"] = self.request.safety_identifier
        return fields

    def render(self, answers: Sequence[Decided | BaseException], request_id: str,
               overload_status: int = OVERLOADED) -> Rendered:
        """Every answer, a refusal where a question's own prompt does not fit, or the first other failure."""
        for index, (question, answer) in enumerate(zip(self.questions, answers, strict=True)):
            if not isinstance(answer, Decided) and not _refusable(answer):
                return failure(answer, request_id, overload_status=overload_status, index=index, question=question)
        decided = [a for a in answers if isinstance(a, Decided)]
        rendered = [_answer(answer, asked) if isinstance(answer, Decided) else _refusal(answer, asked)
                    for asked, answer in zip(self.request.questions, answers, strict=True)]
        document: dict[str, Any] = {"answers": rendered, "model": self.identity.name,
                                    "usage": self.usage(decided), "x_scoring": decided[0].method}
        if decided:
            document["x_timing"] = request_timing(decided)
        return Rendered(200, document, {})

    def usage(self, decided: Sequence[Decided]) -> dict[str, Any]:
        """Tokens as OpenAI counts them: the shared input once; `cached_tokens` what the engine's caches really
        served of them (the input, when it was held or restored before the request, and each repeated answer);
        `cache_write_tokens` the input computed here and saved for the next request."""
        if not decided:
            return _usage(0, 0, 0)
        total = input_tokens(decided)
        prefixes = [d.tokens.prefix for d in decided]
        if None in prefixes:  # no shared opening counted: what each question's own count says was reused
            return _usage(total, min(total, sum(min(d.cached_tokens, d.tokens.read) for d in decided)), 0)
        prefix = max(p for p in prefixes if p is not None)
        held = min(prefix, *(d.cached_tokens for d in decided))  # the first question to run met the cache as it was
        cached = held + sum(max(0, min(d.cached_tokens, d.tokens.read) - prefix) for d in decided)
        return _usage(total, min(cached, total), prefix - held if self.writes_prefix else 0)

    def respond(self, answers: Sequence[Decided | BaseException], request_id: str, *, invocations: bool) -> Response:
        """The answer on its route (overload: 429) or on SageMaker's /invocations (503, what its clients retry)."""
        return rendered_response(self.render(answers, request_id, SAGEMAKER_BUSY if invocations else OVERLOADED))

    def line(self, answers: Sequence[Decided | BaseException], number: int, request_id: str) -> bytes:
        rendered = self.render(answers, request_id, overload_status=SAGEMAKER_BUSY)
        return encode(rendered.document if rendered.status == 200 else {**rendered.document, "line": number})


def refused_line(error: BaseException, number: int, request_id: str) -> bytes:
    return encode({**failure(error, request_id).document, "line": number})


def _usage(total: int, cached: int, written: int) -> dict[str, Any]:
    return {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": total}


def _refusable(error: BaseException) -> bool:
    """A question whose own part does not fit the context is refused; an input that alone does not is an error."""
    return isinstance(error, PromptTooLongError) and error.field != "decision.state"


def _refusal(error: BaseException, asked: Any) -> dict[str, Any]:
    assert isinstance(error, PromptTooLongError)
    return {"type": "refusal", "name": asked.name,
            "x_reason": {"code": CONTEXT_LENGTH_EXCEEDED, "message": error.message}}


def _extras(answer: Decided) -> dict[str, Any]:
    return {"x_option_logits": list(answer.scores.option_logits), "x_warnings": answer.scores.warnings,
            "x_calibration": answer.scores.calibration, "x_timing": timing_document(answer)}


def _answer(answer: Decided, asked: Any) -> dict[str, Any]:
    question, probabilities = answer.question, answer.scores.probabilities
    if question.kind is Kind.NOUL:
        yes = probabilities[[a.id for a in question.answers].index(YES)]
        return {"type": "predicate", "name": asked.name, "probability": yes, **_extras(answer)}
    if question.kind is Kind.SCORE:
        return {"type": "score", "name": asked.name, "score": math.fsum(i * p for i, p in enumerate(probabilities)),
                "confidence": score_confidence(probabilities),
                "probabilities": [{"value": index, "label": level.label, "probability": p}
                                  for index, (level, p) in enumerate(zip(asked.levels, probabilities, strict=True))],
                **_extras(answer)}
    values = [choice.value for choice in asked.choices]
    top = max(range(len(values)), key=lambda i: probabilities[i])  # a tie goes to the choice listed first
    return {"type": "choice", "name": asked.name, "choice": values[top], "confidence": choice_confidence(probabilities),
            "probabilities": [{"value": value, "probability": p} for value, p in zip(values, probabilities,
                                                                                    strict=True)],
            **_extras(answer)}


def model_list(identity: ModelIdentity) -> dict[str, Any]:
    """OpenAI's `GET /v1/models` (`models.list()` reads `data`): the served model and its aliases."""
    created = int(datetime.datetime.fromisoformat(identity.release_date or "1970-01-01")
                  .replace(tzinfo=datetime.UTC).timestamp())
    names = [identity.name, *sorted(identity.aliases - {identity.name})]
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": OWNER}
                                       for name in names]}
