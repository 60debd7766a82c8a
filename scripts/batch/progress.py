"""The progress bar (decisions/s) while a batch runs, and the summary by error code when it ends."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tqdm import tqdm

from .join import Result
from .records import InputFile
from .resume import OrderedWriter, Previous

LINES_SHOWN = 5
# tqdm's default, but always decisions/s (tqdm turns a rate below 1 into "s/decision")
BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"


def say(message: str) -> None:
    """One line of the batch command's own on stderr (progress bars go there too)."""
    print(f"batch: {message}", file=sys.stderr, flush=True)


class Progress:
    """A tqdm bar on stderr counting decisions (answered or failed; a System One line's are its questions) with
    their rate and the lines that failed so far."""

    def __init__(self, total: int, *, enabled: bool = True, what: str = "batch") -> None:
        self.bar = tqdm(total=total, unit=" decisions", desc=what, disable=not enabled, file=sys.stderr,
                        dynamic_ncols=True, mininterval=1.0, smoothing=0.1, bar_format=BAR)
        self.errors = 0

    def advance(self, results: list[Result]) -> None:
        self.errors += sum(1 for result in results if not result.answered)
        if self.errors:
            self.bar.set_postfix_str(f"{self.errors} error{'s' if self.errors > 1 else ''}", refresh=False)
        self.bar.update(sum(result.record.decisions for result in results))

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _by_code(lines: Mapping[str, list[int]]) -> str:
    parts = []
    for code, numbers in sorted(lines.items(), key=lambda item: (-len(item[1]), item[0])):
        shown = ", ".join(map(str, sorted(numbers)[:LINES_SHOWN])) + (", ..." if len(numbers) > LINES_SHOWN else "")
        parts.append(f"{code} {len(numbers)} (line{'s' if len(numbers) > 1 else ''} {shown})")
    return ", ".join(parts)


@dataclass
class Summary:
    """Every input line's fate: answered or failed before this run or now, to be retried, or not sent."""

    total: int
    answered_before: int = 0
    answered: int = 0
    decisions: int = 0  # what the lines answered now decided: one per SemIf line, one per System One question
    elapsed_s: float = 0.0
    stopped: str | None = None  # why the run ended early: a failure, or an interruption
    errors: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # final, in OUTPUT
    retry: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # not written: ask again

    @classmethod
    def start(cls, inputs: InputFile, previous: Previous) -> Summary:
        summary = cls(len(inputs.records))
        for record in inputs.records:
            if previous.finished(record.key):
                code = previous.codes[record.key]
                if code is None:
                    summary.answered_before += 1
                else:
                    summary.errors[code].append(record.number)
        return summary

    def add(self, results: Iterable[Result]) -> None:
        for result in results:
            if result.answered:
                self.answered += 1
                self.decisions += result.record.decisions
            else:
                assert result.code is not None
                (self.errors if result.line is not None else self.retry)[result.code].append(result.record.number)

    @property
    def failed(self) -> int:
        return sum(map(len, self.errors.values()))

    @property
    def to_retry(self) -> int:
        return sum(map(len, self.retry.values()))

    @property
    def not_sent(self) -> int:
        return self.total - self.answered_before - self.answered - self.failed - self.to_retry

    @property
    def complete(self) -> bool:
        """Every line answered: exit status 0."""
        return self.answered_before + self.answered == self.total

    def report(self) -> list[str]:
        count = f"{self.decisions} decisions, " if self.decisions != self.answered else ""  # System One lines
        rate = f": {count}{self.decisions / self.elapsed_s:.2f} decisions/s" if self.elapsed_s > 0 and self.answered \
            else ""
        head = (f"{self.total} lines: {self.answered_before + self.answered} answered ({self.answered_before} "
                f"before this run, {self.answered} now in {self.elapsed_s:.1f} s{rate})")
        extra = [f"{count} {what}" for count, what in ((self.failed, "failed"), (self.to_retry, "to retry"),
                                                       (self.not_sent, "not sent")) if count]
        lines = [", ".join([head, *extra])]
        if self.errors:
            lines.append(f"errors by code (final, in OUTPUT): {_by_code(self.errors)}")
        if self.retry:
            lines.append(f"to retry (not in OUTPUT; run the same command again): {_by_code(self.retry)}")
        if self.not_sent and not self.retry:
            lines.append("not sent: run the same command again to ask the rest")
        return lines


@dataclass
class Recorder:
    """Where every result goes: the bar at once; OUTPUT and the summary in input order (a result held back
    behind an unfinished request counts only once it is written, so an interrupted run's summary is OUTPUT's)."""

    writer: OrderedWriter
    summary: Summary
    progress: Progress | None = None

    def settle(self, results: list[Result]) -> None:
        self.summary.add(self.writer.settle(results))
        if self.progress is not None:
            self.progress.advance(results)
