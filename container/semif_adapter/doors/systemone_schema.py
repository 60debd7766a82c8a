"""System One request documents -> validated questions, or the 422 `detail` list the ecosystem's clients parse.

The shape is jevcompat SPEC 0.1's (the TypeSafe API's): one `state`, typed questions under any non-empty ids,
text as a string, an object or an array. A `state` that is a list of chat messages is a conversation, read as
llama.cpp's message state is (`core.conversation`). Unknown top-level fields are ignored (clients add their own);
our own knobs are `x_`-prefixed. Errors come in FastAPI's shape: `{"loc": ["body", ...], "msg", "type"}`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from ..core.conversation import ConversationError, message_state
from ..core.question import Scoring

MIN_OPTIONS, MAX_OPTIONS = 2, 255
MIN_LEVELS, MAX_LEVELS = 2, 10
MAX_QUESTIONS = 64  # per request: each is scored on its own, so a request's time grows with the count
LETTERS_MAX_OPTIONS = 16  # one single-token slot letter per option (A..P)

Text = str | dict[str, Any] | list[Any]
Name = Annotated[str, StringConstraints(min_length=1)]
_QUESTION = ConfigDict(extra="ignore", frozen=True)


class NoulCriteria(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    true: Text | None = None
    false: Text | None = None


class NoulQuestion(BaseModel):
    model_config = _QUESTION
    type: Literal["noul"]
    instructions: Text | None = None
    criteria: NoulCriteria | None = None


class ChoiceQuestion(BaseModel):
    model_config = _QUESTION
    type: Literal["choice"]
    instructions: Text | None = None
    criteria: Annotated[dict[Name, Text | None], Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS)]


class ScoreQuestion(BaseModel):
    model_config = _QUESTION
    type: Literal["score"]
    instructions: Text | None = None
    criteria: Annotated[list[Text], Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS)]


class BoxQuestion(BaseModel):
    """Parsed so that it can be refused with a reason: a box is located in an image."""

    model_config = _QUESTION
    type: Literal["box"]
    instructions: Text | None = None


AnyQuestion = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion | BoxQuestion, Field(discriminator="type")]


class SystemOneRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    model: str | None = None
    state: Text
    questions: Annotated[dict[Name, AnyQuestion], Field(min_length=1, max_length=MAX_QUESTIONS)]
    assets: dict[str, Any] | None = None  # refused below: this endpoint's models read text only
    x_scoring: Scoring | None = None
    x_temperature: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)] = 1.0

    @field_validator("state")
    @classmethod
    def _state_not_empty(cls, state: Text) -> Text:
        if not state:
            raise ValueError("state must not be empty")
        return state


def detail(loc: list[Any], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": kind}


class SystemOneValidationError(ValueError):
    """A request the contract refuses: a 422 with FastAPI's `detail` list (or another status, e.g. 413)."""

    def __init__(self, details: list[dict[str, Any]], status: int = 422) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, d['loc'][1:]))}: {d['msg']}" for d in details))
        self.details, self.status = details, status


def _readable(error: Any, document: Any) -> dict[str, Any]:
    """pydantic's error with the message a caller can act on where pydantic's is obscure."""
    loc = list(error["loc"])
    msg = error["msg"].removeprefix("Value error, ")
    if error["type"] == "list_type" and len(loc) == 4 and loc[0] == "questions" and loc[2] == "score":
        msg = ('score criteria must be an array of levels, lowest first (the map form {"0": ..., "1": ...} is '
               "not accepted: a map does not say the levels' order)")
    return detail(loc, msg, error["type"])


def validate(document: Any) -> SystemOneRequest:
    """The request, or SystemOneValidationError listing every problem pydantic found (as FastAPI would)."""
    if not isinstance(document, dict):
        raise SystemOneValidationError([detail([], "Input should be a valid dictionary", "dict_type")])
    try:
        request = SystemOneRequest.model_validate(document)
    except ValidationError as error:
        raise SystemOneValidationError([_readable(e, document) for e in error.errors(include_url=False)]) from None
    problems = []
    try:  # a list of chat messages is a conversation (core.conversation)
        request = request.model_copy(update={"state": message_state(request.state)})
    except ConversationError as error:
        problems.append(detail(["state", *error.loc], error.message, "invalid_conversation"))
    if request.assets:
        problems.append(detail(["assets"], "image assets are not supported: this endpoint's model reads text only",
                               "unsupported_asset"))
    for qid, question in request.questions.items():
        where = ["questions", qid, question.type]
        if isinstance(question, BoxQuestion):
            problems.append(detail(where, "box questions locate a region of an image; this endpoint's model reads "
                                          "text only", "unsupported_question_type"))
        elif isinstance(question, NoulQuestion) and question.instructions is None and not _described(question):
            problems.append(detail(where, "a noul needs instructions or a described outcome (criteria.true or "
                                          "criteria.false)", "missing"))
        elif request.x_scoring is Scoring.LETTERS and isinstance(question, ChoiceQuestion) \
                and len(question.criteria) > LETTERS_MAX_OPTIONS:
            problems.append(detail([*where, "criteria"], f"x_scoring letters scores at most {LETTERS_MAX_OPTIONS} "
                                   f"options (one slot letter each); pmi and likelihood score up to {MAX_OPTIONS}",
                                   "too_long"))
    if problems:
        raise SystemOneValidationError(problems)
    return request


def _described(question: NoulQuestion) -> bool:
    criteria = question.criteria
    return criteria is not None and (criteria.true is not None or criteria.false is not None)
