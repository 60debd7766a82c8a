"""Every relative link and #anchor in README.md and the pages under docs/ resolves, and every page under docs/ says
whom it is for (no model, no network: the markdown alone)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The configuration reference is generated (semif_adapter.deploy.reference) but split by task like a written page,
# so the size check holds it too; other generated pages (run reports) are rendered whole by their tools.
CONFIGURATION = sorted((ROOT / "docs").glob("configuration*.md"))
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md",
                *(path for path in (ROOT / "docs").rglob("*.md") if "bench" not in path.relative_to(ROOT).parts)])
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans, where a link is a link."""
    kept, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            kept.append("")
            continue
        kept.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return "\n".join(kept)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a page (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: Counter[str] = Counter()
    found, fenced = set(), False
    for line in path.read_text().split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            found.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
    return found


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text()))


def test_the_slug_is_githubs() -> None:
    assert slug("Your own System One API (`base_url` + a key)") == "your-own-system-one-api-base_url--a-key"
    assert slug("Configuration (`cdk.json` → `context.semif`)") == "configuration-cdkjson--contextsemif"
    assert slug("Serverless cold start: the adapter's share") == "serverless-cold-start-the-adapters-share"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / unquote(file_part)).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


DOC_PAGES = [page for page in PAGES if page.is_relative_to(ROOT / "docs")]


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_page_opens_with_whom_it_is_for_and_what_they_can_do_after(page: Path) -> None:
    """The first paragraph after the title names its reader and what reading it gives ("after this page")."""
    text = page.read_text()
    assert text.startswith("# "), "a page starts with its title"
    opening = text.split("\n\n")[1]
    assert re.match(r"^For (whoever|anyone|developers|the) ", opening), opening[:120]
    assert "after this page" in opening.replace("\n", " "), opening[:200]


@pytest.mark.parametrize("page", [page for page in DOC_PAGES if page in CONFIGURATION
                                  or "generated" not in page.read_text()[:600].lower()],
                         ids=lambda page: page.relative_to(ROOT).as_posix())
def test_no_written_page_outgrows_one_task(page: Path) -> None:
    """A page over ~25 KB is split by task (a generated run report is rendered whole and left out)."""
    assert len(page.read_text().encode()) <= 25_600, f"{page.name}: split it by task"


def test_the_readme_indexes_every_page_under_docs() -> None:
    """Every page is one link from the README, or two through a page the README links."""
    def targets(page: Path) -> set[Path]:
        return {(page.parent / unquote(target.partition("#")[0])).resolve() for target in links(page)
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and target.partition("#")[0]}

    first = targets(ROOT / "README.md")
    reached = first | {found for page in first if page.suffix == ".md" and page.is_file() for found in targets(page)}
    missing = [page.relative_to(ROOT).as_posix() for page in DOC_PAGES if page not in reached]
    assert not missing, f"not reachable from the README's index: {missing}"
