"""How a typed question (choice, yes/no, score) becomes the core's `Question`, whichever door it came through.

Every door that asks these types builds its questions here, so the same question asked through System One's
`/v1/systemone` and OpenAI's `/v1/decisions` is the same `Question` and gets the same numbers, bit for bit:

- choice: one answer per option, under the option's id; the model reads the option's description, or its name
  when it has none (`Frames.choice` can put the name before the description).
- yes/no (System One's noul, OpenAI's predicate): the answers "true" and "false", read as the model's yes and no,
  each carrying a description of that outcome when the question gives one. p(yes) is the softmax of the two: a
  two-answer choice whose bias a calibration can correct (Platt scaling), which a temperature alone cannot.
- score: one answer per level, under "0".."n-1" in the order given (lowest first); the model reads the level's text.

Structured text (an object or an array) is read as canonical JSON. The wordings were chosen by measurement on
labelled cases (docs/quality/systemone.md); `Frames` names the ones compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .question import Answer, Asked, Kind, Question, Scoring, canonical_state
from .question_frames import Frames

NOUL_WITHOUT_INSTRUCTIONS = "Does the evidence show the described outcome?"
CHOICE_WITHOUT_INSTRUCTIONS = "Which option applies?"
SCORE_WITHOUT_INSTRUCTIONS = "Which level applies?"
YES, NO = "true", "false"  # the yes/no answers' ids


def as_text(value: Any) -> str:
    """What the model reads of a caller's text: a string as it is, a structure as canonical JSON."""
    return value if isinstance(value, str) else canonical_state(value)


@dataclass(frozen=True)
class Option:
    """A choice's option: the id the door maps answers back by, the name the caller knows it by, and its
    description (None: the model reads the name)."""

    id: str
    name: str
    description: Any = None


@dataclass(frozen=True)
class Asking:
    """What every question of a request shares: the state, the method, the temperature and the caches' partition."""

    state: Any
    method: Scoring
    temperature: float
    frames: Frames
    partition: str = ""

    def choice(self, instructions: Any, options: Sequence[Option], name: str = "choice") -> Question:
        answers = []
        for option in options:
            if option.description is None:
                text = option.name
            elif self.frames.choice == "name_description":
                text = f"{option.name}: {as_text(option.description)}"
            else:
                text = as_text(option.description)
            answers.append(Answer(option.id, text))
        criteria = {option.id: option.description for option in options}  # as the caller wrote them
        return self._question(Kind.CHOICE, instructions, CHOICE_WITHOUT_INSTRUCTIONS, answers,
                              Asked("choice", name, instructions, criteria))

    def yes_no(self, instructions: Any, true: Any = None, false: Any = None, name: str = "noul") -> Question:
        """Without instructions the door guarantees a described outcome: the answers then say what yes and no
        mean."""
        if self.frames.noul == "yes_no":
            answers = [Answer(YES, "Yes"), Answer(NO, "No")]
        else:
            answers = [Answer(YES, "Yes" if true is None else f"Yes: {as_text(true)}"),
                       Answer(NO, "No" if false is None else f"No: {as_text(false)}")]
        described = {key: value for key, value in ((YES, true), (NO, false)) if value is not None}
        return self._question(Kind.NOUL, instructions, NOUL_WITHOUT_INSTRUCTIONS, answers,
                              Asked("noul", name, instructions, described or None))

    def score(self, instructions: Any, levels: Sequence[Any], name: str = "score") -> Question:
        texts = [as_text(level) for level in levels]
        if self.frames.score == "numbered":
            texts = [f"{index}: {text}" for index, text in enumerate(texts)]
        answers = [Answer(str(index), text) for index, text in enumerate(texts)]
        return self._question(Kind.SCORE, instructions, SCORE_WITHOUT_INSTRUCTIONS, answers,
                              Asked("score", name, instructions, list(levels)))

    def _question(self, kind: Kind, instructions: Any, default: str, answers: Sequence[Answer],
                  asked: Asked) -> Question:
        criterion = instructions if instructions is not None else default
        return Question(state=self.state, criterion=criterion, answers=tuple(answers), method=self.method, kind=kind,
                        temperature=self.temperature, partition=self.partition,
                        asked=replace(asked, instructions=criterion))
