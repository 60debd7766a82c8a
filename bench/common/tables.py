"""Markdown tables as every report of the harness writes them: one cell format for numbers, flags and gaps."""

from __future__ import annotations

from typing import Any


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.0f}"
    return str(value)


def table_lines(headers: list[str], lines: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell_text(value) for value in line) + " |" for line in lines]
    return [*out, ""]
