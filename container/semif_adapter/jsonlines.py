"""JSON Lines batches: one request per line in, one answer per line out, in the same order.

What SageMaker Batch Transform sends with `SplitType=Line`, `BatchStrategy=MultiRecord` and joins back with
`AssembleWith=Line`: every input line must get exactly one output line, so a bad line (an empty one included) is
answered with an error object naming its line, and the others are answered as if each had come alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .request_schema import DecisionRequest, RequestError, load_json, validate_request

MEDIA_TYPES = frozenset({"application/jsonlines", "application/x-jsonlines"})
MEDIA_TYPE = "application/jsonlines"


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, as an editor counts
    request: DecisionRequest | None
    error: RequestError | None = None


def parse_lines(body: bytes) -> list[Line]:
    """Every line of the body (a final newline ends the last line, it does not start another)."""
    raw = body.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for number, line in enumerate(raw, start=1):
        text = line.removesuffix(b"\r")
        if not text.strip():
            lines.append(Line(number, None, RequestError("empty_line", "the line holds no request")))
            continue
        try:
            lines.append(Line(number, validate_request(load_json(text))))
        except RequestError as error:
            lines.append(Line(number, None, error))
    return lines


def error_line(number: int, code: str, message: str, field: str | None = None) -> bytes:
    error: dict[str, str] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return json.dumps({"error": error, "line": number}, separators=(",", ":")).encode()


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)
