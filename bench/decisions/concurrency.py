"""Adapter-only HTTP phases: fan-out, closed-loop concurrency, and a burst past the queue."""

from __future__ import annotations

from typing import Any

from bench.common import http_runs
from bench.common.http_runs import Outcome
from bench.common.workload import Spec
from bench.decisions.config import Config
from scripts.common.stats import summarize


def _timing(outcomes: list[Outcome], key: str) -> list[float]:
    return [float(o.document["timing"][key]) for o in outcomes if o.ok and o.document]


def fanout(url: str, config: Config) -> dict[str, Any]:
    """N questions about one new state: sent together, back to back, and N fresh states for comparison."""
    size, n, options = config.fanout_size, config.fanout, config.fanout_options
    runs: dict[str, list[float]] = {"together": [], "back_to_back": [], "fresh_states": []}
    failures: list[str] = []
    for repeat in range(config.fanout_repeats):
        base = 80_000 + 100 * repeat
        same = [http_runs.encode(Spec(size, base + 1, i, options)) for i in range(n)]
        wall, outcomes = http_runs.burst(url, same)
        runs["together"].append(wall * 1000 / n)
        failures += http_runs.failures(outcomes)
        same = [http_runs.encode(Spec(size, base + 2, i, options)) for i in range(n)]
        outcomes = http_runs.sequential(url, same)
        runs["back_to_back"].append(sum(o.ms for o in outcomes) / n)
        failures += http_runs.failures(outcomes)
        fresh = [http_runs.encode(Spec(size, base + 10 + i, i, options)) for i in range(n)]
        outcomes = http_runs.sequential(url, fresh)
        runs["fresh_states"].append(sum(o.ms for o in outcomes) / n)
        failures += http_runs.failures(outcomes)
    return {"questions": n, "size": size, "options": options,
            "per_decision_ms": {mode: summarize(values) for mode, values in runs.items()}, "failures": failures}


def concurrency(url: str, config: Config) -> dict[str, Any]:
    """Closed-loop clients at each level on the same fresh-state workload; errors counted, never retried.

    The levels take turns in two rounds (1, 4, 16, 1, 4, 16), so a drift in the machine's load does not
    decide which level looks faster.
    """
    scenario = config.concurrency_scenario
    http_runs.sequential(url, [http_runs.encode(Spec(scenario.size, 70_000, 0, scenario.options))])
    rounds = 1 if config.quick else 2
    per_round = config.concurrency_requests // rounds
    walls: dict[int, float] = dict.fromkeys(config.concurrency, 0.0)
    outcomes: dict[int, list[Outcome]] = {clients: [] for clients in config.concurrency}
    for round_ in range(rounds):
        for level, clients in enumerate(config.concurrency):
            first = 71_000 + 1000 * (level + len(config.concurrency) * round_)
            bodies = [http_runs.encode(Spec(scenario.size, first + i, i, scenario.options)) for i in range(per_round)]
            wall, answered = http_runs.closed_loop(url, clients, bodies)
            walls[clients] += wall
            outcomes[clients] += answered
    levels = []
    for clients in config.concurrency:
        ok = [o for o in outcomes[clients] if o.ok]
        levels.append({"clients": clients, "requests": len(outcomes[clients]), "ok": len(ok),
                       "errors": len(outcomes[clients]) - len(ok),
                       "timeouts": sum(o.error == "timeout" for o in outcomes[clients]),
                       "throughput_per_s": round(len(ok) / walls[clients], 3),
                       "latency_ms": summarize([o.ms for o in ok]), "queue_ms": summarize(_timing(ok, "queue_ms")),
                       "service_ms": summarize([t - q for t, q in zip(_timing(ok, "total_ms"), _timing(ok, "queue_ms"),
                                                                     strict=True)])})
    slowest_alone = levels[0]["latency_ms"]["max"]
    for entry in levels:  # a request waits behind at most min(clients, queue) - 1 others, each served in turn
        entry["p95_bound_ms"] = round(min(entry["clients"], config.queue_size) * slowest_alone, 1)
    return {"scenario": scenario.name, "queue_size": config.queue_size, "levels": levels,
            "overflow": overflow(url, config)}


def overflow(url: str, config: Config) -> dict[str, Any]:
    """More requests at once than the queue admits: the excess must get 503 + Retry-After at once."""
    count = config.queue_size + config.overflow_extra
    bodies = [http_runs.encode(Spec("short", 60_000, i, 2)) for i in range(count)]
    wall, outcomes = http_runs.burst(url, bodies)
    refused = [o for o in outcomes if o.status == 503]
    return {"sent": count, "ok": sum(o.ok for o in outcomes), "refused_503": len(refused),
            "refused_with_retry_after": sum(o.retry_after is not None for o in refused),
            "refused_max_ms": round(max((o.ms for o in refused), default=0.0), 2),
            "timeouts": sum(o.error == "timeout" for o in outcomes),
            "other": sum(o.status not in (200, 503) for o in outcomes), "wall_s": round(wall, 2)}
