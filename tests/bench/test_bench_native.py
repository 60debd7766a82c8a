"""The native benchmark's report: each target stated met or missed, with the command and the server's arguments."""

from __future__ import annotations

from bench.native.conformance import report as conformance_report
from bench.native.run import native_arguments, report


def test_the_report_says_whether_each_target_was_met_per_type_and_what_fresh_numbers_cost():
    run = {"model": "m.gguf", "decision_type": "clef", "arguments": ["llama-server", "--parallel", "1"],
           "latency": [{"questions": 1, "p50_ms": {"ours": 101.0, "fresh": 100.0, "cached": 80.0},
                        "paired_ratio": {"fresh": 1.01, "cached": 1.25}, "met": True},
                       {"questions": 4, "p50_ms": {"ours": 110.0, "fresh": 100.0},
                        "paired_ratio": {"fresh": 1.1}, "met": False}],
           "throughput": {"ours": 9.0, "systems": {"ours": 9.0, "fresh": 10.0}, "ratios": {"fresh": 0.9},
                          "met": False},
           "failed": {"cached": "500 failed to get embeddings"},
           "cold_start": {"adapter_ping_s": 3.0, "native_start_s": 0.5, "direct_health_s": 0.4}}
    text = report({"runs": [run], "command": "python -m bench.native.run --type clef",
                   "machine": "x86_64, 2 CPUs", "measured": "2026-12-05 03:00 UTC"})
    doors, fresh = text.split("**What fresh numbers cost**")
    assert "101 / 100: **1.010x** met" in doors and "110 / 100: **1.100x** MISSED" in doors
    assert "9.00 / 10.00: **0.900x** MISSED" in doors and "3.00 (0.50) / 0.40" in doors
    assert "| `clef` | 101 / 80: **1.250x** | failed | failed |" in fresh  # no target, and the failure said
    assert "- `clef`, cached: 500 failed to get embeddings" in fresh
    assert "`--parallel 1`" in text and "python -m bench.native.run --type clef" in text


def test_the_native_servers_line_is_found_in_the_adapters_log():
    log = '{"event": "starting"}\n{"event": "native decision server ready", "pid": 7, "arguments": ["x"]}\n'
    assert native_arguments(log)["pid"] == 7


def test_the_conformance_report_names_each_check_a_type_did_not_pass_and_why():
    runs = [{"decision_type": "clef", "verdict": "conformant... MUST 32/32, SHOULD 12/13",
             "not_passed": {"semantics.question-order": "moved by 0.375"}},
            {"decision_type": "kev", "verdict": "MUST 33/33, SHOULD 13/13", "not_passed": {}}]
    text = conformance_report({"runs": runs, "command": "python -m bench.native.conformance",
                               "machine": "x86_64, 2 CPUs", "measured": "2026-12-06 05:00 UTC"})
    assert "| `clef` | conformant... MUST 32/32, SHOULD 12/13 | `semantics.question-order`: moved by 0.375 |" in text
    assert "| `kev` | MUST 33/33, SHOULD 13/13 | none |" in text
