"""JSON Lines batches: one request per line in, one answer per line out, in the same order.

What SageMaker Batch Transform sends with `SplitType=Line`, `BatchStrategy=MultiRecord` and joins back with
`AssembleWith=Line`: every input line must get exactly one output line, so a bad line (an empty one included) is
answered with an error object naming its line, and the others are answered as if each had come alone. Each line
speaks its own contract (a SemIf decision, or a System One request with `questions`) and is answered in it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.question import Question
from ..errors import RequestError
from .strict_json import load_json

MEDIA_TYPES = frozenset({"application/jsonlines", "application/x-jsonlines"})
MEDIA_TYPE = "application/jsonlines"


class LineTicket(Protocol):
    """A parsed line: the questions it asks, and how its answers (one per question: the service's decision, or the
    error that stopped it) are written on its line."""

    @property
    def questions(self) -> tuple[Question, ...]: ...

    def line(self, answers: Sequence[Any], number: int, request_id: str) -> bytes: ...


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, as an editor counts
    ticket: LineTicket | None
    error: bytes | None = None  # the line's error object, already in its contract's shape


def parse_lines(body: bytes, parse: Callable[[Any, int], LineTicket], refuse: Callable[[BaseException, Any, int],
                bytes]) -> list[Line]:
    """Every line of the body (a final newline ends the last line, it does not start another). `parse` reads a
    line's document in its contract; `refuse` writes a line's parse failure in the contract it spoke (the
    document is None when the line is not JSON at all)."""
    raw = body.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for number, line in enumerate(raw, start=1):
        text = line.removesuffix(b"\r")
        if not text.strip():
            error = RequestError("empty_line", "the line holds no request")
            lines.append(Line(number, None, refuse(error, None, number)))
            continue
        document: Any = None
        try:
            document = load_json(text)
            lines.append(Line(number, parse(document, number)))
        except ValueError as error:  # RequestError and the contracts' validation errors
            lines.append(Line(number, None, refuse(error, document, number)))
    return lines


def error_line(number: int, code: str, message: str, field: str | None = None) -> bytes:
    error: dict[str, str] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return json.dumps({"error": error, "line": number}, separators=(",", ":")).encode()


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)
