"""Answers matched back to input lines: in order, one per line, each answer checked against its line.

An answer is kept byte for byte as the adapter wrote it. A SemIf answer must carry its line's decision id; an error
line gets the input's line number and the decision id, so OUTPUT can be read by id without INPUT at hand. A System
One answer must answer its line's question ids, an OpenAI one its questions in order, and they and their errors say
which INPUT line they answer (`systemone_lines`). Errors that the same line would get again (the request itself is
refused) are final and written; errors of the moment (a busy, stopping or unreachable endpoint) are not, so a rerun
asks those lines again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import systemone_lines
from .records import InputRecord

# The adapter's "try again" codes (SemIf's, and System One's error types), and this tool's own for a request that
# got no usable answer.
RETRYABLE_CODES = frozenset({"queue_full", "shutting_down", "not_ready", "internal_error", "body_timeout",
                             "timeout", "unavailable", "bad_response", "model_error"}) | systemone_lines.RETRYABLE_TYPES


class JoinError(Exception):
    """The answers cannot be matched to the lines that were sent (wrong count, or an id out of place)."""


@dataclass(frozen=True)
class Result:
    index: int  # position in the run's list of records
    record: InputRecord
    line: bytes | None  # what OUTPUT gets; None when the line is to be asked again on a rerun
    code: str | None = None  # the error code; None for an answer

    @property
    def answered(self) -> bool:
        return self.code is None


def error_record(record: InputRecord, code: str, message: str, field: str | None = None) -> bytes:
    """The adapter's error line, numbered as in the input file and carrying the decision id (a System One or OpenAI
    line's: its error document in its contract, numbered, with the line's digest)."""
    if record.numbered:
        return systemone_lines.tool_error(record, code, message)
    error = {"code": code, "message": message, **({"field": field} if field else {})}
    return json.dumps({"error": error, "line": record.number, "decision_id": record.decision_id},
                      separators=(",", ":"), ensure_ascii=False).encode()


def _settled(index: int, record: InputRecord, code: str, line: bytes) -> Result:
    """An error result: written when final, left for a rerun when of the moment."""
    return Result(index, record, None if code in RETRYABLE_CODES else line, code)


def failed(index: int, record: InputRecord, code: str, message: str, field: str | None = None) -> Result:
    code = systemone_lines.error_type(code) if record.numbered and not record.openai else code
    return _settled(index, record, code, error_record(record, code, message, field))


def answer_lines(body: bytes) -> list[bytes]:
    """The non-empty lines of a JSON Lines answer (an assembled transform output may hold empty ones)."""
    return [line.removesuffix(b"\r") for line in body.split(b"\n") if line.strip()]


def _one(index: int, record: InputRecord, line: bytes) -> Result:
    try:
        document = json.loads(line)
    except ValueError as error:
        raise JoinError(f"the answer for line {record.number} is not JSON ({error})") from None
    if not isinstance(document, dict):
        raise JoinError(f"the answer for line {record.number} is not a JSON object")
    error = document.get("error")
    if isinstance(error, dict) and not record.openai:  # SemIf's (also the adapter's to a line that is no request)
        return failed(index, record, str(error.get("code", "error")), str(error.get("message", "")),
                      error.get("field"))
    if record.numbered:
        return _numbered(index, record, line, document)
    if document.get("decision_id") != record.decision_id:
        raise JoinError(f"line {record.number} holds decision {record.decision_id!r}, but its answer is for "
                        f"{document.get('decision_id')!r}: answers out of order")
    return Result(index, record, line)


def _numbered(index: int, record: InputRecord, line: bytes, document: dict[str, Any]) -> Result:
    code = systemone_lines.error_code(document)
    if code is not None:
        return _settled(index, record, code, systemone_lines.error_line(record, document))
    problem = systemone_lines.unanswered(record, document)
    if problem:
        raise JoinError(problem)
    return Result(index, record, systemone_lines.answer_line(record, line))


def join(start: int, records: Sequence[InputRecord], lines: Iterable[bytes]) -> list[Result]:
    """One result per record, the k-th answer line for the k-th record (records[i] has index start + i)."""
    answers = list(lines)
    if len(answers) != len(records):
        raise JoinError(f"{len(answers)} answer lines for {len(records)} request lines")
    return [_one(start + offset, record, line)
            for offset, (record, line) in enumerate(zip(records, answers, strict=True))]
