"""Which laya questions llama-server cuts to the head's `max_head_tokens`, so that no answer is cut silently.

llama.cpp b11434 (`fill_task_laya` in `tools/server/server-decision.cpp`) renders a laya prompt in the layout
`[cls] question [sep] ([mask] option)* [sep] state [sep]` and cuts it as the model was trained: each option to 48
tokens after its marker, all options evenly when they and 16 tokens exceed `max_head_tokens`, then the question to
what is left (at least 8 tokens). It reports none of it. The adapter renders the same template as llama.cpp does
(Jinja with `trim_blocks` and `lstrip_blocks`, `tojson` without ASCII escapes), tokenizes it with the server's own
`/tokenize`, and runs the same arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jinja2 import Template, TemplateError

from .jinja_templates import compiled

MAX_OPTION_TOKENS = 48  # server_decision_context::max_option_tokens
RESERVED_TOKENS = 16  # what the options leave for the rest of the head before they are shrunk
SHRUNK_OPTION_MIN = 4
QUESTION_MIN = 8

Tokenize = Callable[[str], list[int]]


@dataclass(frozen=True)
class HeadLength:
    rendered: int  # tokens of the prompt as the template renders it
    read: int  # tokens the head reads after the cut

    @property
    def cut(self) -> bool:
        return self.read < self.rendered


def native_options(question: dict[str, Any]) -> list[dict[str, Any]]:
    """A System One question's options as llama-server hands them to the template (`parse_questions`; laya keeps the
    caller's order and puts a noul's false first)."""
    criteria: Any = question.get("criteria")
    if question["type"] == "choice":
        return [{"key": key, "description": value} for key, value in criteria.items()]
    if question["type"] == "score":
        return [{"key": str(level), "description": value} for level, value in enumerate(criteria)]
    described = criteria if isinstance(criteria, dict) else {}
    return [{"key": key, "description": described.get(key)} for key in ("false", "true")]


def _replaced(value: Any, search: str, replace: str) -> Any:
    """`decision_replace_text`: the marker's text in any string of the input becomes a space."""
    if isinstance(value, str):
        return value.replace(search, replace)
    if isinstance(value, list):
        return [_replaced(item, search, replace) for item in value]
    if isinstance(value, dict):
        return {key: _replaced(item, search, replace) for key, item in value.items()}
    return value


class LayaCut:
    """The cut of one laya model's head: `length(state, id, question)` per question of a request."""

    def __init__(self, template: str, tokenize: Tokenize, *, max_head_tokens: int, mask: int, separator: int,
                 mask_text: str) -> None:
        # None where llama.cpp's Jinja reads it and ours does not: every answer may then have been cut
        self._template: Template | None = compiled(template)
        self.max_head_tokens = max_head_tokens
        self._mask, self._separator, self._mask_text = mask, separator, mask_text
        self._tokenize = tokenize

    def length(self, state: Any, name: str, question: dict[str, Any]) -> HeadLength | None:
        """The prompt's tokens before and after the cut; None where the template does not render here or the layout
        is not laya's (llama-server refuses such a prompt itself)."""
        values = _replaced({"id": name, "type": question["type"], "instructions": question["instructions"],
                            "state": state, "options": native_options(question)}, self._mask_text, " ")
        try:
            rendered = self._template.render(**values, images=[]) if self._template else None
        except TemplateError:
            rendered = None
        if rendered is None:
            return None
        tokens = self._tokenize(rendered)
        return self._cut(tokens, len(values["options"]))

    def _cut(self, tokens: list[int], count: int) -> HeadLength | None:
        markers = [index for index, token in enumerate(tokens) if token == self._mask]
        if len(markers) != count or markers[0] < 2 or tokens[markers[0] - 1] != self._separator \
                or tokens[-1] != self._separator or self._separator not in tokens[markers[-1]:]:
            return None
        options_end = tokens.index(self._separator, markers[-1])
        if options_end + 1 >= len(tokens):
            return None
        ends = [*markers[1:], options_end]
        options = [min(end - start, MAX_OPTION_TOKENS + 1) for start, end in zip(markers, ends, strict=True)]
        if sum(options) + RESERVED_TOKENS > self.max_head_tokens:
            room = self.max_head_tokens - min(self.max_head_tokens, RESERVED_TOKENS)
            shrunk = max(SHRUNK_OPTION_MIN, room // count)
            options = [min(option, shrunk) for option in options]
        question_max = max(QUESTION_MIN, self.max_head_tokens - min(self.max_head_tokens, sum(options)))
        question = min(markers[0] - 1, 1 + question_max) - 1
        read = 1 + question + 1 + sum(options) + (len(tokens) - options_end)
        return HeadLength(rendered=len(tokens), read=read)
