"""Answers matched back to input lines: in order, one per line, each answer checked against its line's id.

An answer is kept byte for byte as the adapter wrote it. An error line gets the input's line number and the
decision id, so OUTPUT can be read by id without INPUT at hand. Errors that the same line would get again
(the request itself is refused) are final and written; errors of the moment (a busy, stopping or unreachable
endpoint) are not, so a rerun asks those lines again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .records import InputRecord

# The adapter's "try again" codes, and this tool's own for a request that got no usable answer.
RETRYABLE_CODES = frozenset({"queue_full", "shutting_down", "not_ready", "internal_error", "body_timeout",
                             "timeout", "unavailable", "bad_response", "model_error"})


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
    """The adapter's error line, numbered as in the input file and carrying the decision id."""
    error = {"code": code, "message": message, **({"field": field} if field else {})}
    return json.dumps({"error": error, "line": record.number, "decision_id": record.decision_id},
                      separators=(",", ":"), ensure_ascii=False).encode()


def failed(index: int, record: InputRecord, code: str, message: str, field: str | None = None) -> Result:
    final = code not in RETRYABLE_CODES
    return Result(index, record, error_record(record, code, message, field) if final else None, code)


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
    if isinstance(error, dict):
        return failed(index, record, str(error.get("code", "error")), str(error.get("message", "")),
                      error.get("field"))
    if document.get("decision_id") != record.decision_id:
        raise JoinError(f"line {record.number} holds decision {record.decision_id!r}, but its answer is for "
                        f"{document.get('decision_id')!r}: answers out of order")
    return Result(index, record, line)


def join(start: int, records: Sequence[InputRecord], lines: Iterable[bytes]) -> list[Result]:
    """One result per record, the k-th answer line for the k-th record (records[i] has index start + i)."""
    answers = list(lines)
    if len(answers) != len(records):
        raise JoinError(f"{len(answers)} answer lines for {len(records)} request lines")
    return [_one(start + offset, record, line)
            for offset, (record, line) in enumerate(zip(records, answers, strict=True))]
