"""Every figure in the README is one of its report's: each number, date and commit a row of the README's figures table
quotes must appear, as the same token, in the report that row links to (docs/benchmarks.md is itself generated from
the run files, tests/bench/test_benchmarks_page.py). A figure changed by hand in the README fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SECTION = "## Current figures"
DATE = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}(?![\w-])")
COMMIT = re.compile(r"`([0-9a-f]{7,40})`")
# A number as a figure: not part of a word or identifier (SmolLM2, 135M, Q4_1, ml.m5), with its decimals and
# thousands; a trailing x or % is the unit, not part of the token.
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?=x\b|%|[^\w]|$)(?![.,]\d)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def figure_rows(text: str) -> list[str]:
    """The body rows of the one table under the README's figures heading."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.split("\n") if line.startswith("|")]
    assert len(table) > 2, f"no table under {SECTION!r}"
    return table[2:]


def quoted(cells: str) -> set[str]:
    """Dates, commits and numbers of a row's text, link targets left out."""
    text = re.sub(r"\]\([^)]*\)", "]", cells)
    found = set(DATE.findall(text)) | set(COMMIT.findall(text))
    text = COMMIT.sub(" ", DATE.sub(" ", text))
    return found | set(NUMBER.findall(text))


def stated(token: str, report: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(token)}(?![\d])", report) is not None


def sources(row: str) -> list[Path]:
    return [(README.parent / target).resolve() for target in LINK.findall(row)
            if not re.match(r"^[a-z]+:", target)]


ROWS = figure_rows(README.read_text())


def test_the_readme_has_one_figures_table_and_it_is_within_its_size() -> None:
    text = README.read_text()
    assert text.count(SECTION) == 1
    assert len(text.encode()) <= 12 * 1024, "README.md is the product page: at most 12 KB"
    assert len(ROWS) >= 8


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.split("|")[1].strip()[:60])
def test_every_figure_is_stated_by_the_report_the_row_links(row: str) -> None:
    reports = sources(row)
    assert reports, "a figure without a source: link the report that states it"
    texts = [path.read_text() for path in reports]
    tokens = quoted(row)
    assert DATE.search(row) and COMMIT.search(row), "each figure says when and on which commit it was measured"
    missing = sorted(token for token in tokens if not any(stated(token, text) for text in texts))
    assert not missing, f"not in {[p.relative_to(ROOT).as_posix() for p in reports]}: {missing}"


def test_a_figure_changed_by_hand_is_caught() -> None:
    """The check itself: the same rows with one digit of a figure changed no longer match their report."""
    row = next(row for row in ROWS if "0.617" in row)
    report = sources(row)[0].read_text()
    assert all(stated(token, report) for token in quoted(row))
    assert not all(stated(token, report) for token in quoted(row.replace("0.617", "0.618")))
    assert not stated("1.02", "within 1.023x"), "a shorter number is not found inside a longer one"
    assert quoted("| SmolLM2 135M Q4_1, `pmi` | 0.992x-1.062x; 3.03x, 100% | 2026-12-04, `823f796` |") == {
        "0.992", "1.062", "3.03", "100", "2026-12-04", "823f796"}
