"""The System One run as markdown: the targets of issue 26 for the first system, then every system's rows."""

from __future__ import annotations

from typing import Any

from bench.common.tables import cell_text, table_lines

EXTRA_QUESTION_LIMIT = 1.0  # each question beyond the first costs no more than the floor of its own tokens
OPTIONS_LIMIT = 1.2  # a choice of 2 to 255 options within 1.2x the floor of its tokens
FRESH_LIMIT = 1.1  # a fresh decision of either contract within 1.10x its evaluated tokens decoded in one call


def _target(name: str, measured: str, met: bool | None) -> list[Any]:
    return [name, measured, "-" if met is None else met]


def _computed_tokens(rows: dict[str, dict[str, Any]]) -> bool:
    """Whether the server said what it computed (`x_timing`) for every row: a floor of what it merely read
    (`usage`) says nothing about its cost."""
    return all(row["tokens_source"] == ["x_timing"] for row in rows.values() if row["answered"])


def targets(results: dict[str, Any]) -> list[list[Any]]:
    """Issue 26's two cost targets, for the first system (ours, when the adapter runs)."""
    name = next(iter(results["systems"]))
    if not all(_computed_tokens(results[phase]["rows"][name]) for phase in ("questions", "options")):
        return [_target(f"{name}: cost against the floor of its own evaluated tokens",
                        "not measurable: the server does not report the tokens it computed (`x_timing`)", None)]
    found = []
    questions = results["questions"]
    by_state = questions.get("warm_extra_question") or questions["extra_question"]
    extra = [e for e in by_state[name] if e["over_floor"] is not None]
    if extra:
        worst = max(extra, key=lambda e: e["over_floor"])
        found.append(_target(
            f"{name}: each question beyond the first <= {EXTRA_QUESTION_LIMIT:.1f}x the floor of its own tokens"
            + (" (state already read)" if "warm_extra_question" in questions else ""),
            "; ".join(f"{e['questions']} questions: {e['extra_ms']:.1f} ms per extra question vs floor "
                      f"{e['extra_floor_ms']:.1f} ms ({e['over_floor']:.3f}x, {e['extra_evaluated_tokens']} tokens)"
                      for e in extra), worst["over_floor"] <= EXTRA_QUESTION_LIMIT))
    rows = results["options"]["rows"][name]
    measured = {count: row for count, row in rows.items() if row["over_floor"].get("p50") is not None}
    if measured:
        worst_count = max(measured, key=lambda count: measured[count]["over_floor"]["p50"])
        answered_all = all(row["answered"] == row["requests"] for row in rows.values())
        found.append(_target(
            f"{name}: a choice of {', '.join(rows)} options <= {OPTIONS_LIMIT:.1f}x the floor of its tokens",
            "; ".join(f"{count}: {row['over_floor']['p50']:.3f}x" for count, row in measured.items())
            + f"; worst {worst_count} options; every option count answered: {cell_text(answered_all)}",
            measured[worst_count]["over_floor"]["p50"] <= OPTIONS_LIMIT and answered_all))
    fresh = _fresh_ratios(results, name)
    if fresh:
        found.append(_target(f"{name}: a fresh decision of either contract <= {FRESH_LIMIT:.2f}x the floor of its "
                             "evaluated tokens in one call",
                             "; ".join(f"{label}: {value:.3f}x" for label, value in fresh.items()),
                             max(fresh.values()) <= FRESH_LIMIT))
    return found


def _fresh_ratios(results: dict[str, Any], name: str) -> dict[str, float]:
    """Paired p50 over the floor of the fresh rows of few options: System One's one question and 2-option choice,
    and each SemIf row."""
    rows = {"System One, 1 question": results["questions"]["rows"][name].get("1"),
            "System One, choice of 2": results["options"]["rows"][name].get("2")}
    rows |= {f"SemIf, {count} options": row for count, row in results.get("semif", {}).get("rows", {})
             .get(name, {}).items()}
    return {label: row["over_floor"]["p50"] for label, row in rows.items()
            if row and row["over_floor"].get("p50") is not None}


def _row_lines(label: str, rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for system, by_value in rows.items():
        for value, row in by_value.items():
            lines.append([system, value, row["answered"], row["refused"], row["failed"],
                          row["latency_ms"].get("p50"), row["latency_ms"].get("p95"),
                          row["evaluated_tokens"].get("p50"), ", ".join(row["tokens_source"]) or "-",
                          row["floor_ms"].get("p50"), row["over_floor"].get("p50")])
    return table_lines(["system", label, "answered", "refused", "failed", "p50 ms", "p95 ms", "evaluated tok p50",
                   "tokens from", "floor p50 ms", "over floor (paired p50)"], lines)


def _conformance_lines(conformance: dict[str, Any]) -> list[str]:
    lines = []
    for system, verdict in conformance.items():
        must, should = verdict.get("MUST") or {}, verdict.get("SHOULD") or {}
        limits = verdict.get("limits") or {}
        lines.append([system, verdict.get("verdict") or f"no report ({verdict.get('error', '')[:80]})",
                      f"{must.get('passed', '-')}/{must.get('tested', '-')}",
                      f"{should.get('passed', '-')}/{should.get('tested', '-')}",
                      ", ".join(verdict.get("failed") or []) or "-",
                      ", ".join(f"{k} {v}" for k, v in limits.items()) or "-", verdict.get("wall_s")])
    return ["## Conformance (`jevcompat test`)", "",
            *table_lines(["system", "verdict", "MUST passed/tested", "SHOULD passed/tested", "failed", "limits found",
                     "suite s"], lines)]


def _throughput_lines(throughput: dict[str, Any]) -> list[str]:
    workload, systems = throughput["workload"], throughput["systems"]
    first = next(iter(systems.values()))["decisions_per_s"]
    lines = [[name, s["decisions_per_s"], ", ".join(cell_text(v) for v in s["per_round"]),
              s["requests"], s["errors"], ", ".join(str(v) for v in s["statuses"]), s["latency_ms"].get("p50"),
              s["latency_ms"].get("p95"), round(s["decisions_per_s"] / first, 3) if first and s["decisions_per_s"]
              else None] for name, s in systems.items()]
    return [f"## Throughput: {workload['clients']} clients, {workload['requests_per_client']} fresh "
            f"{workload['size']} tickets each, {workload['questions_per_request']} questions per ticket, "
            f"{workload['rounds']} round(s)", "",
            *table_lines(["system", "decisions/s", "per round", "requests", "errors", "statuses", "p50 ms", "p95 ms",
                     f"vs {next(iter(systems))}"], lines)]


def _questions_lines(title: str, rows: dict[str, dict[str, Any]], extra: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [f"## {title}", "", *_row_lines("questions", rows),
            "Each question beyond the first: per round, the request with k questions minus the one with one "
            "question asked in the same round, p50 over the rounds, over k - 1 (unpaired: p50 at k minus p50 at "
            "one):", "",
            *table_lines(["system", "questions", "ms per extra question", "its floor ms", "over floor",
                     "tokens per extra question", "unpaired over floor"],
                    [[name, e["questions"], e["extra_ms"], e["extra_floor_ms"], e["over_floor"],
                      e["extra_evaluated_tokens"], e["unpaired_over_floor"]]
                     for name, costs in extra.items() for e in costs])]


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [f"# System One benchmark ({'quick' if meta['quick'] else 'full'} run)", "",
             f"{meta['started']}, {meta['cpu']}, {meta['cpus']} CPUs, model `{meta['model']}`, commit "
             f"`{meta.get('commit', '-')}`. Load average before/"
             f"after: {meta['load_before']} / {meta['load_after']}. Wall time {meta['wall_s']:.0f} s. Systems: "
             + ", ".join(f"{name} ({url})" for name, url in results["systems"].items())
             + ". Latencies in ms, client side. The floor: raw `llama_decode` of each answer's own evaluated tokens, "
             "laid out as the server reports them (`tokens from`: x_timing, semif, or usage for what it read), in "
             "process; ratios are medians of per-request pairs.", ""]
    found = targets(results)
    if found:
        lines += ["## Targets", "", *table_lines(["target", "measured", "met"], found)]
    if "conformance" in results:
        lines += _conformance_lines(results["conformance"])
    questions = results["questions"]
    lines += _questions_lines(f"Questions about one fresh {questions['size']} state", questions["rows"],
                              questions["extra_question"])
    if "warm_rows" in questions:
        lines += _questions_lines(f"Questions about a {questions['size']} state the server has just read (an "
                                  "uncounted question about it first)", questions["warm_rows"],
                                  questions["warm_extra_question"])
    options = results["options"]
    lines += [f"## One choice about a fresh {options['size']} state, by option count", "",
              *_row_lines("options", options["rows"])]
    if "semif" in results:
        lines += [f"## Fresh SemIf decisions (`POST /invocations`, pmi) about a {results['semif']['size']} state",
                  "", *_row_lines("options", results["semif"]["rows"])]
    if "throughput" in results:
        lines += _throughput_lines(results["throughput"])
    return "\n".join(lines)
