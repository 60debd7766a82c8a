"""Lines packed into JSON Lines requests: under the body limit and a decisions-per-request cap, in file order.

The byte limit keeps each request under SageMaker's real-time payload limit; the cap keeps each request's
answer well inside the 60 s SageMaker allows an invocation (the adapter decides a few at a time, so a request's
time grows with its decisions) and its place in the adapter's queue small enough for other requests to share it.
The cap counts decisions as the adapter's queue does: a SemIf line is one, a System One or OpenAI line one per
question (a line is never split, so a line of more questions than the cap goes alone). A line larger than the limit
on its own can never be sent and is answered locally with an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .records import InputRecord

REQUEST_BYTES = 6_000_000  # SageMaker's real-time limit is "6 MB"; under it read either way (the adapter's is 6 MiB)
DECISIONS_PER_REQUEST = 16


@dataclass(frozen=True)
class Chunk:
    start: int  # index of the first record in the list that was chunked; the others follow it
    records: tuple[InputRecord, ...]

    @property
    def body(self) -> bytes:
        return b"".join(record.raw + b"\n" for record in self.records)


def line_bytes(record: InputRecord) -> int:
    return len(record.raw) + 1


def plan_chunks(records: Sequence[InputRecord], max_bytes: int = REQUEST_BYTES,
                max_decisions: int = DECISIONS_PER_REQUEST) -> tuple[list[Chunk], list[int]]:
    """The requests, in order, and the indexes of the records too large to send at all."""
    chunks: list[Chunk] = []
    oversized: list[int] = []
    current: list[InputRecord] = []
    start = size = decisions = 0

    def close() -> None:
        if current:
            chunks.append(Chunk(start, tuple(current)))

    for index, record in enumerate(records):
        length = line_bytes(record)
        if length > max_bytes:
            oversized.append(index)  # and the chunk before it ends, so each chunk is a contiguous run
            close()
            current = []
            continue
        if current and (size + length > max_bytes or decisions + record.decisions > max_decisions):
            close()
            current = []
        if not current:
            start, size, decisions = index, 0, 0
        current.append(record)
        size += length
        decisions += record.decisions
    close()
    return chunks, oversized
