"""The benchmark in its smallest configuration, run as a user runs it: it must keep working, not be fast.

No timing assertions (speed targets live in the benchmark's own output); only that every phase ran,
the outputs are complete, and the behaviour the figures rely on held (cache hits as planned, no
adapter failures, refusals past the queue carry Retry-After and nothing timed out, the peers answered
the same prompts, restores and repeats gave the same numbers).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common.http_runs import parse_choice
from scripts.dev.tiny_model import tiny_model

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_parse_choice_reads_letters_phrases_and_descriptions() -> None:
    assert parse_choice("B", 3) == 1
    assert parse_choice(' "C".', 3) == 2
    assert parse_choice("The answer is A", 3) == 0
    assert parse_choice("Refund the order in full, clearly.", 3) == 0
    assert parse_choice("D", 3) is None  # not one of the three letters
    assert parse_choice("I think so", 3) is None


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    # One thread: nothing of it waits at a barrier for a thread that a busier process holds off its core, so `make
    # test` runs it beside the model tests at the lowest priority (tests/conftest.py: ON_ONE_THREAD).
    # The tiny random-weight model (scripts/dev/tiny_model.py): every phase runs as on a served model, the option
    # letters among the top tokens included, at a twentieth of the decode; no figure of it is read.
    subprocess.run([sys.executable, "-m", "bench.decisions", "--quick", "--threads", "1", "--out", str(out),
                    "--model", str(tiny_model()), "--variant-env", "OMP_WAIT_POLICY=passive"],
                   check=True, timeout=1200, cwd=ROOT)
    return out


def test_quick_run_writes_json_markdown_and_chart(quick_run: Path) -> None:
    results = json.loads((quick_run / "decisions.json").read_text())
    assert (quick_run / "decisions.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (quick_run / "decisions.md").read_text()
    for section in ("## Targets", "## Concurrency", "## Against llama-server", "## Real traffic",
                    "## Scoring methods", "## Caches"):
        assert section in report, section
    assert {row["scenario"] for row in results["rows"]} == {"short/2/fresh", "short/2/same", "short/2/same/permute"}
    for row in results["rows"]:
        assert row["floor_uncached_p50"] > 0 and row["adapter_p50"] > 0
        assert row["cache_as_expected"], row  # the adapter reused exactly the chunks the floor assumed
    assert len(results["targets"]) == 12 and all(isinstance(t["met"], bool) for t in results["targets"])
    assert results["meta"]["load_before"] and results["meta"]["threads"] == 1  # --threads reached the adapter
    assert [v["label"] for v in results["variants"]][1] == "OMP_WAIT_POLICY=passive"
    assert {k["label"] for k in results["knobs"]} == {"default", "threads=1"}
    assert {k["threads"] for k in results["knobs"]} == {1}  # and every model the run opened


def test_quick_run_behaviour_behind_the_figures(quick_run: Path) -> None:
    results = json.loads((quick_run / "decisions.json").read_text())
    assert all(not run["adapter"]["failures"] for run in results["scenarios"].values())
    assert not results["fanout"]["failures"]
    levels = results["concurrency"]["levels"]
    assert [level["clients"] for level in levels] == [1, 2] and all(level["errors"] == 0 for level in levels)
    overflow = results["concurrency"]["overflow"]
    assert overflow["refused_503"] >= 1 and overflow["refused_503"] == overflow["refused_with_retry_after"]
    assert overflow["timeouts"] == 0 and overflow["other"] == 0
    assert overflow["ok"] + overflow["refused_503"] == overflow["sent"]
    chat = results["scenarios"]["short/2/fresh"]["chat"]
    assert chat["latency_ms"]["n"] + len(chat["http_failures"]) == 2  # answered or counted
    assert 0 <= chat["parse_failures"] <= 2


def test_quick_run_peers_answer_the_same_prompts(quick_run: Path) -> None:
    """llama-server's /completion read exactly the adapter's tokens; the serial-prefix mode ran where it applies."""
    results = json.loads((quick_run / "decisions.json").read_text())
    rows = {row["scenario"]: row for row in results["rows"]}
    fresh, same = rows["short/2/fresh"], rows["short/2/same"]
    assert fresh["prompt_tokens_equal"] and same["prompt_tokens_equal"], (fresh, same)
    assert fresh["server_p50"] > 0 and fresh["adapter_over_server"] > 0
    assert same["server_cached"] > results["head_tokens"]  # llama-server reused the state too
    assert same["serial_p50"] > 0 and "server_p50" not in rows["short/2/same/permute"]
    server = results["scenarios"]["short/2/fresh"]["server"]
    assert not server["failures"] and server["letters_found"] == 2


def test_quick_run_traffic_and_methods(quick_run: Path) -> None:
    results = json.loads((quick_run / "decisions.json").read_text())
    interleaved, skewed = results["traffic"]["interleaved"], results["traffic"]["skewed"]
    for workload, requests in ((interleaved, 4), (skewed, 4)):
        assert set(workload["systems"]) == {"adapter", "server", "serial", "floor"}
        for system in workload["systems"].values():
            assert (system["requests"], system["errors"]) == (requests, 0) and system["throughput_per_s"] > 0
        assert workload["agreement_with_adapter"]["server"]["compared"] == requests
        # the floor decodes in the adapter's own calls: its numbers are the adapter's, bit for bit
        assert workload["agreement_with_adapter"]["floor"] == {"same_top": requests, "compared": requests,
                                                               "max_abs_dp": 0.0}
    # each client's second question found its state (kv or restored from host memory), never recomputed
    adapter = interleaved["systems"]["adapter"]
    assert adapter["cache_sources"].get("kv", 0) + adapter["cache_sources"].get("host", 0) >= 2
    assert interleaved["systems"]["serial"]["cached_tokens"]["max"] > results["head_tokens"]
    for name in ("short/2/fresh", "short/2/same"):
        entry = results["methods"][name]
        for method in ("letters", "likelihood", "pmi"):
            assert entry[method]["scoring"] == [method] and not entry[method]["failures"]
        assert entry["likelihood"]["over_letters"]["n"] == 2
    assert results["methods"]["short/2/fresh"]["pmi"]["baseline_cached"] == 2  # one criterion: known after warm-up


def test_quick_run_caches_keep_the_numbers(quick_run: Path) -> None:
    results = json.loads((quick_run / "decisions.json").read_text())
    (restore,) = results["restore"]
    assert restore["bit_identical"] and restore["bytes"] > 0 and restore["restore_over_recompute"] > 0
    identical = results["identical"]
    assert identical["from_result_cache"] == identical["repeats"] == 2 and identical["identical_probabilities"]
    memory = results["memory"]
    assert memory["errors"] == 0 and memory["cache_bytes_reported"] == memory["cache_bytes"] == 4 * 2**20
    assert [reading["states"] for reading in memory["readings"]] == [4, 8]
    assert isinstance(memory["within"], bool) and memory["rss_peak_bytes"] > memory["model_bytes"] // 2
