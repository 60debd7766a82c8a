"""What the likelihood methods cost against letters: the same decisions, the three methods taking turns.

Each request is answered by the adapter three times, once per `scoring`, in a rotating order, seconds apart;
the cost of a method is the median of its per-request ratios to letters (issue 10's target: <= 1.5x for 4
options on a medium state, fresh and same-state). Fresh: every method gets a state of its own each time (of the
same size: likelihood and pmi read the same prompt, so a shared state would be cached for whichever came
second), one criterion throughout (the usual case: one question asked of many tickets), so pmi's content-free
baseline is known after the warm-up. Same state: one state, a new criterion each time, so pmi computes its
baseline on every request; `baseline_cached` says how often it was known.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from bench.common import http_runs
from bench.common.http_runs import Outcome
from bench.common.workload import Spec
from bench.decisions.config import FRESH, Config, Scenario
from scripts.common.stats import summarize

METHODS = ("letters", "likelihood", "pmi")
SETTLE_S = 0.05
FIXED_QUESTION = 7  # fresh scenarios: the one criterion asked of every state


def _specs(scenario: Scenario, ordinal: int, count: int) -> list[list[Spec]]:
    """Per request, one spec per method (same decision, another `scoring`); the first request warms up."""
    base = 400_000 + 1000 * ordinal
    found = []
    for index in range(count):
        found.append([Spec(scenario.size, base + len(METHODS) * index + offset, FIXED_QUESTION, scenario.options,
                           scoring=method) if scenario.mode == FRESH
                      else Spec(scenario.size, base, index, scenario.options, scoring=method)
                      for offset, method in enumerate(METHODS)])
    return found


def _summary(outcomes: list[Outcome]) -> dict[str, Any]:
    ok = [o for o in outcomes if o.ok and o.document]
    timing = [o.document["timing"] for o in ok]
    return {"latency_ms": summarize([o.ms for o in ok]),
            "evaluated_tokens": summarize([float(t["evaluated_tokens"]) for t in timing]),
            "cached_tokens": summarize([float(t["cached_tokens"]) for t in timing]),
            "baseline_cached": sum(bool(t.get("baseline_cached")) for t in timing),
            "scoring": sorted({str(o.document.get("scoring")) for o in ok}),
            "failures": http_runs.failures(outcomes)}


def method_phase(adapter_url: str, config: Config) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with httpx.Client(base_url=adapter_url, timeout=http_runs.TIMEOUT) as client:
        for ordinal, scenario in enumerate(config.method_scenarios):
            warmup, *measured = _specs(scenario, ordinal, config.repeats + 1)
            for spec in warmup:  # every method's head and (same-state) the state in the caches; pmi's baseline
                http_runs.post(client, "/invocations", http_runs.encode(spec))
            outcomes: dict[str, list[Outcome]] = {method: [] for method in METHODS}
            for index, specs in enumerate(measured):
                turn = index % len(specs)
                for spec in specs[turn:] + specs[:turn]:
                    time.sleep(SETTLE_S)
                    outcomes[spec.scoring].append(http_runs.post(client, "/invocations", http_runs.encode(spec)))
            entry: dict[str, Any] = {method: _summary(found) for method, found in outcomes.items()}
            letters = [o.ms if o.ok else None for o in outcomes["letters"]]
            for method in METHODS[1:]:
                pairs = [o.ms / base for o, base in zip(outcomes[method], letters, strict=True) if o.ok and base]
                entry[method]["over_letters"] = summarize(pairs, 4)
            results[scenario.name] = entry
    return results
