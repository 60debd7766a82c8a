"""Request bytes -> a validated decision request, or a 400 that names the field.

JSON is parsed strictly before pydantic sees it: duplicate keys, NaN/Infinity,
absurd nesting and unpaired surrogates are refused here, because each would
otherwise reach the tokenizer as something the caller did not mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ..core.question import Answer, Asked, Debias, Kind, Question, Scoring
from ..errors import RequestError
from .strict_json import load_json

MAX_OPTIONS = 16
MIN_OPTIONS = 2
MAX_ID_CHARS = 128
MAX_DECISIONS = 256  # in one application/json request; JSON Lines batches are bounded by the body size only
STATE_TYPE_ERRORS = frozenset({"string_type", "dict_type", "list_type"})  # pydantic's, one per union member
MANY_KEYS = frozenset({"decisions", "state", "temperature", "debias", "scoring"})


NonEmpty = Annotated[str, Field(min_length=1)]
Identifier = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class Option(BaseModel):
    model_config = _STRICT
    id: Identifier
    description: NonEmpty


class Decision(BaseModel):
    model_config = _STRICT
    id: Identifier
    state: NonEmpty | dict[str, Any] | list[Any]
    question: NonEmpty
    options: Annotated[list[Option], Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS)]

    @field_validator("state")
    @classmethod
    def _state_not_empty(cls, state: object) -> object:
        if isinstance(state, dict | list) and not state:
            raise ValueError("must not be an empty object or array")
        return state

    @field_validator("options")
    @classmethod
    def _unique_ids(cls, options: list[Option]) -> list[Option]:
        seen: set[str] = set()
        for option in options:
            if option.id in seen:
                raise ValueError(f"option id {option.id!r} appears more than once")
            seen.add(option.id)
        return options


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    decision: Decision
    temperature: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)] = 1.0  # no "0.5", no true
    scoring: Scoring | None = None  # before debias: debias is checked against it
    debias: Debias = Debias.NONE

    @field_validator("debias")
    @classmethod
    def _debias_is_for_letters(cls, debias: Debias, info: ValidationInfo) -> Debias:
        scoring = info.data.get("scoring")
        if debias is Debias.PERMUTE and scoring not in (None, Scoring.LETTERS):
            raise ValueError(f"permute applies to letters; {scoring.value} scores every option's text in a "
                             "canonical order, so its scores never depend on the order")
        return debias

    def method(self, default: str) -> str:
        """The scoring method: the request's, else letters when it asks for permute (a letters knob), else
        the endpoint's default."""
        if self.scoring is not None:
            return self.scoring.value
        return Scoring.LETTERS.value if self.debias is Debias.PERMUTE else default

    def to_question(self, default_method: str) -> Question:
        """The decision as the core's question: its options are the answers, under their ids."""
        decision = self.decision
        return Question(state=decision.state, criterion=decision.question,
                        answers=tuple(Answer(o.id, o.description) for o in decision.options),
                        method=Scoring(self.method(default_method)), kind=Kind.DECISION, debias=self.debias,
                        temperature=self.temperature,
                        asked=Asked("choice", "decision", decision.question,
                                    {o.id: o.description for o in decision.options}))


def _field_path(document: Any, error: Any) -> str:
    """The user's own path to the offending value (pydantic adds union tags the caller never wrote)."""
    node, path = document, ""
    location = tuple(error["loc"])
    for index, part in enumerate(location):
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            path, node = f"{path}[{part}]", node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            path, node = f"{path}.{part}" if path else part, node[part]
        elif error["type"] == "missing" and index == len(location) - 1:
            path = f"{path}.{part}" if path else str(part)
    return path


def validate_request(document: Any, where: Callable[[str], str] = lambda path: path) -> DecisionRequest:
    """The schema; `where` maps a path in `document` to the caller's own (a batch item's place in its batch)."""
    if not isinstance(document, dict):
        raise RequestError("invalid_request", "body must be a JSON object with a 'decision' key")
    try:
        return DecisionRequest.model_validate(document)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        field = where(_field_path(document, first))
        message = first["msg"].removeprefix("Value error, ")
        if first["loc"][:2] == ("decision", "state") and first["type"] in STATE_TYPE_ERRORS:
            message = "must be a non-empty string, or a non-empty JSON object or array"
        raise RequestError("invalid_request", f"{field or 'body'}: {message}", field or None) from None


def parse_request(body: bytes) -> DecisionRequest:
    """One decision: strict JSON, then the schema; raises RequestError with the offending field."""
    return validate_request(load_json(body))


def _item_path(index: int, inherited_state: bool) -> Callable[[str], str]:
    def where(path: str) -> str:
        if path == "decision.state" and inherited_state:
            return "state"
        if path == "decision" or path.startswith("decision."):
            return f"decisions[{index}]" + path.removeprefix("decision")
        return path
    return where


def validate_many(document: dict[str, Any]) -> list[DecisionRequest]:
    """`{"decisions": [...], "state"?, knobs}`: several decisions in one request, the state given once or each.

    Each becomes exactly the single request it stands for (same knobs), so its answer is the same numbers.
    """
    unknown = sorted(set(document) - MANY_KEYS)
    if unknown:
        raise RequestError("invalid_request", f"{unknown[0]}: unknown field next to 'decisions'", unknown[0])
    items = document["decisions"]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_DECISIONS:
        raise RequestError("invalid_request", f"decisions: expected a list of 1 to {MAX_DECISIONS} decisions",
                           "decisions")
    knobs = {key: value for key, value in document.items() if key not in ("decisions", "state")}
    requests = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise RequestError("invalid_request", f"decisions[{index}]: expected a decision object",
                               f"decisions[{index}]")
        inherited = "state" not in item and "state" in document
        decision = {**item, "state": document["state"]} if inherited else item
        requests.append(validate_request({"decision": decision, **knobs}, _item_path(index, inherited)))
    return requests


def validate_document(document: Any) -> tuple[list[DecisionRequest], bool]:
    """A JSON document: one decision, or several (`decisions`); True when several."""
    if isinstance(document, dict) and "decisions" in document and "decision" not in document:
        return validate_many(document), True
    return [validate_request(document)], False


def parse_body(body: bytes) -> tuple[list[DecisionRequest], bool]:
    """An application/json body: one decision, or several (`decisions`); True when several."""
    return validate_document(load_json(body))
