"""The input file: one adapter request per line, each found again by its decision id.

Only what joining needs is checked here (a JSON object per line with a unique `decision.id`); the rest of the
schema is the adapter's to judge, and a line it refuses is answered with an error on that line. Ids must be
unique: an answer is matched to its line by id, and a rerun skips the ids already answered.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .errors import BatchRefused

PROBLEMS_SHOWN = 5


@dataclass(frozen=True)
class InputRecord:
    number: int  # 1-based line number in the input file, as an editor counts
    decision_id: str
    raw: bytes  # the line as sent, without its newline


@dataclass(frozen=True)
class InputFile:
    records: list[InputRecord]
    blank_lines: int  # skipped here; a job that read the file as-is would answer each with an error line

    def by_id(self) -> dict[str, InputRecord]:
        return {record.decision_id: record for record in self.records}


def _decision_id(line: bytes) -> str:
    """The line's `decision.id`, or ValueError saying why there is none."""
    try:
        document = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"not JSON ({error})") from None
    decision = document.get("decision") if isinstance(document, dict) else None
    identifier = decision.get("id") if isinstance(decision, dict) else None
    if not isinstance(identifier, str) or not identifier:
        raise ValueError("no decision.id (each line is one request: {\"decision\": {\"id\": ..., ...}, ...})")
    return identifier


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
            identifier = _decision_id(raw)
        except ValueError as error:
            problems.append(f"line {number}: {error}")
            continue
        seen[identifier].append(number)
        records.append(InputRecord(number, identifier, raw))
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
