"""The input file: one adapter request per line, each found again by its key.

A line speaks one of the adapter's three contracts, as the adapter tells them apart: an OpenAI Decisions request (an
object with `input` and a list of `questions`), a System One request (an object with `questions` and no `decision`)
or a SemIf decision (`{"decision": {"id": ...}, ...}`). Only what joining needs is checked here (a JSON object per
line; a SemIf line with a unique `decision.id`); the rest of the schema is the adapter's to judge, and a line it
refuses is answered with an error on that line. A SemIf line is known by its decision id (an answer is matched to
its line by id, and a rerun skips the ids already answered); a System One or OpenAI request carries no id, so it is
known by its line number in INPUT (it is `numbered`), and its answer must answer its questions: a System One one its
question ids, an OpenAI one its questions in order (each answer of the question's type, or a refusal, and name).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BatchRefused

PROBLEMS_SHOWN = 5
Key = str | int  # how OUTPUT knows a line: a SemIf decision by its id, a System One request by its INPUT line number


@dataclass(frozen=True)
class InputRecord:
    number: int  # 1-based line number in the input file, as an editor counts
    decision_id: str | None  # a SemIf line's decision.id; None on a System One or OpenAI line (no id)
    raw: bytes  # the line as sent, without its newline
    question_ids: tuple[str, ...] = ()  # a System One request's question ids, in request order
    asked: tuple[tuple[str, str | None], ...] | None = None  # an OpenAI request's questions: (type, name), in order

    @property
    def numbered(self) -> bool:
        """A System One or OpenAI line: known by its line number, as a request has no id."""
        return self.decision_id is None

    @property
    def openai(self) -> bool:
        return self.asked is not None

    @property
    def key(self) -> Key:
        return self.number if self.decision_id is None else self.decision_id

    @property
    def decisions(self) -> int:
        """What the adapter decides for the line (and admits into its queue): a decision per System One question."""
        if self.asked is not None:
            return max(1, len(self.asked))
        return max(1, len(self.question_ids)) if self.numbered else 1

    @property
    def label(self) -> str:
        return f"line {self.number}" if self.decision_id is None else f"decision {self.decision_id!r}"

    @property
    def digest(self) -> str:
        """The line's sha256: a numbered line's answer in OUTPUT carries it, so a rerun can tell INPUT changed."""
        return hashlib.sha256(self.raw).hexdigest()


@dataclass(frozen=True)
class InputFile:
    records: list[InputRecord]
    blank_lines: int  # skipped here; a job that read the file as-is would answer each with an error line

    def by_id(self) -> dict[str, InputRecord]:
        """The SemIf lines by decision id."""
        return {record.decision_id: record for record in self.records if record.decision_id is not None}

    def by_number(self) -> dict[int, InputRecord]:
        return {record.number: record for record in self.records}

    def locate(self, lines: Sequence[InputRecord], finished: Callable[[Key], bool]) -> tuple[list[InputRecord],
                                                                                              list[InputRecord]]:
        """These lines (read from a copy of some of INPUT's lines) as INPUT's records, and the lines INPUT does not
        hold. A SemIf line is found by its id; a System One line by its bytes, each copy in INPUT taken once, those
        OUTPUT lacks first (identical requests get identical answers, so which copy was asked does not matter)."""
        known = self.by_id()
        copies: dict[bytes, deque[InputRecord]] = defaultdict(deque)
        for record in sorted((r for r in self.records if r.numbered), key=lambda r: finished(r.key)):  # stable
            copies[record.raw].append(record)
        found: list[InputRecord] = []
        strangers: list[InputRecord] = []
        for line in lines:
            if line.numbered:
                match = copies[line.raw].popleft() if copies[line.raw] else None
            else:
                match = known.get(line.decision_id or "")
            (strangers if match is None else found).append(match or line)
        return found, strangers


def speaks_openai(document: Any) -> bool:
    """The adapter's rule (semif_adapter.doors.openai_schema.speaks_decisions), checked before the others: an object
    with `input` and a list of `questions`."""
    return isinstance(document, dict) and "input" in document and isinstance(document.get("questions"), list)


def _asked(question: Any) -> tuple[str, str | None]:
    """An OpenAI question's (type, name) as its answer must carry them (whatever the adapter makes of the rest)."""
    fields = question if isinstance(question, dict) else {}
    name = fields.get("name")
    return str(fields.get("type")), name if isinstance(name, str) else None


def speaks_systemone(document: Any) -> bool:
    """The adapter's rule (semif_adapter.doors.systemone_door): an object with `questions` and no SemIf
    `decision(s)`."""
    return isinstance(document, dict) and "questions" in document and "decision" not in document \
        and "decisions" not in document


def _record(number: int, line: bytes) -> InputRecord:
    """The line as a record, or ValueError saying why it cannot be one."""
    try:
        document = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"not JSON ({error})") from None
    if speaks_openai(document):
        return InputRecord(number, None, line, asked=tuple(_asked(q) for q in document["questions"]))
    if speaks_systemone(document):
        questions = document["questions"]
        return InputRecord(number, None, line, tuple(questions) if isinstance(questions, dict) else ())
    decision = document.get("decision") if isinstance(document, dict) else None
    identifier = decision.get("id") if isinstance(decision, dict) else None
    if not isinstance(identifier, str) or not identifier:
        raise ValueError("no decision.id (each line is one request: {\"decision\": {\"id\": ..., ...}, ...}, or a "
                         "System One request with \"questions\", or an OpenAI one with \"input\" and a list of "
                         "\"questions\")")
    return InputRecord(number, identifier, line)


def _refusal(source: str, problems: list[str]) -> BatchRefused:
    shown = "; ".join(problems[:PROBLEMS_SHOWN])
    more = f" (and {len(problems) - PROBLEMS_SHOWN} more)" if len(problems) > PROBLEMS_SHOWN else ""
    return BatchRefused(f"{source}: {shown}{more}")


def parse_input(data: bytes, source: str) -> InputFile:
    """Every request line of `data`; BatchRefused naming the lines without a usable or with a repeated id."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # a final newline ends the last line; it does not start another
    records: list[InputRecord] = []
    problems: list[str] = []
    blank = 0
    seen: dict[str, list[int]] = defaultdict(list)
    for number, line in enumerate(lines, start=1):
        raw = line.removesuffix(b"\r")
        if not raw.strip():
            blank += 1
            continue
        try:
            record = _record(number, raw)
        except ValueError as error:
            problems.append(f"line {number}: {error}")
            continue
        if record.decision_id is not None:
            seen[record.decision_id].append(number)
        records.append(record)
    problems += [f"decision id {identifier!r} is on lines {', '.join(map(str, numbers))} (ids must be unique)"
                 for identifier, numbers in seen.items() if len(numbers) > 1]
    if problems:
        raise _refusal(source, problems)
    if not records:
        raise BatchRefused(f"{source}: no request lines")
    return InputFile(records, blank)


def read_input(path: Path) -> InputFile:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise BatchRefused(f"{path}: {error.strerror or error}") from error
    return parse_input(data, str(path))
