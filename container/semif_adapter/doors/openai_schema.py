"""OpenAI Decisions request documents -> validated questions, or the 400 error OpenAI's clients parse.

The shape is the openai SDK's (`openai.types.decision_create_params`, SDK 3.63.0): `model`, `input` (a string, or
an ordered list of messages and tool calls: `openai_input`), `questions` (1-400 typed `predicate`, `choice` and
`score` questions, each with an optional `name`), `prompt_cache_key`, `prompt_cache_options`, `safety_identifier`.
Choice values are typed: the string "true" and the boolean true are two values. Unknown fields are ignored (clients
add their own); our own knobs are `x_`-prefixed. A problem is reported as OpenAI does, with `param` naming the field:
`questions[2].choices[0].value`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from ..core.question import Scoring
from .openai_input import ITEM_MODELS, Content, ImagePart, Item, image_param, item_problem

MIN_QUESTIONS, MAX_QUESTIONS = 1, 400
MIN_CHOICES, MAX_CHOICES = 2, 255
MIN_LEVELS, MAX_LEVELS = 2, 10
LETTERS_MAX_CHOICES = 16  # one single-token slot letter per option (A..P)
_OPEN = ConfigDict(extra="ignore", frozen=True)

Value = StrictStr | StrictBool


class Predicate(BaseModel):
    model_config = _OPEN
    type: Literal["predicate"]
    instructions: Content
    name: StrictStr | None = None


class Choice(BaseModel):
    model_config = _OPEN
    value: Value
    description: StrictStr | None = None


class ChoiceQuestion(BaseModel):
    model_config = _OPEN
    type: Literal["choice"]
    instructions: Content
    choices: Annotated[list[Choice], Field(min_length=MIN_CHOICES, max_length=MAX_CHOICES)]
    name: StrictStr | None = None


class Level(BaseModel):
    model_config = _OPEN
    label: StrictStr
    description: StrictStr | None = None


class ScoreQuestion(BaseModel):
    model_config = _OPEN
    type: Literal["score"]
    instructions: Content
    levels: Annotated[list[Level], Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS)]
    name: StrictStr | None = None


AnyQuestion = Annotated[Predicate | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]


class PromptCacheOptions(BaseModel):
    """Read and checked, then ignored: the adapter's caches have no breakpoints or lifetimes to set
    (docs/openai-decisions.md)."""

    model_config = _OPEN
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] = "30m"


class DecisionsRequest(BaseModel):
    model_config = _OPEN
    model: StrictStr
    input: StrictStr | Annotated[list[Item], Field(min_length=1)]
    questions: Annotated[list[AnyQuestion], Field(min_length=MIN_QUESTIONS, max_length=MAX_QUESTIONS)]
    prompt_cache_key: StrictStr | None = None  # partitions the adapter's caches (core.question.Question.partition)
    prompt_cache_options: PromptCacheOptions | None = None
    safety_identifier: StrictStr | None = None  # written to the request's access-log line, nowhere else
    x_scoring: Scoring | None = None
    x_temperature: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)] = 1.0


class DecisionsValidationError(ValueError):
    """A request the contract refuses: OpenAI's 400 `invalid_request_error`, naming the parameter."""

    def __init__(self, param: str, message: str, code: str = "invalid_value") -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.param, self.code = param, code


FIELDS = frozenset(name for model in (DecisionsRequest, Predicate, ChoiceQuestion, Choice, ScoreQuestion, Level,
                                      PromptCacheOptions, *ITEM_MODELS) for name in model.model_fields)


def param_of(loc: tuple[Any, ...]) -> str:
    """pydantic's location as OpenAI's `param` (`questions[2].choices[0].value`); union tags are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in FIELDS:
            out += f".{part}" if out else part
    return out


def _readable(error: Any) -> DecisionsValidationError:
    param, kind = param_of(tuple(error["loc"])), error["type"]
    message = error["msg"].removeprefix("Value error, ")
    if kind == "union_tag_invalid" and param.endswith("]"):
        message = f"type must be one of {error['ctx']['expected_tags']}, not {error['ctx']['tag']!r}"
        param += ".type"
    code = {"missing": "missing_required_parameter", "too_short": "array_too_short",
            "too_long": "array_too_long"}.get(kind, "invalid_value" if param else "invalid_type")
    return DecisionsValidationError(param, message, code)


def _value_key(value: str | bool) -> tuple[type, str | bool]:
    return (type(value), value)


def _problem(request: DecisionsRequest) -> DecisionsValidationError | None:
    """What pydantic cannot say: images on a text-only model, duplicate choice values, letters' option limit."""
    if not isinstance(request.input, str) and (where := image_param(request.input)) is not None:
        return DecisionsValidationError(where, "input_image parts are not supported: this endpoint's model reads "
                                        "text only", "unsupported_content")
    for index, question in enumerate(request.questions):
        if (image := _image_part(question.instructions)) is not None:
            return DecisionsValidationError(f"questions[{index}].instructions[{image}]", "input_image parts are not "
                                            "supported: this endpoint's model reads text only", "unsupported_content")
        if isinstance(question, ChoiceQuestion):
            seen: set[tuple[type, str | bool]] = set()
            for number, choice in enumerate(question.choices):
                if _value_key(choice.value) in seen:
                    return DecisionsValidationError(f"questions[{index}].choices[{number}].value",
                                                    f"duplicate choice value {choice.value!r}: each choice must be "
                                                    "unique", "duplicate_value")
                seen.add(_value_key(choice.value))
            if request.x_scoring is Scoring.LETTERS and len(question.choices) > LETTERS_MAX_CHOICES:
                return DecisionsValidationError(f"questions[{index}].choices", f"x_scoring letters scores at most "
                                                f"{LETTERS_MAX_CHOICES} choices; pmi and likelihood up to "
                                                f"{MAX_CHOICES}", "array_too_long")
    return None


def _image_part(content: str | list[Any]) -> int | None:
    if isinstance(content, str):
        return None
    return next((index for index, part in enumerate(content) if isinstance(part, ImagePart)), None)


def validate(document: Any) -> DecisionsRequest:
    """The request, or DecisionsValidationError naming the first problem (OpenAI reports one per error)."""
    if not isinstance(document, dict):
        raise DecisionsValidationError("", "the request body must be a JSON object", "invalid_type")
    if (item := item_problem(document)) is not None:
        raise DecisionsValidationError(*item)
    try:
        request = DecisionsRequest.model_validate(document)
    except ValidationError as error:  # a union reports once per member: the deepest location is the one meant
        errors = error.errors(include_url=False)
        raise _readable(max(errors, key=lambda e: len(param_of(tuple(e["loc"]))))) from None
    problem = _problem(request)
    if problem is not None:
        raise problem
    return request


def speaks_decisions(document: Any) -> bool:
    """A body with `input` and a list of `questions` is an OpenAI Decisions request (System One's are an object)."""
    return isinstance(document, dict) and "input" in document and isinstance(document.get("questions"), list)
