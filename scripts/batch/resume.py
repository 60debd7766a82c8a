"""OUTPUT: read what an earlier run finished, then append the new lines in input order.

A rerun asks only the lines OUTPUT does not hold a final line for (a SemIf line known by its decision id, a System
One or OpenAI line by its INPUT line number and digest), and appends: a finished line is never rewritten. Lines are
written in input order as their requests complete (a reorder buffer absorbs concurrent requests finishing out of
order), each with one write and a flush, so an interrupted run leaves at most one incomplete last line; the next run
cuts it off and asks that line again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from . import systemone_lines
from .errors import BatchRefused
from .join import RETRYABLE_CODES, Result
from .records import InputFile, InputRecord, Key


@dataclass
class Previous:
    """What OUTPUT already holds for this input."""

    codes: dict[Key, str | None] = field(default_factory=dict)  # finished line's key -> its error code (None: answered)
    keep_bytes: int | None = None  # OUTPUT's length without an incomplete last line; None: nothing to cut

    def finished(self, key: Key) -> bool:
        return key in self.codes


def _finished_line(line: bytes, number: int, path: Path, known: dict[str, InputRecord],
                   numbered: dict[int, InputRecord]) -> tuple[Key, str | None]:
    """(key, error code or None) of one OUTPUT line; BatchRefused if it is no line of ours or answers a line INPUT
    does not hold (another input's OUTPUT)."""
    try:
        document = json.loads(line)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        document = {}
    identifier = document.get("decision_id")
    if isinstance(identifier, str):
        if identifier not in known:
            raise BatchRefused(f"{path}: line {number} answers decision {identifier!r}, which the input does not "
                               "hold: OUTPUT belongs to another input (choose another -o)")
        error = document.get("error")
        return identifier, (str(error.get("code", "error")) if isinstance(error, dict) else None)
    place = systemone_lines.located(document)
    if place is None:
        raise BatchRefused(f"{path}: line {number} is not an answer or error line with a decision_id (nor a System "
                           "One line with its x_request_sha256); is OUTPUT a file this tool wrote?")
    record = numbered.get(place[0])
    if record is None or not record.numbered or record.digest != place[1]:
        raise BatchRefused(f"{path}: line {number} answers a System One request that input line {place[0]} does "
                           "not hold (its x_request_sha256 differs): OUTPUT belongs to another input, or the input "
                           "was edited since (choose another -o)")
    return record.number, systemone_lines.error_code(document)


def read_previous(path: Path, inputs: InputFile) -> Previous:
    """The finished lines in OUTPUT; BatchRefused if it answers lines that INPUT does not hold (another file's)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Previous()
    except OSError as error:
        raise BatchRefused(f"{path}: {error.strerror or error}") from error
    previous = Previous()
    if data and not data.endswith(b"\n"):
        previous.keep_bytes = data.rfind(b"\n") + 1
        data = data[:previous.keep_bytes]
    known, numbered = inputs.by_id(), inputs.by_number()
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        key, code = _finished_line(line, number, path, known, numbered)
        if code not in RETRYABLE_CODES:
            previous.codes[key] = code
    return previous


class OrderedWriter:
    """Appends results to OUTPUT in index order, holding back those that finish before an earlier one."""

    def __init__(self, path: Path, previous: Previous) -> None:
        self.path = path
        self._file: BinaryIO = path.open("ab")
        if previous.keep_bytes is not None:
            self._file.truncate(previous.keep_bytes)
        self._waiting: dict[int, Result] = {}
        self.next_index = 0  # the first index not yet settled
        self.written = 0

    def settle(self, results: Iterable[Result]) -> list[Result]:
        """Take results (any order); write every one whose earlier indexes are all settled, and return those
        (the lines to retry among them, which are passed over, not written)."""
        for result in results:
            self._waiting[result.index] = result
        released = []
        while self.next_index in self._waiting:
            result = self._waiting.pop(self.next_index)
            if result.line is not None:
                self._file.write(result.line + b"\n")
                self.written += 1
            released.append(result)
            self.next_index += 1
        self._file.flush()
        return released

    def close(self) -> int:
        """Close OUTPUT; the number of results held back behind a line that never settled (not written)."""
        self._file.close()
        return len(self._waiting)

    def __enter__(self) -> OrderedWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
