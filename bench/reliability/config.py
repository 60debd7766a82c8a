"""The sizes of a reliability run: the report's defaults, scaled down by the tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SuiteConfig:
    duration_s: float = 60.0
    clients: int = 16
    chat_clients: int = 4
    chat_duration_s: float = 30.0
    http_examples: int = 150  # hypothesis over HTTP
    fuzz_examples: int = 80  # schemathesis, per operation and mode
    validation_examples: int = 1000  # hypothesis in-process
    huge_rounds: int = 6
    sigterm_after_s: float = 10.0
