"""Results -> per-scenario rows, the targets of issue 6 (met or missed, by how much), and a markdown report."""

from __future__ import annotations

from typing import Any

from scripts.stats import ratio

OVERHEAD_LIMIT = 1.10
REUSE_LIMIT = 1.20
SAME_STATE_SPEEDUP = 1.5


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per scenario: the same requests as answered by each system; p50s, and ratios taken request by
    request (`paired`), which the targets use: n is small and each repeat is another prompt."""
    table = []
    for name, run in results["scenarios"].items():
        adapter, tokens, paired = run["adapter"], run["tokens"], run["paired"]
        row: dict[str, Any] = {
            "scenario": name, "prompt_tokens": tokens["prompt"], "uncached_tokens": tokens["uncached"],
            "floor_fresh_p50": run.get("floor_fresh_ms", {}).get("p50"), "floor_uncached_p50": run["floor_ms"]["p50"],
            "adapter_p50": adapter["latency_ms"].get("p50"), "adapter_p95": adapter["latency_ms"].get("p95"),
            "adapter_iqr": adapter["latency_ms"].get("iqr"), "n": adapter["latency_ms"]["n"],
            "http_overhead_p50": adapter["http_overhead_ms"].get("p50"),
            "reference_p50": run.get("reference_ms", {}).get("p50"),
            "chat_p50": run.get("chat", {}).get("latency_ms", {}).get("p50"),
            "cache_as_expected": adapter["reported_cached_tokens"] == tokens["expected_cached"],
            "adapter_over_floor": paired["adapter/floor"]["p50"],
            "adapter_over_floor_of_p50s": ratio(adapter["latency_ms"].get("p50", 0.0), run["floor_ms"]["p50"]),
        }
        if "reference/adapter" in paired:
            row["reference_over_adapter"] = paired["reference/adapter"]["p50"]
            row["reference_over_adapter_min"] = paired["reference/adapter"]["min"]
        if "chat/adapter" in paired:
            row["chat_over_adapter"] = paired["chat/adapter"]["p50"]
        table.append(row)
    return table


def permute_costs(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_name = {row["scenario"]: row for row in table}
    costs = []
    for name, row in by_name.items():
        if name.endswith("/permute") and name.removesuffix("/permute") in by_name:
            default = by_name[name.removesuffix("/permute")]
            costs.append({"scenario": name, "permute_p50": row["adapter_p50"], "default_p50": default["adapter_p50"],
                          "cost_ratio": ratio(row["adapter_p50"], default["adapter_p50"]),
                          "uncached_tokens_ratio": ratio(row["uncached_tokens"], default["uncached_tokens"])})
    return costs


def _target(name: str, measured: str, met: bool, note: str = "") -> dict[str, Any]:
    return {"target": name, "measured": measured, "met": bool(met), "note": note}


def targets(results: dict[str, Any], table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    default = [row for row in table if not row["scenario"].endswith("/permute")]
    found: list[dict[str, Any]] = []
    worst = max(default, key=lambda row: row["adapter_over_floor"])
    found.append(_target(
        f"Adapter p50 <= {OVERHEAD_LIMIT:.2f}x the floor of the same uncached tokens",
        f"worst {worst['adapter_over_floor']:.3f}x ({worst['scenario']}; ratio of p50s "
        f"{worst['adapter_over_floor_of_p50s']:.3f}x); best {min(row['adapter_over_floor'] for row in default):.3f}x",
        worst["adapter_over_floor"] <= OVERHEAD_LIMIT,
        f"{(worst['adapter_over_floor'] - OVERHEAD_LIMIT) * 100:+.1f} points against the limit"))
    same = [row for row in default if row["scenario"].endswith("/same")]
    head = results["head_tokens"]
    recomputed = sum(cached < head for run in results["scenarios"].values()
                     for cached in run["adapter"]["reported_cached_tokens"])
    worst_same = max(same, key=lambda row: row["adapter_over_floor"])
    found.append(_target(
        f"Same-state decision <= {REUSE_LIMIT:.1f}x the floor of its uncached suffix; head never recomputed",
        f"worst {worst_same['adapter_over_floor']:.3f}x ({worst_same['scenario']}); head ({head} tokens) "
        f"recomputed {recomputed} times; cache hits as expected: {all(r['cache_as_expected'] for r in table)}",
        worst_same["adapter_over_floor"] <= REUSE_LIMIT and recomputed == 0))
    fresh = [row for row in default if row.get("reference_over_adapter") and row["scenario"].endswith("/fresh")]
    if fresh:
        slowest = min(fresh, key=lambda row: row["reference_over_adapter"])
        found.append(_target("Never slower than the fresh reference method on fresh states",
                             f"reference/adapter >= {slowest['reference_over_adapter']:.3f}x ({slowest['scenario']}; "
                             f"lowest single pair {slowest['reference_over_adapter_min']:.3f}x)",
                             slowest["reference_over_adapter"] >= 1.0))
    fan = results["fanout"]
    reference_same = next((row["reference_p50"] for row in table
                           if row["scenario"] == f"{fan['size']}/{fan['options']}/same" and row["reference_p50"]), None)
    if reference_same:
        per_decision = fan["per_decision_ms"]["back_to_back"]["p50"]
        speedup = ratio(reference_same, per_decision)
        found.append(_target(
            f">= {SAME_STATE_SPEEDUP}x faster per decision than the reference on a same-state workload",
            f"{speedup:.2f}x ({fan['questions']} questions about one {fan['size']} state, back to back: "
            f"{per_decision:.0f} ms per decision vs {reference_same:.0f} ms)", speedup >= SAME_STATE_SPEEDUP))
    chat_rows = [row for row in table if row.get("chat_over_adapter")]
    if chat_rows:
        slowest = min(chat_rows, key=lambda row: row["chat_over_adapter"])
        ours = sum(len(run["adapter"]["failures"]) for run in results["scenarios"].values())
        chats = [run["chat"] for run in results["scenarios"].values() if "chat" in run]
        theirs = sum(chat["parse_failures"] + len(chat["http_failures"]) for chat in chats)
        asked = sum(chat["latency_ms"]["n"] + len(chat["http_failures"]) for chat in chats)
        found.append(_target("Faster p50 than llama-server answering as text; zero failures on our side",
                             f"chat/adapter >= {slowest['chat_over_adapter']:.2f}x ({slowest['scenario']}); "
                             f"adapter failures {ours}; chat parse/HTTP failures {theirs} of {asked}",
                             slowest["chat_over_adapter"] > 1.0 and ours == 0))
    found.append(_concurrency_target(results["concurrency"]))
    return found


def _concurrency_target(run: dict[str, Any]) -> dict[str, Any]:
    levels = run["levels"]
    first, last = levels[0], levels[-1]
    errors = sum(level["errors"] for level in levels)
    bounded = all(level["latency_ms"]["p95"] <= level["p95_bound_ms"] for level in levels)
    over = run["overflow"]
    clean_refusals = over["refused_503"] == over["refused_with_retry_after"] and over["timeouts"] == 0 \
        and over["other"] == 0 and over["refused_503"] == over["sent"] - run["queue_size"]
    return _target(
        f"Throughput at {last['clients']} clients >= 1 client, no errors, p95 bounded by the queue; excess gets 503",
        f"{last['throughput_per_s']:.2f}/s vs {first['throughput_per_s']:.2f}/s "
        f"({ratio(last['throughput_per_s'], first['throughput_per_s']):.3f}x); errors {errors}; p95 "
        f"{last['latency_ms']['p95']:.0f} ms vs bound {last['p95_bound_ms']:.0f} ms; overflow: "
        f"{over['refused_503']} of {over['sent']} refused with 503 (Retry-After on {over['refused_with_retry_after']},"
        f" slowest refusal {over['refused_max_ms']:.0f} ms), {over['timeouts']} timeouts",
        last["throughput_per_s"] >= first["throughput_per_s"] and errors == 0 and bounded and clean_refusals)


# -- markdown ---------------------------------------------------------------------------------------------
def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.0f}"
    return str(value)


def _table(headers: list[str], lines: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_cell(value) for value in line) + " |" for line in lines]
    return [*out, ""]


def markdown(results: dict[str, Any]) -> str:
    meta, table = results["meta"], results["rows"]
    lines = [f"# Decision benchmark ({'quick' if meta['quick'] else 'full'} run)", "",
             f"{meta['started']}, {meta['cpu']}, {meta['cpus']} CPUs (quota), {meta['threads']} llama.cpp threads, "
             f"model `{meta['model']}`, commit `{meta['commit']}`. Load average before/after: "
             f"{meta['load_before']} / {meta['load_after']}. Wall time {meta['wall_s']:.0f} s. "
             "Latencies in ms; p50 over n requests after warm-up.", "", "## Targets", ""]
    lines += _table(["target", "measured", "met"],
                    [[t["target"], t["measured"] + (f" ({t['note']})" if t["note"] else ""), t["met"]]
                     for t in results["targets"]])
    lines += ["## Latency per scenario (size/options/mode)", ""]
    lines += _table(["scenario", "prompt tok", "uncached tok", "floor fresh", "floor uncached", "adapter p50",
                     "adapter p95", "IQR", "n", "adapter/floor (paired)", "ratio of p50s", "HTTP ms",
                     "reference p50", "ref/adapter (paired)", "chat p50", "chat/adapter (paired)"],
                    [[r["scenario"], r["prompt_tokens"], r["uncached_tokens"], r["floor_fresh_p50"],
                      r["floor_uncached_p50"], r["adapter_p50"], r["adapter_p95"], r["adapter_iqr"], r["n"],
                      r["adapter_over_floor"], r["adapter_over_floor_of_p50s"], r["http_overhead_p50"],
                      r["reference_p50"],
                      r.get("reference_over_adapter"), r["chat_p50"], r.get("chat_over_adapter")] for r in table])
    lines += ["## debias: permute", ""]
    lines += _table(["scenario", "permute p50", "default p50", "cost", "uncached tokens ratio"],
                    [[c["scenario"], c["permute_p50"], c["default_p50"], c["cost_ratio"], c["uncached_tokens_ratio"]]
                     for c in results["permute"]])
    concurrency = results["concurrency"]
    lines += [f"## Concurrency ({concurrency['scenario']}, queue {concurrency['queue_size']})", ""]
    lines += _table(["clients", "requests", "errors", "decisions/s", "p50", "p95", "p95 bound", "service p50"],
                    [[lv["clients"], lv["requests"], lv["errors"], lv["throughput_per_s"], lv["latency_ms"]["p50"],
                      lv["latency_ms"]["p95"], lv["p95_bound_ms"], lv["service_ms"]["p50"]]
                     for lv in concurrency["levels"]])
    over = concurrency["overflow"]
    lines += [f"Overflow burst: {over['sent']} at once, {over['ok']} answered, {over['refused_503']} refused with 503 "
              f"({over['refused_with_retry_after']} with Retry-After, slowest refusal {over['refused_max_ms']} ms), "
              f"{over['timeouts']} timeouts.", ""]
    fan = results["fanout"]
    lines += [f"## Fan-out: {fan['questions']} questions about one {fan['size']} state (ms per decision)", ""]
    lines += _table(["mode", "p50", "min", "max"],
                    [[mode, s["p50"], s["min"], s["max"]] for mode, s in fan["per_decision_ms"].items()])
    lines += ["## Python overhead per decision, in process (llama_decode excluded)", ""]
    lines += _table(["request", "p50 ms", "max ms"],
                    [[kind, s["p50"], s["max"]] for kind, s in results["python_overhead_ms"].items()])
    batching, chunked = results["probes"]["cross_request_batching"], results["probes"]["chunked_evaluation"]
    lines += ["## Probes", "",
              f"- Two requests' suffixes in one decode: {batching['together_ms']:.0f} ms vs {batching['apart_ms']:.0f} "
              f"ms one after the other ({batching['speedup']:.3f}x); each request's numbers bit-identical to alone: "
              f"{', '.join(_cell(b) for b in batching['bit_identical'])} (max logit difference "
              f"{batching['max_abs_logit_diff']:.3g}).",
              "- Fixed boundaries (head cached): state, then question + branch: "
              f"{chunked['state_then_suffix_ms']:.0f} ms;"
              f" three decodes (before): {chunked['three_decodes_ms']:.0f} ms; one decode of the same tokens "
              f"{chunked['one_decode_ms']:.0f} ms ({chunked['state_then_suffix_ratio']:.3f}x and "
              f"{chunked['three_decodes_ratio']:.3f}x); bit-identical to one decode: "
              f"{', '.join(f'{k} {_cell(v)}' for k, v in chunked['bit_identical'].items())}.", ""]
    lines += _knob_lines(results)
    return "\n".join(lines)


def _knob_lines(results: dict[str, Any]) -> list[str]:
    knobs = results.get("knobs") or []
    variants = results.get("variants") or []
    if not knobs and not variants:
        return []
    lines = ["## llama.cpp settings and builds (floor, p50 ms)", ""]
    entries = [(k["label"], k) for k in knobs] + [(f"child: {v['label']}", v["floors"]) for v in variants]
    keys = ["fresh", "suffix", "long_fresh"]
    lines += _table(["setting", *[f"{key} ({entries[0][1][key]['tokens']} tok)" if key in entries[0][1] else key
                                  for key in keys]],
                    [[label, *[entry.get(key, {}).get("p50") for key in keys]] for label, entry in entries])
    return lines
