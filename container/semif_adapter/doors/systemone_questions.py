"""A validated System One question -> the core's `Question` (`core.typed_questions` says how each type is read).

- choice: one answer per option, under the option's name (the caller's lookup key, kept byte for byte).
- noul: the answers "true" and "false"; the criterion is the instructions, or, without them, the described outcome
  put as a question.
- score: one answer per level, under "0".."n-1" in the order given.
"""

from __future__ import annotations

from ..core.question import Question, Scoring
from ..core.question_frames import DEFAULT_FRAMES, Frames
from ..core.typed_questions import Asking, Option
from .systemone_schema import ChoiceQuestion, NoulQuestion, ScoreQuestion, SystemOneRequest


def to_questions(request: SystemOneRequest, default_method: str,
                 frames: Frames = DEFAULT_FRAMES) -> list[tuple[str, Question]]:
    """Every question of the request, by its id, in request order; each is scored as if it were alone."""
    asking = Asking(request.state, request.x_scoring or Scoring(default_method), request.x_temperature, frames)
    found = []
    for qid, question in request.questions.items():
        if isinstance(question, ChoiceQuestion):
            options = [Option(name, name, description) for name, description in question.criteria.items()]
            asked = asking.choice(question.instructions, options, qid)
        elif isinstance(question, NoulQuestion):
            criteria = question.criteria
            asked = asking.yes_no(question.instructions, criteria.true if criteria else None,
                                  criteria.false if criteria else None, qid)
        elif isinstance(question, ScoreQuestion):
            asked = asking.score(question.instructions, question.criteria, qid)
        else:  # refused by the schema's validation (box)
            raise TypeError(f"question {qid!r} of type {question.type} cannot be scored")
        found.append((qid, asked))
    return found
