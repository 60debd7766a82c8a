"""A validated System One question -> the core's `Question`: what the model reads and which answers it scores.

- choice: one answer per option, under the option's name (the caller's lookup key, kept byte for byte); the model
  reads the option's description, or its name when the description is null.
- noul: the answers "true" and "false", read as the model's yes and no, each carrying the criteria's description
  of that outcome when the question gives one; the criterion is the instructions, or, without them, the described
  outcome put as a question. p(yes) is the softmax of the two: a two-answer choice whose bias a calibration can
  correct (Platt scaling), which a temperature alone cannot.
- score: one answer per level, under "0".."n-1" in the order given (lowest first); the model reads the level's
  own text.

Structured text (an object or an array) is read as canonical JSON. How each type is worded was chosen by
measurement on labelled System One cases (README, "System One API"); `Frames` names the wordings compared.
"""

from __future__ import annotations

from typing import Any

from ..core.question import Answer, Kind, Question, Scoring, canonical_state
from ..core.question_frames import DEFAULT_FRAMES, Frames
from .systemone_schema import ChoiceQuestion, NoulQuestion, ScoreQuestion, SystemOneRequest, Text


def as_text(value: Text) -> str:
    """What the model reads of a caller's text: a string as it is, a structure as canonical JSON."""
    return value if isinstance(value, str) else canonical_state(value)


NOUL_WITHOUT_INSTRUCTIONS = "Does the evidence show the described outcome?"


def _choice(question: ChoiceQuestion, frames: Frames) -> tuple[Any, tuple[Answer, ...]]:
    answers = []
    for name, description in question.criteria.items():
        if description is None:
            text = name
        elif frames.choice == "name_description":
            text = f"{name}: {as_text(description)}"
        else:
            text = as_text(description)
        answers.append(Answer(name, text))
    return question.instructions if question.instructions is not None else "Which option applies?", tuple(answers)


def _noul(question: NoulQuestion, frames: Frames) -> tuple[Any, tuple[Answer, ...]]:
    criteria = question.criteria
    true = criteria.true if criteria is not None else None
    false = criteria.false if criteria is not None else None
    # Without instructions the schema guarantees a described outcome: the answers then say what yes and no mean.
    criterion: Any = question.instructions if question.instructions is not None else NOUL_WITHOUT_INSTRUCTIONS
    if frames.noul == "yes_no":
        return criterion, (Answer("true", "Yes"), Answer("false", "No"))
    yes = "Yes" if true is None else f"Yes: {as_text(true)}"
    no = "No" if false is None else f"No: {as_text(false)}"
    return criterion, (Answer("true", yes), Answer("false", no))


def _score(question: ScoreQuestion, frames: Frames) -> tuple[Any, tuple[Answer, ...]]:
    levels = [as_text(level) for level in question.criteria]
    if frames.score == "numbered":
        levels = [f"{index}: {text}" for index, text in enumerate(levels)]
    criterion = question.instructions if question.instructions is not None else "Which level applies?"
    return criterion, tuple(Answer(str(index), text) for index, text in enumerate(levels))


def to_questions(request: SystemOneRequest, default_method: str,
                 frames: Frames = DEFAULT_FRAMES) -> list[tuple[str, Question]]:
    """Every question of the request, by its id, in request order; each is scored as if it were alone."""
    method = request.x_scoring or Scoring(default_method)
    found = []
    for qid, question in request.questions.items():
        if isinstance(question, ChoiceQuestion):
            kind, (criterion, answers) = Kind.CHOICE, _choice(question, frames)
        elif isinstance(question, NoulQuestion):
            kind, (criterion, answers) = Kind.NOUL, _noul(question, frames)
        elif isinstance(question, ScoreQuestion):
            kind, (criterion, answers) = Kind.SCORE, _score(question, frames)
        else:  # refused by the schema's validation (box)
            raise TypeError(f"question {qid!r} of type {question.type} cannot be scored")
        found.append((qid, Question(state=request.state, criterion=criterion, answers=answers, method=method,
                                    kind=kind, temperature=request.x_temperature)))
    return found
