"""Requests to a real-time target with client-side concurrency, answers written in input order as they come.

At most `concurrency` requests are in flight; each worker sends one JSON Lines request and joins its answer to
its lines. A fatal failure, or too many failed requests in a row (an endpoint that is down answers every
request the same way), stops the run; what was written stays, and a rerun resumes there.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from .chunking import DECISIONS_PER_REQUEST, REQUEST_BYTES, Chunk, line_bytes, plan_chunks
from .errors import BatchFailure
from .join import JoinError, Result, answer_lines, failed, join
from .progress import Recorder
from .records import InputRecord
from .targets import ChunkFailure

FAILED_REQUESTS_IN_A_ROW = 5


class Target(Protocol):
    name: str

    def invoke(self, body: bytes) -> bytes: ...


@dataclass(frozen=True)
class Sizing:
    concurrency: int = 1
    max_bytes: int = REQUEST_BYTES
    max_decisions: int = DECISIONS_PER_REQUEST


def _every_line(chunk: Chunk, code: str, message: str) -> list[Result]:
    return [failed(chunk.start + offset, record, code, message) for offset, record in enumerate(chunk.records)]


def ask(target: Target, chunk: Chunk) -> tuple[list[Result], bool]:
    """One request's results, and whether the request as a whole failed. A fatal ChunkFailure propagates."""
    try:
        body = target.invoke(chunk.body)
    except ChunkFailure as failure:
        if failure.fatal:
            raise
        return _every_line(chunk, failure.code, failure.message), True
    try:
        return join(chunk.start, chunk.records, answer_lines(body)), False
    except JoinError as error:
        return _every_line(chunk, "bad_response", str(error)), True


def run_requests(records: Sequence[InputRecord], target: Target, sizing: Sizing, recorder: Recorder) -> None:
    """Ask every record (records[i] is settled as index i); BatchFailure when the run cannot go on."""
    chunks, oversized = plan_chunks(records, sizing.max_bytes, sizing.max_decisions)
    recorder.settle([failed(index, records[index], "body_too_large", f"the line is {line_bytes(records[index])} bytes, "
                    f"over the {sizing.max_bytes}-byte request limit", "body") for index in oversized])
    queue = iter(chunks)
    pool = ThreadPoolExecutor(max_workers=sizing.concurrency, thread_name_prefix="batch-request")
    in_flight: dict[Future[tuple[list[Result], bool]], Chunk] = {}

    def send_next() -> None:
        chunk = next(queue, None)
        if chunk is not None:
            in_flight[pool.submit(ask, target, chunk)] = chunk

    try:
        for _ in range(sizing.concurrency):
            send_next()
        failures_in_a_row = 0
        while in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                in_flight.pop(future)
                try:
                    results, request_failed = future.result()
                except ChunkFailure as failure:
                    raise BatchFailure(f"{target.name}: {failure}") from failure
                recorder.settle(results)
                failures_in_a_row = failures_in_a_row + 1 if request_failed else 0
                if failures_in_a_row >= FAILED_REQUESTS_IN_A_ROW:
                    raise BatchFailure(f"{target.name}: {failures_in_a_row} requests in a row failed, the last "
                                       f"with {results[0].code}; stopping")
                send_next()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
