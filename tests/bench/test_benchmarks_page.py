"""docs/benchmarks.md is what the benchmark code writes from the newest run files under docs/bench/ (no model, no
server: the page is rendered from the committed JSON alone)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.decisions.report import markdown as decisions_markdown
from bench.page import benchmarks as benchmarks_page
from bench.systemone.report import markdown as systemone_markdown

BENCH = benchmarks_page.BENCH


def test_the_committed_page_is_what_the_run_files_give() -> None:
    assert benchmarks_page.PAGE.read_text() == benchmarks_page.render(), \
        "docs/benchmarks.md is not current: python -m bench.page"
    assert benchmarks_page.main(["--check"]) == 0


def test_each_kept_run_renders_to_its_own_committed_report() -> None:
    """The renderers still read every kept run as it was written, so the page quotes what each run said."""
    for path in BENCH.rglob("decisions.json"):
        assert decisions_markdown(json.loads(path.read_text())) == path.with_suffix(".md").read_text(), path
    for path in BENCH.rglob("systemone.json"):
        assert systemone_markdown(json.loads(path.read_text())) == path.with_suffix(".md").read_text(), path


def _copy_run(source: Path, target: Path, started: str, **changes: object) -> None:
    results = json.loads(source.read_text())
    results["meta"]["started"] = started
    results.update(changes)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results))


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    docs = tmp_path / "docs"
    monkeypatch.setattr(benchmarks_page, "DOCS", docs)
    monkeypatch.setattr(benchmarks_page, "BENCH", docs / "bench")
    monkeypatch.setattr(benchmarks_page, "PAGE", docs / "benchmarks.md")
    for name in ("cold_start.json", "model_memory.json", "quantization.json"):
        (docs / "bench" / "sizing").mkdir(parents=True, exist_ok=True)
        shutil.copy(BENCH / "sizing" / name, docs / "bench" / "sizing" / name)
    return docs / "bench"


def test_the_newest_full_run_leads_and_an_older_one_fills_a_phase_it_left_out(bench: Path) -> None:
    source = BENCH / "decisions" / "decisions.json"
    full = json.loads((BENCH / "decisions" / "memory-and-settings" / "decisions.json").read_text())  # memory measured
    _copy_run(source, bench / "old" / "decisions.json", "2030-01-01 00:00:00 UTC", memory=full["memory"],
              targets=full["targets"])
    _copy_run(source, bench / "new" / "decisions.json", "2030-02-01 00:00:00 UTC")
    _copy_run(source, bench / "quick" / "decisions.json", "2030-03-01 00:00:00 UTC",
              meta={**json.loads(source.read_text())["meta"], "quick": True})
    page = benchmarks_page.render(bench)
    assert "**Latest run**: 2030-02-01 00:00:00 UTC" in page
    assert "--skip-memory --skip-knobs --out " in page  # the command that writes the files where they are
    assert "### Memory: the latest run that measured it" in page
    assert "**Run**: 2030-01-01 00:00:00 UTC" in page
    assert "2030-03-01" not in page  # a quick run is never a figure
    assert "| Memory: RSS within" in page and "| 2030-01-01 00:00 UTC," in page


def test_a_run_that_met_fewer_targets_says_so(bench: Path) -> None:
    source = BENCH / "decisions" / "decisions.json"
    results = json.loads(source.read_text())
    results["targets"] = [{**target, "met": False} for target in results["targets"]]
    _copy_run(source, bench / "decisions.json", "2030-01-01 00:00:00 UTC", targets=results["targets"])
    page = benchmarks_page.render(bench)
    assert f"0 of {len(results['targets'])} targets met in the latest runs" in page


def _adapter_alone(run: dict[str, Any]) -> dict[str, Any]:
    """The same run as `--adapter --skip-throughput --skip-conformance` would have written it."""
    alone = {key: value for key, value in run.items() if key not in ("throughput", "conformance")}
    alone["systems"] = {"adapter": run["systems"]["adapter"]}
    return alone


def test_a_system_one_run_without_peers_takes_them_from_the_latest_run_with_them(bench: Path) -> None:
    source = BENCH / "systemone" / "systemone.json"
    assert len(json.loads(source.read_text())["systems"]) > 1, "the committed System One run is the one with peers"
    alone = bench / "alone" / "systemone.json"
    alone.parent.mkdir(parents=True)
    alone.write_text(json.dumps(_adapter_alone(json.loads(source.read_text()))))
    _copy_run(alone, alone, "2030-02-01 00:00:00 UTC")
    _copy_run(source, bench / "peers" / "systemone.json", "2030-01-01 00:00:00 UTC")
    page = benchmarks_page.render(bench)
    assert "### Beside the other servers: the latest run with them" in page
    assert "adapter / semif-serve: **" in page and "#### Conformance (`jevcompat test`)" in page
    assert page.index("**Latest run**: 2030-02-01") < page.index("**Run**: 2030-01-01")


def test_a_latest_run_with_its_peers_is_shown_once(bench: Path) -> None:
    _copy_run(BENCH / "systemone" / "systemone.json", bench / "systemone.json", "2030-01-01 00:00:00 UTC")
    page = benchmarks_page.render(bench)
    assert "### Beside the other servers" not in page
    assert page.count("| semif-serve | 1 |") == 2  # fresh and just-read states, once each
    assert page.count("adapter / semif-serve: **") == 1


def test_a_run_is_reported_only_when_it_wrote_under_docs_bench(bench: Path, tmp_path: Path) -> None:
    _copy_run(BENCH / "systemone" / "systemone.json", bench / "run" / "systemone.json",
              "2030-02-01 00:00:00 UTC")
    assert benchmarks_page.refresh(tmp_path / "elsewhere") is None
    assert not (bench.parent / "benchmarks.md").exists()
    assert benchmarks_page.refresh(bench / "run") == bench.parent / "benchmarks.md"
    assert "2030-02-01 00:00:00 UTC" in (bench.parent / "benchmarks.md").read_text()
