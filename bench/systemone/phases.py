"""The System One phases: questions per state, options per choice, throughput, conformance; systems take turns.

Every request is answered by every system, one after the other in an order that rotates request by request (the
machine's speed drifts by the minute); the floor of each answer's own tokens is timed right after it, in this
process, while the servers are idle. The rows of a phase take turns too: each round asks every row once, so rows
compared with each other (one question against k) are measured seconds apart, not minutes. A refusal (4xx) is
recorded as one, never retried; a failure is anything else that is not a 200 answer with one answer per question.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.common.http_runs import TIMEOUT, Outcome, per_client, post
from bench.systemone.config import Config, Throughput
from bench.systemone.floor import RawFloor, reported_layout
from bench.systemone.tools import Running, conformance
from bench.systemone.workload import (
    body_text,
    options_body,
    priming_body,
    questions_body,
    semif_body,
    triage_body,
)
from scripts.common.stats import ratio, summarize

PATH = "/v1/systemone"
SEMIF_PATH = "/invocations"  # the SemIf door: our adapter's alone
# State indices per phase: far apart, so no phase (and no round) finds another's states in a cache.
QUESTIONS_BASE, OPTIONS_BASE, THROUGHPUT_BASE, WARMUP_BASE, WARM_BASE = 400_000, 500_000, 600_000, 700_000, 800_000
SEMIF_BASE = 900_000


def rotated(systems: Sequence[Running], turn: int) -> list[Running]:
    shift = turn % len(systems)
    return [*systems[shift:], *systems[:shift]]


def adapters(systems: Sequence[Running]) -> list[Running]:
    """The systems that are our adapter (they also speak the SemIf contract)."""
    return [system for system in systems if system.name == "adapter"]


def _answered(outcome: Outcome, body: dict[str, Any]) -> bool:
    document = outcome.document or {}
    if "decision" in body:  # the SemIf door: one probability per option
        return outcome.ok and len(document.get("probabilities") or ()) == len(body["decision"]["options"])
    answers = document.get("answers")
    return outcome.ok and isinstance(answers, dict) and set(answers) == set(body["questions"])


def _record(outcome: Outcome, body: dict[str, Any], floor: RawFloor | None) -> dict[str, Any]:
    """One answer: status, client latency, what the server says it computed, and the floor of that."""
    answered = _answered(outcome, body)
    layout = reported_layout(outcome.document) if answered else None
    entry: dict[str, Any] = {"status": outcome.status, "ms": round(outcome.ms, 3), "answered": answered,
                             "evaluated": layout.evaluated if layout else None,
                             "cached": layout.cached if layout else None,
                             "tokens_source": layout.source if layout else None,
                             "layout": [[p.cached, p.shared, list(p.branches)] for p in layout.pieces] if layout
                             else None, "floor_ms": None}
    if layout and floor:
        floor_ms = floor.ms(layout, body_text(body))
        entry["floor_ms"] = round(floor_ms, 3) if floor_ms is not None else None
    if not answered:
        document = outcome.document or {}
        detail = document.get("detail") or document.get("error")  # the spec's error shape, or a server's own
        entry["error"] = outcome.error or (json.dumps(detail)[:300] if detail else "no answer for every question")
    return entry


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [r for r in records if r["answered"]]
    floors = [r for r in answered if r["floor_ms"]]
    return {"requests": len(records), "answered": len(answered),
            "refused": sum(400 <= r["status"] < 500 for r in records),
            "failed": sum(not r["answered"] and not 400 <= r["status"] < 500 for r in records),
            "statuses": sorted({r["status"] for r in records}),
            "errors": sorted({r["error"] for r in records if r.get("error")})[:3],
            "latency_ms": summarize([r["ms"] for r in answered]),
            "evaluated_tokens": summarize([r["evaluated"] for r in answered if r["evaluated"] is not None], 1),
            "cached_tokens": summarize([r["cached"] for r in answered if r["cached"] is not None], 1),
            "tokens_source": sorted({r["tokens_source"] for r in answered if r["tokens_source"]}),
            "floor_ms": summarize([r["floor_ms"] for r in floors]),
            "over_floor": summarize([r["ms"] / r["floor_ms"] for r in floors], 3)}


def _taking_turns(systems: Sequence[Running], rows: Sequence[int], bodies: Callable[[int, int], dict[str, Any]],
                  repeats: Callable[[int], int], floor: RawFloor | None, *,
                  prime: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                  path: str = PATH) -> dict[str, dict[str, Any]]:
    """Per row value (question or option count) and system: every request and their summary, `repeats(value)`
    requests per row, in rounds that ask every row still short of its count once. With `prime`, each system is
    first sent (uncounted) `prime(body)`, right before the request it prepares."""
    records: dict[str, dict[int, list[dict[str, Any]]]] = {system.name: {value: [] for value in rows}
                                                           for system in systems}
    turn = 0
    with httpx.Client(timeout=TIMEOUT) as client:
        for repeat in range(max((repeats(value) for value in rows), default=0)):
            for value in (value for value in rows if repeat < repeats(value)):
                body = bodies(value, repeat)
                encoded = json.dumps(body).encode()
                primer = json.dumps(prime(body)).encode() if prime else None
                for system in rotated(systems, turn):
                    if primer is not None:
                        post(client, system.url + path, primer)
                    records[system.name][value].append(
                        _record(post(client, system.url + path, encoded), body, floor))
                turn += 1
    return {name: {str(value): {**_summary(entries), "samples": entries} for value, entries in by_row.items()}
            for name, by_row in records.items()}


def warm_up(systems: Sequence[Running], config: Config) -> None:
    """Requests per system that are not counted: first-request costs (allocations, the template's tokens), and
    every question and option list of the run asked once, so each row is measured in the same state (a server
    may keep what depends on the question alone, as pmi's content-free baseline of a criterion)."""
    with httpx.Client(timeout=TIMEOUT) as client:
        for index in range(config.warmup):
            state = WARMUP_BASE + 1000 * index
            bodies = [questions_body(config.size, state, max(config.question_counts))]
            bodies += [options_body(config.size, state + count, count) for count in config.option_counts]
            for body in bodies:
                encoded = json.dumps(body).encode()
                for system in systems:
                    post(client, system.url + PATH, encoded)
            for count in config.semif_option_counts:
                encoded = json.dumps(semif_body(config.size, state + 500 + count, count)).encode()
                for system in adapters(systems):
                    post(client, system.url + SEMIF_PATH, encoded)


def questions_phase(systems: Sequence[Running], config: Config, floor: RawFloor | None) -> dict[str, Any]:
    """1, 2, 4, 8 questions about one fresh state, then about a state the server has just read (an uncounted
    question about it first): the cost of each question beyond the first, measured where the state's own decode
    (and its noise, a second or so for a medium state) is not in the difference."""
    rows = _taking_turns(systems, config.question_counts,
                         lambda count, repeat: questions_body(config.size, QUESTIONS_BASE + 1000 * count + repeat,
                                                              count),
                         lambda count: config.target_repeats if count == 1 else config.repeats, floor)
    warm = _taking_turns(systems, config.question_counts,
                         lambda count, repeat: questions_body(config.size, WARM_BASE + 1000 * count + repeat, count),
                         lambda count: config.warm_repeats, floor, prime=priming_body)
    return {"size": config.size, "rows": rows, "extra_question": {name: extra_question_cost(by_count)
                                                                  for name, by_count in rows.items()},
            "warm_rows": warm, "warm_extra_question": {name: extra_question_cost(by_count)
                                                       for name, by_count in warm.items()}}


def _paired_extra(one: list[dict[str, Any]], more: list[dict[str, Any]], key: str, extra: int) -> float | None:
    """p50 over rounds of (value with k questions - value with one, asked in the same round), per extra question."""
    pairs = [b[key] - a[key] for a, b in zip(one, more, strict=False)
             if a["answered"] and b["answered"] and a[key] is not None and b[key] is not None]
    return round(float(statistics.median(pairs)) / extra, 3) if pairs else None


def extra_question_cost(by_count: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per question count k > 1: what each question beyond the first added, in time, in tokens and in floor, and
    the time against the floor of those tokens. Paired: per round, the request with k questions minus the one
    with one question asked seconds before or after it, the p50 of those over k - 1 (the machine's drift between
    rounds cancels); `unpaired_*` is p50 at k minus p50 at one."""
    def p50(row: dict[str, Any], key: str) -> float | None:
        value = row[key].get("p50")
        return None if value is None else float(value)

    def over(ms: float | None, floor_ms: float | None) -> float | None:
        return ratio(ms, floor_ms) if ms is not None and floor_ms else None

    counts = sorted(int(k) for k in by_count)
    if not counts or counts[0] != 1:
        return []
    one, costs = by_count["1"], []
    for count in counts[1:]:
        row = by_count[str(count)]
        paired = [_paired_extra(one.get("samples", []), row.get("samples", []), key, count - 1)
                  for key in ("ms", "floor_ms", "evaluated")]
        unpaired = [None if (v := p50(row, key)) is None or (b := p50(one, key)) is None
                    else round((v - b) / (count - 1), 3) for key in ("latency_ms", "floor_ms")]
        costs.append({"questions": count, "extra_ms": paired[0], "extra_floor_ms": paired[1],
                      "extra_evaluated_tokens": paired[2], "over_floor": over(paired[0], paired[1]),
                      "unpaired_extra_ms": unpaired[0], "unpaired_extra_floor_ms": unpaired[1],
                      "unpaired_over_floor": over(unpaired[0], unpaired[1])})
    return costs


def options_phase(systems: Sequence[Running], config: Config, floor: RawFloor | None) -> dict[str, Any]:
    """One choice over 2 to 255 options about a fresh state; time against the floor of its own tokens."""
    rows = _taking_turns(systems, config.option_counts,
                         lambda count, repeat: options_body(config.size, OPTIONS_BASE + 1000 * count + repeat, count),
                         lambda count: config.target_repeats if count == 2 else config.repeats, floor)
    return {"size": config.size, "rows": rows}


def semif_phase(systems: Sequence[Running], config: Config, floor: RawFloor | None) -> dict[str, Any]:
    """Fresh SemIf-contract decisions (`POST /invocations`, pmi) on the adapter, against the floor of their own
    evaluated tokens decoded in one call: the other front door onto the same core."""
    rows = _taking_turns(adapters(systems), config.semif_option_counts,
                         lambda count, repeat: semif_body(config.size, SEMIF_BASE + 1000 * count + repeat, count),
                         lambda count: config.target_repeats, floor, path=SEMIF_PATH)
    return {"size": config.size, "rows": rows}


def throughput_phase(systems: Sequence[Running], workload: Throughput) -> dict[str, Any]:
    """Decisions/s (answered questions per wall second) on the same triage tickets, clients all at once."""
    per_system: dict[str, list[dict[str, Any]]] = {system.name: [] for system in systems}
    for round_ in range(workload.rounds):
        bodies = [[triage_body(workload.size, THROUGHPUT_BASE + 10_000 * round_ + 100 * client + index)
                   for index in range(workload.requests)] for client in range(workload.clients)]
        streams = [[json.dumps(body).encode() for body in stream] for stream in bodies]
        flat = [body for stream in bodies for body in stream]
        for system in rotated(systems, round_):
            wall, outcomes = per_client(system.url, streams, PATH)
            answered = [o for o, body in zip(outcomes, flat, strict=True) if _answered(o, body)]
            decisions = sum(len(o.document["answers"]) for o in answered if o.document)
            per_system[system.name].append({
                "round": round_, "wall_s": round(wall, 3), "requests": len(outcomes), "answered": len(answered),
                "errors": len(outcomes) - len(answered), "statuses": sorted({o.status for o in outcomes}),
                "decisions": decisions, "decisions_per_s": round(decisions / wall, 3) if wall else None,
                "latency_ms": [round(o.ms, 3) for o in answered]})
    return {"workload": {"clients": workload.clients, "requests_per_client": workload.requests,
                         "rounds": workload.rounds, "size": workload.size, "questions_per_request": 3},
            "systems": {name: _throughput_summary(rounds) for name, rounds in per_system.items()}}


def _throughput_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    wall = sum(r["wall_s"] for r in rounds)
    decisions = sum(r["decisions"] for r in rounds)
    return {"decisions_per_s": round(decisions / wall, 3) if wall else None,
            "per_round": [r["decisions_per_s"] for r in rounds], "decisions": decisions,
            "requests": sum(r["requests"] for r in rounds), "errors": sum(r["errors"] for r in rounds),
            "statuses": sorted({s for r in rounds for s in r["statuses"]}),
            "latency_ms": summarize([ms for r in rounds for ms in r["latency_ms"]]), "rounds": rounds}


def conformance_phase(systems: Sequence[Running], out: Path) -> dict[str, Any]:
    """`jevcompat test` against each system, its JSON report kept beside the results."""
    return {system.name: conformance(system.url, out / f"jevcompat-{system.name}.json") for system in systems}
