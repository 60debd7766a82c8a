"""Results -> per-scenario rows, the targets of issues 6, 10 and 11 (met or missed, by how much), and a markdown
report."""

from __future__ import annotations

from typing import Any

from bench.common.tables import cell_text, table_lines
from scripts.common.stats import ratio

OVERHEAD_LIMIT = 1.10
REUSE_LIMIT = 1.20
SAME_STATE_SPEEDUP = 1.5
INTERLEAVED_OVER_SERVER = 1.2  # issue 11
FRESH_OVER_SERVER = 1.0
RESTORE_SHARE = 0.01
IDENTICAL_MS = 5.0
METHOD_COST_LIMIT = 1.5  # issue 10: likelihood and pmi against letters


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
        row.update(_peer_columns(run))
        table.append(row)
    return table


def _peer_columns(run: dict[str, Any]) -> dict[str, Any]:
    """llama-server (/completion) and serial-prefix columns; token counts compared request by request."""
    found: dict[str, Any] = {}
    server, paired = run.get("server"), run["paired"]
    if server:
        ours = run["adapter"]["reported_prompt_tokens"]
        found.update(server_p50=server["latency_ms"].get("p50"),
                     adapter_over_server=paired.get("adapter/server", {}).get("p50"),
                     prompt_tokens_equal=ours == server["prompt_tokens"],
                     adapter_prompt_tokens=_mean(ours), server_prompt_tokens=_mean(server["prompt_tokens"]),
                     adapter_evaluated=_mean(run["adapter"]["reported_evaluated_tokens"]),
                     server_evaluated=_mean(server["evaluated_tokens"]),
                     server_cached=_mean(server["cached_tokens"]))
    if "serial_ms" in run:
        found.update(serial_p50=run["serial_ms"].get("p50"),
                     serial_over_adapter=paired.get("serial/adapter", {}).get("p50"))
    return found


def _mean(values: list[int | None]) -> float | None:
    known = [value for value in values if value is not None]
    return round(sum(known) / len(known), 1) if known else None


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
    found += _cache_targets(results, table)
    return found


def _cache_targets(results: dict[str, Any], table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 11's targets (traffic, tokens, restore, repeats, memory) and issue 10's cost of the methods."""
    found: list[dict[str, Any]] = []
    interleaved = results["traffic"]["interleaved"]["systems"]
    if "server" in interleaved:
        ours, theirs = interleaved["adapter"]["throughput_per_s"], interleaved["server"]["throughput_per_s"]
        rounds = results["traffic"]["interleaved"]["adapter_over_server_per_round"]
        floor = interleaved.get("floor", {}).get("throughput_per_s")
        against_floor = (f"; the floor for these tokens {floor:.3f}/s: adapter {ratio(ours, floor):.0%} of it, "
                         f"llama-server {ratio(theirs, floor):.0%}, the target {INTERLEAVED_OVER_SERVER}x "
                         f"{ratio(INTERLEAVED_OVER_SERVER * theirs, floor):.0%}") if floor else ""
        found.append(_target(
            f"Interleaved workload: adapter throughput >= {INTERLEAVED_OVER_SERVER}x llama-server's with its "
            "prompt cache",
            f"{ours:.3f} vs {theirs:.3f} decisions/s ({ratio(ours, theirs):.2f}x; per round "
            f"{', '.join(f'{r:.2f}x' for r in rounds)}); serial prefix "
            f"{interleaved['serial']['throughput_per_s']:.3f}/s{against_floor}",
            ratio(ours, theirs) >= INTERLEAVED_OVER_SERVER))
    fresh = [row for row in table if row["scenario"].endswith("/fresh") and row.get("adapter_over_server")]
    if fresh:
        worst = max(fresh, key=lambda row: row["adapter_over_server"])
        equal = all(row["prompt_tokens_equal"] for row in fresh)
        evaluated = ", ".join(f"{row['scenario']} {row['adapter_evaluated']} vs {row['server_evaluated']}"
                              for row in fresh)
        found.append(_target(
            f"Fresh decisions: prompt tokens == llama-server's for the same prompt; p50 <= {FRESH_OVER_SERVER}x "
            "llama-server",
            f"prompt tokens equal in every request: {cell_text(equal)}; adapter/server worst "
            f"{worst['adapter_over_server']:.3f}x ({worst['scenario']}); evaluated (uncached) tokens, adapter vs "
            f"server: {evaluated}", equal and worst["adapter_over_server"] <= FRESH_OVER_SERVER))
    restore = results["restore"]
    slowest = max(restore, key=lambda entry: entry["restore_over_recompute"])
    found.append(_target(
        f"A cached prefix restore costs < {RESTORE_SHARE:.0%} of recomputing it (and the numbers do not move)",
        "; ".join(f"{e['size']} ({e['tokens']} tokens, {e['bytes'] / 2**20:.1f} MiB): {e['restore_ms']:.2f} ms vs "
                  f"{e['recompute_ms']:.0f} ms ({e['restore_over_recompute']:.2%}), bit-identical "
                  f"{cell_text(e['bit_identical'])}" for e in restore),
        slowest["restore_over_recompute"] < RESTORE_SHARE and all(e["bit_identical"] for e in restore)))
    same = results["identical"]
    p50 = same["latency_ms"].get("p50", float("inf"))
    found.append(_target(
        f"The identical-request path < {IDENTICAL_MS:.0f} ms end to end",
        f"p50 {p50:.2f} ms, max {same['latency_ms'].get('max', float('nan')):.2f} ms over {same['repeats']} "
        f"repeats (first answer {same['first_ms']:.0f} ms); from the result cache {same['from_result_cache']} of "
        f"{same['repeats']}; probabilities identical: {cell_text(same['identical_probabilities'])}",
        p50 < IDENTICAL_MS and same["from_result_cache"] == same["repeats"] and same["identical_probabilities"]))
    memory = results.get("memory")
    if memory:
        found.append(_target(
            "Memory: RSS within SEMIF_CACHE_BYTES + model + context (+10%) after "
            f"{memory['states']:,} distinct states",
            f"peak {memory['rss_peak_bytes'] / 2**20:.0f} MiB vs {memory['allowed_bytes'] / 2**20:.0f} MiB allowed "
            f"(cache {memory['cache_bytes'] / 2**20:.0f} + model {memory['model_bytes'] / 2**20:.0f} + "
            f"{memory.get('contexts', 1)} x context {memory['context_bytes'] / 2**20:.0f} MiB, +10%); "
            f"at start {memory['rss_start_bytes'] / 2**20:.0f} "
            f"MiB, growth {memory['growth_bytes'] / 2**20:.0f} MiB; {memory['errors']} errors",
            memory["within"] and memory["errors"] == 0))
    costs = [(name, method, entry[method]["over_letters"].get("p50"))
             for name, entry in results["methods"].items() for method in ("likelihood", "pmi")]
    known = [cost for cost in costs if cost[2] is not None]
    if known:
        worst_cost = max(known, key=lambda cost: cost[2])
        found.append(_target(
            f"likelihood and pmi p50 <= {METHOD_COST_LIMIT}x letters (fresh and same-state)",
            ", ".join(f"{method} {name} {value:.2f}x" for name, method, value in known)
            + f"; worst {worst_cost[1]} {worst_cost[0]}", worst_cost[2] <= METHOD_COST_LIMIT))
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
def markdown(results: dict[str, Any]) -> str:
    meta, table = results["meta"], results["rows"]
    lines = [f"# Decision benchmark ({'quick' if meta['quick'] else 'full'} run)", "",
             f"{meta['started']}, {meta['cpu']}, {meta['cpus']} CPUs (quota), {meta['threads']} llama.cpp threads, "
             f"model `{meta['model']}`, commit `{meta['commit']}`. Load average before/after: "
             f"{meta['load_before']} / {meta['load_after']}. Wall time {meta['wall_s']:.0f} s. "
             "Latencies in ms; p50 over n requests after warm-up.", "", "## Targets", ""]
    lines += table_lines(["target", "measured", "met"],
                    [[t["target"], t["measured"] + (f" ({t['note']})" if t["note"] else ""), t["met"]]
                     for t in results["targets"]])
    lines += ["## Latency per scenario (size/options/mode)", ""]
    lines += table_lines(["scenario", "prompt tok", "uncached tok", "floor fresh", "floor uncached", "adapter p50",
                     "adapter p95", "IQR", "n", "adapter/floor (paired)", "ratio of p50s", "HTTP ms",
                     "reference p50", "ref/adapter (paired)", "chat p50", "chat/adapter (paired)"],
                    [[r["scenario"], r["prompt_tokens"], r["uncached_tokens"], r["floor_fresh_p50"],
                      r["floor_uncached_p50"], r["adapter_p50"], r["adapter_p95"], r["adapter_iqr"], r["n"],
                      r["adapter_over_floor"], r["adapter_over_floor_of_p50s"], r["http_overhead_p50"],
                      r["reference_p50"],
                      r.get("reference_over_adapter"), r["chat_p50"], r.get("chat_over_adapter")] for r in table])
    lines += _peer_lines(table)
    lines += ["## debias: permute", ""]
    lines += table_lines(["scenario", "permute p50", "default p50", "cost", "uncached tokens ratio"],
                    [[c["scenario"], c["permute_p50"], c["default_p50"], c["cost_ratio"], c["uncached_tokens_ratio"]]
                     for c in results["permute"]])
    concurrency = results["concurrency"]
    lines += [f"## Concurrency ({concurrency['scenario']}, queue {concurrency['queue_size']})", ""]
    lines += table_lines(["clients", "requests", "errors", "decisions/s", "p50", "p95", "p95 bound", "service p50"],
                    [[lv["clients"], lv["requests"], lv["errors"], lv["throughput_per_s"], lv["latency_ms"]["p50"],
                      lv["latency_ms"]["p95"], lv["p95_bound_ms"], lv["service_ms"]["p50"]]
                     for lv in concurrency["levels"]])
    over = concurrency["overflow"]
    lines += [f"Overflow burst: {over['sent']} at once, {over['ok']} answered, {over['refused_503']} refused with 503 "
              f"({over['refused_with_retry_after']} with Retry-After, slowest refusal {over['refused_max_ms']} ms), "
              f"{over['timeouts']} timeouts.", ""]
    fan = results["fanout"]
    lines += [f"## Fan-out: {fan['questions']} questions about one {fan['size']} state (ms per decision)", ""]
    lines += table_lines(["mode", "p50", "min", "max"],
                    [[mode, s["p50"], s["min"], s["max"]] for mode, s in fan["per_decision_ms"].items()])
    lines += _traffic_lines(results["traffic"])
    lines += _method_lines(results["methods"])
    lines += _cache_lines(results)
    lines += ["## Python overhead per decision, in process (llama_decode excluded)", ""]
    lines += table_lines(["request", "p50 ms", "max ms"],
                    [[kind, s["p50"], s["max"]] for kind, s in results["python_overhead_ms"].items()])
    batching, chunked = results["probes"]["cross_request_batching"], results["probes"]["chunked_evaluation"]
    lines += ["## Probes", "",
              f"- Two requests' suffixes in one decode: {batching['together_ms']:.0f} ms vs {batching['apart_ms']:.0f} "
              f"ms one after the other ({batching['speedup']:.3f}x); each request's numbers bit-identical to alone: "
              f"{', '.join(cell_text(b) for b in batching['bit_identical'])} (max logit difference "
              f"{batching['max_abs_logit_diff']:.3g}).",
              "- Fixed boundaries (head cached): state, then question + branch: "
              f"{chunked['state_then_suffix_ms']:.0f} ms;"
              f" three decodes (before): {chunked['three_decodes_ms']:.0f} ms; one decode of the same tokens "
              f"{chunked['one_decode_ms']:.0f} ms ({chunked['state_then_suffix_ratio']:.3f}x and "
              f"{chunked['three_decodes_ratio']:.3f}x); bit-identical to one decode: "
              f"{', '.join(f'{k} {cell_text(v)}' for k, v in chunked['bit_identical'].items())}.", ""]
    lines += knob_lines(results)
    return "\n".join(lines)


def knob_lines(results: dict[str, Any]) -> list[str]:
    knobs = results.get("knobs") or []
    variants = results.get("variants") or []
    if not knobs and not variants:
        return []
    lines = ["## llama.cpp settings and builds (floor, p50 ms)", ""]
    entries = [(k["label"], k) for k in knobs] + [(f"child: {v['label']}", v["floors"]) for v in variants]
    keys = ["fresh", "suffix", "long_fresh"]
    lines += table_lines(["setting", *[f"{key} ({entries[0][1][key]['tokens']} tok)" if key in entries[0][1] else key
                                  for key in keys]],
                    [[label, *[entry.get(key, {}).get("p50") for key in keys]] for label, entry in entries])
    return lines


def _peer_lines(table: list[dict[str, Any]]) -> list[str]:
    peers = [row for row in table if "server_p50" in row or "serial_p50" in row]
    if not peers:
        return []
    lines = ["## Against llama-server (/completion, --parallel 4, prompt cache) and the serial-prefix mode", ""]
    return lines + table_lines(
        ["scenario", "adapter p50", "server p50", "adapter/server (paired)", "prompt tok adapter / server",
         "same tokens", "evaluated tok adapter / server", "server reused tok", "serial p50",
         "serial/adapter (paired)"],
        [[r["scenario"], r["adapter_p50"], r.get("server_p50"), r.get("adapter_over_server"),
          f"{cell_text(r.get('adapter_prompt_tokens'))} / {cell_text(r.get('server_prompt_tokens'))}",
          r.get("prompt_tokens_equal"),
          f"{cell_text(r.get('adapter_evaluated'))} / {cell_text(r.get('server_evaluated'))}", r.get("server_cached"),
          r.get("serial_p50"), r.get("serial_over_adapter")] for r in peers])


def _traffic_lines(traffic: dict[str, Any]) -> list[str]:
    lines = ["## Real traffic (systems taking turns, round by round)", ""]
    for workload in traffic.values():
        agreement = ", ".join(f"{name} {a['same_top']}/{a['compared']} same top (max |dp| {a['max_abs_dp']})"
                              for name, a in workload["agreement_with_adapter"].items() if a)
        restore = workload["systems"]["adapter"].get("restore_ms", {})
        lines += [f"{workload['workload']}: adapter/server decisions/s per round "
                  f"{workload['adapter_over_server_per_round'] or '-'}; the adapter's host-memory restores p50 "
                  f"{cell_text(restore.get('p50'))} ms (n {restore.get('n', 0)}); against the adapter's answers: "
                  f"{agreement or '-'}.", ""]
        lines += table_lines(["system", "requests", "errors", "decisions/s", "p50", "p95", "reused tok p50",
                         "evaluated tok p50", "adapter cache sources"],
                        [[name, s["requests"], s["errors"], s["throughput_per_s"], s["latency_ms"].get("p50"),
                          s["latency_ms"].get("p95"), s["cached_tokens"].get("p50"), s["evaluated_tokens"].get("p50"),
                          ", ".join(f"{k} {v}" for k, v in s.get("cache_sources", {}).items()) or "-"]
                         for name, s in workload["systems"].items()])
    return lines


def _method_lines(methods: dict[str, Any]) -> list[str]:
    lines = ["## Scoring methods (adapter, taking turns per request)", ""]
    rows_ = [[name, method, entry[method]["latency_ms"].get("p50"), entry[method]["latency_ms"].get("p95"),
              entry[method].get("over_letters", {}).get("p50"), entry[method]["evaluated_tokens"].get("p50"),
              entry[method]["baseline_cached"] if method == "pmi" else "-", len(entry[method]["failures"])]
             for name, entry in methods.items() for method in entry]
    return lines + table_lines(["scenario", "method", "p50", "p95", "over letters (paired)", "evaluated tok p50",
                           "pmi baseline cached", "failures"], rows_)


def _cache_lines(results: dict[str, Any]) -> list[str]:
    lines = ["## Caches", ""]
    lines += table_lines(["prefix", "tokens", "MiB", "recompute ms", "save ms", "restore ms", "restore/recompute",
                     "bit-identical"],
                    [[e["size"], e["tokens"], round(e["bytes"] / 2**20, 2), e["recompute_ms"], e["save_ms"],
                      e["restore_ms"], e["restore_over_recompute"], e["bit_identical"]] for e in results["restore"]])
    same = results["identical"]
    lines += [f"Identical request: first {same['first_ms']:.0f} ms, then p50 {same['latency_ms'].get('p50')} ms / "
              f"max {same['latency_ms'].get('max')} ms end to end (server total p50 "
              f"{same['server_total_ms'].get('p50')} ms), {same['from_result_cache']}/{same['repeats']} from the "
              "result cache.", ""]
    return lines + memory_lines(results.get("memory"))


def memory_lines(memory: dict[str, Any] | None) -> list[str]:
    """The memory phase's paragraph (none when the run left the phase out)."""
    if not memory:
        return []
    return [f"Memory: {memory['states']:,} distinct states in JSON Lines batches of {memory['batch']} "
            f"({memory['decisions_per_s']} decisions/s, {memory['seconds']:.0f} s), SEMIF_CACHE_BYTES "
            f"{memory['cache_bytes']:,}: RSS {memory['rss_start_bytes'] / 2**20:.0f} MiB at start, peak "
            f"{memory['rss_peak_bytes'] / 2**20:.0f} MiB, allowed {memory['allowed_bytes'] / 2**20:.0f} MiB; "
            "readings (states: MiB): "
            + ", ".join(f"{r['states']}: {r['rss_kib'] / 1024:.0f}" for r in memory["readings"]) + ".", ""]
