"""System One and OpenAI lines in OUTPUT (the `numbered` ones): the adapter's answer or error document, and which
INPUT line it answers.

Neither request carries an id, so its line in OUTPUT says where it belongs: an answer document ends with
`"x_line": N, "x_request_sha256": H` (INPUT's line number and the sha256 of that line's bytes; both contracts let an
answer carry extra fields, ours prefixed `x_`), an error document is the adapter's (System One's `{"detail": ...}`,
OpenAI's `{"error": {"message", "type", "param", "code"}}`) with `"line": N` renumbered to INPUT's line and the same
`x_request_sha256`. A rerun finds the line again by N and checks H, so an OUTPUT written for other lines (another
input, or INPUT edited since) is refused instead of joined wrongly.
"""

from __future__ import annotations

import json
from typing import Any

from .records import InputRecord

DIGEST = "x_request_sha256"
ANSWER_LINE = "x_line"
ERROR_LINE = "line"  # the adapter's own field on a JSON Lines error
# The contract's "try again" error types (503 on SageMaker's /invocations, 529 and 429 on /v1/systemone, a fault)
RETRYABLE_TYPES = frozenset({"service_unavailable", "overloaded_error", "rate_limit_error", "internal_error",
                             "request_timeout"})
# This tool's own (SemIf) codes for a whole request's failure, as the error types System One names them, and as
# OpenAI's codes (its type: the caller's mistake, or the server's)
ERROR_TYPES = {"body_too_large": "request_too_large", "invalid_request": "invalid_request_error",
               "prompt_too_long": "context_length_exceeded"}
OPENAI_CODES = {"prompt_too_long": "context_length_exceeded"}
CLIENT_CODES = frozenset({"body_too_large", "invalid_request", "prompt_too_long"})


def error_code(document: dict[str, Any]) -> str | None:
    """The error's machine-readable code (System One's validation failure's first `type`, else its `error_type`;
    OpenAI's `code`, else its `type`), or None for an answer."""
    error = document.get("error")
    if isinstance(error, dict):
        return str(error.get("code") or error.get("type") or "error")
    detail = document.get("detail")
    if isinstance(detail, list):
        first = detail[0] if detail and isinstance(detail[0], dict) else {}
        return str(first.get("type", "validation_error"))
    if isinstance(detail, dict):
        return str(detail.get("error_type", "error"))
    return None


def unanswered(record: InputRecord, document: dict[str, Any]) -> str | None:
    """Why this answer document cannot be the answer to this request line, if it cannot."""
    if record.asked is not None:
        return _unanswered_openai(record, record.asked, document.get("answers"))
    answers = document.get("answers")
    if not isinstance(answers, dict):
        return f"the answer for line {record.number} holds no answers"
    if sorted(answers) != sorted(record.question_ids):
        return (f"line {record.number} asks questions {sorted(record.question_ids)}, but its answer answers "
                f"{sorted(answers)}: answers out of order")
    return None


def _unanswered_openai(record: InputRecord, asked: tuple[tuple[str, str | None], ...], answers: Any) -> str | None:
    """An OpenAI answer answers its questions in order: each of its question's type (or a refusal), under its name."""
    if not isinstance(answers, list):
        return f"the answer for line {record.number} holds no answers"
    got = [(a.get("type"), a.get("name")) if isinstance(a, dict) else (None, None) for a in answers]
    if len(got) != len(asked) or any(name != want_name or kind not in (want_kind, "refusal")
                                     for (kind, name), (want_kind, want_name) in zip(got, asked, strict=False)):
        return (f"line {record.number} asks {list(asked)}, but its answer answers {got}: answers out of order "
                "(type, name)")
    return None


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def answer_line(record: InputRecord, answer: bytes) -> bytes:
    """The adapter's answer byte for byte, then where it belongs."""
    tail = _encode({ANSWER_LINE: record.number, DIGEST: record.digest})
    return answer.rstrip()[:-1] + b"," + tail[1:]


def error_line(record: InputRecord, document: dict[str, Any]) -> bytes:
    """The adapter's error document, numbered as in the input file and carrying the line's digest."""
    return _encode({**document, ERROR_LINE: record.number, DIGEST: record.digest})


def error_type(code: str) -> str:
    """A code of this tool's (SemIf's) as System One's error type, where System One has one."""
    return ERROR_TYPES.get(code, code)


def tool_error(record: InputRecord, kind: str, message: str) -> bytes:
    """A failure of this tool's (a line too large to send, a request that failed as a whole) in the line's contract:
    `kind` is System One's error type (`error_type`) on a System One line, this tool's code on an OpenAI one."""
    if record.openai:
        error = {"message": message, "type": "invalid_request_error" if kind in CLIENT_CODES else "server_error",
                 "param": None, "code": OPENAI_CODES.get(kind, kind)}
        return error_line(record, {"error": error})
    return error_line(record, {"detail": {"error_type": kind, "message": message}})


def located(document: dict[str, Any]) -> tuple[int, str] | None:
    """(INPUT line number, line digest) of a System One or OpenAI line of OUTPUT; None for any other line."""
    digest = document.get(DIGEST)
    number = document.get(ERROR_LINE if "detail" in document or "error" in document else ANSWER_LINE)
    if not isinstance(digest, str) or not isinstance(number, int) or isinstance(number, bool):
        return None
    return number, digest
