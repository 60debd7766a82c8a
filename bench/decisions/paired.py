"""Scenarios measured in pairs: floor, adapter, reference, chat, llama-server's /completion ("server") and
SemIf's serial-prefix mode take turns on the same request.

The machine is shared and its load drifts by the minute; measuring one system
for minutes and then the next would compare load levels as much as systems.
Here all of them are up at once (idle servers use no CPU) and, request by
request, each system answers the same decision in a rotating order, with a
short pause between turns so the previous system's threads have stopped
spinning (a peer's llama.cpp built with OpenMP spins a few ms after each call).
Ratios are then taken between measurements seconds apart.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from bench.common import http_runs
from bench.common.http_runs import Outcome
from bench.common.inprocess import Model, SerialPrefix, floor_ms, kept_opening, reference_ms, shared_opening
from bench.common.workload import Spec
from bench.decisions import completion
from bench.decisions.config import FRESH, Config, Scenario
from scripts.common.stats import summarize

SETTLE_S = 0.05  # libgomp (a peer's OpenMP build) spins a few ms after a parallel region before it sleeps
ANSWER_SAMPLES = 4


class Systems:
    """The ways to answer one decision, each a function of the request spec."""

    def __init__(self, model: Model, adapter: httpx.Client, chat: httpx.Client | None,
                 server: httpx.Client | None = None, serial: SerialPrefix | None = None) -> None:
        self.model, self.adapter, self.chat = model, adapter, chat
        self.server, self.serial = server, serial
        self.kept: dict[Spec, int] = {}  # state tokens the adapter keeps from a state it answered before
        self.shared: dict[Spec, int] = {}  # the longest opening shared with one (what llama-server could reuse)
        self.adapter_seen: list[Spec] = []  # every request the adapter answered, in order (all in its host cache)

    def names(self, config: Config, scenario: Scenario) -> list[str]:
        names = ["floor", "adapter"]
        if scenario.mode == FRESH and scenario.name in config.fresh_floor:
            names.append("floor_fresh")
        if scenario.name in config.reference:
            names.append("reference")
        if self.chat is not None and scenario.name in config.chat:
            names.append("chat")
        plain = scenario.debias == "none"  # the peers score plain letters; permute is the adapter's own
        if self.server is not None and plain:
            names.append("server")
        if self.serial is not None and plain and (scenario.mode != FRESH or scenario.name in config.reference):
            names.append("serial")
        return names

    def measure(self, name: str, scenario: Scenario, spec: Spec) -> float | Outcome:
        if name == "floor":
            return floor_ms(self.model, self.model.tokens(spec), scenario.cached_chunks, self.kept.get(spec, 0))
        if name == "floor_fresh":
            return floor_ms(self.model, self.model.tokens(spec), 0)
        if name == "reference":
            return reference_ms(self.model, spec)[0]
        if name == "adapter":
            self.adapter_seen.append(spec)
            return http_runs.post(self.adapter, "/invocations", http_runs.encode(spec))
        if name == "server":
            assert self.server is not None
            return http_runs.post(self.server, completion.PATH, completion.body(self.model, spec))
        if name == "serial":
            assert self.serial is not None
            return self.serial.decide(spec).ms
        assert self.chat is not None
        return http_runs.post(self.chat, "/v1/chat/completions", http_runs.chat_body(spec))


def _tokens(model: Model, scenario: Scenario, specs: list[Spec], systems: Systems) -> dict[str, Any]:
    planned, kept = [model.tokens(spec) for spec in specs], systems.kept
    cached = [sum(len(t) for _, t in tokens.chunks[:scenario.cached_chunks]) + kept.get(spec, 0)
              for spec, tokens in zip(specs, planned, strict=True)]
    first = planned[0]
    return {
        "head": len(first.chunks[0][1]),
        "state": round(sum(len(t.chunks[1][1]) for t in planned) / len(planned)),
        "question": round(sum(len(t.common) for t in planned) / len(planned)),
        "branch": len(first.branches[0]), "branches": len(first.branches),
        "prompt": round(sum(t.prefix + len(t.common) + len(t.branches[0]) for t in planned) / len(planned)),
        "uncached": round(sum(t.prefix + len(t.common) - hit + sum(len(b) for b in t.branches)
                              for t, hit in zip(planned, cached, strict=True)) / len(planned)),
        "expected_cached": cached,
        "kept_opening": [kept.get(spec, 0) for spec in specs],
        "shared_opening": [systems.shared.get(spec, 0) for spec in specs],
    }


def _adapter_summary(outcomes: list[Outcome]) -> dict[str, Any]:
    ok = [o for o in outcomes if o.ok and o.document]
    timing = [o.document["timing"] for o in ok if o.document]
    return {
        "latency_ms": summarize([o.ms for o in ok]),
        "server_total_ms": summarize([t["total_ms"] for t in timing]),
        "http_overhead_ms": summarize([o.ms - t["total_ms"] for o, t in zip(ok, timing, strict=True)]),
        "reported_cached_tokens": [int(t["cached_tokens"]) for t in timing],
        "reported_evaluated_tokens": [int(t["evaluated_tokens"]) for t in timing],
        "reported_prompt_tokens": [int(t["prompt_tokens"]) for t in timing],
        "failures": http_runs.failures(outcomes),
    }


def _chat_summary(outcomes: list[Outcome], options: int) -> dict[str, Any]:
    answers = [http_runs.chat_answer(o) for o in outcomes]
    timings = [o.document.get("timings", {}) for o in outcomes if o.ok and o.document]
    return {
        "latency_ms": summarize([o.ms for o in outcomes if o.ok]),
        "http_failures": http_runs.failures(outcomes),
        "parse_failures": sum(a is None or http_runs.parse_choice(a, options) is None for a in answers),
        "answers": answers[:ANSWER_SAMPLES],
        "generated_tokens": summarize([float(t.get("predicted_n", 0)) for t in timings]),
        "prompt_tokens_evaluated": summarize([float(t.get("prompt_n", 0)) for t in timings]),
    }


def _server_summary(model: Model, outcomes: list[Outcome], options: int) -> dict[str, Any]:
    """llama-server's latency, and its own token counters request by request (None: no answer)."""
    counters = [completion.counters(o) for o in outcomes]
    return {
        "latency_ms": summarize([o.ms for o in outcomes if o.ok]),
        "failures": http_runs.failures(outcomes),
        "prompt_tokens": [c["prompt"] if c else None for c in counters],
        "cached_tokens": [c["cached"] if c else None for c in counters],
        "evaluated_tokens": [c["evaluated"] if c else None for c in counters],
        "letters_found": sum(completion.letter_probabilities(model, o, options) is not None for o in outcomes),
    }


def paired_scenario(systems: Systems, config: Config, ordinal: int, scenario: Scenario) -> dict[str, Any]:
    warmup, measured = config.specs(scenario, ordinal)
    names = systems.names(config, scenario)
    for spec in warmup:  # warms every system; for a same-state scenario, puts the state in each cache
        for name in names:
            systems.measure(name, scenario, spec)
    samples: dict[str, list[Any]] = {name: [] for name in names}
    if scenario.mode == FRESH:  # the adapter answers them in this order: each keeps the best opening seen so far
        seen = [systems.model.tokens(spec) for spec in dict.fromkeys(systems.adapter_seen)]
        for spec in measured:
            tokens = systems.model.tokens(spec)
            systems.kept[spec] = max((kept_opening(systems.model, held, tokens) for held in seen), default=0)
            systems.shared[spec] = max((shared_opening(held, tokens) for held in seen), default=0)
            seen.append(tokens)
    for index, spec in enumerate(measured):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            time.sleep(SETTLE_S)
            samples[name].append(systems.measure(name, scenario, spec))
    result: dict[str, Any] = {"tokens": _tokens(systems.model, scenario, measured, systems), "systems": names,
                              "floor_ms": summarize(samples["floor"]),
                              "adapter": _adapter_summary(samples["adapter"])}
    if "floor_fresh" in samples:
        result["floor_fresh_ms"] = summarize(samples["floor_fresh"])
    if "reference" in samples:
        result["reference_ms"] = summarize(samples["reference"])
    if "chat" in samples:
        result["chat"] = _chat_summary(samples["chat"], scenario.options)
    if "server" in samples:
        result["server"] = _server_summary(systems.model, samples["server"], scenario.options)
    if "serial" in samples:
        result["serial_ms"] = summarize(samples["serial"])
    times = {name: [_ms(value) for value in values] for name, values in samples.items()}
    result["samples_ms"] = {name: [None if v is None else round(v, 2) for v in values]
                            for name, values in times.items()}
    result["paired"] = {f"{a}/{b}": _paired(times[a], times[b]) for a, b in PAIRS if a in times and b in times}
    return result


PAIRS = (("adapter", "floor"), ("reference", "adapter"), ("chat", "adapter"), ("floor_fresh", "floor"),
         ("adapter", "server"), ("serial", "adapter"))


def _ms(value: float | Outcome) -> float | None:
    if isinstance(value, Outcome):
        return value.ms if value.ok else None
    return value


def _paired(numerators: list[float | None], denominators: list[float | None]) -> dict[str, float | int]:
    """Ratios request by request (same prompt, seconds apart): prompts of other lengths and slow drifts in
    the machine's load cancel out, which a ratio of two medians over different prompts does not do."""
    return summarize([a / b for a, b in zip(numerators, denominators, strict=True) if a is not None and b], 4)


def paired_phase(model: Model, config: Config, adapter_url: str, chat_url: str | None,
                 *, server_url: str | None = None, serial: SerialPrefix | None = None) -> dict[str, Any]:
    with httpx.Client(base_url=adapter_url, timeout=http_runs.TIMEOUT) as adapter, \
            httpx.Client(base_url=chat_url or adapter_url, timeout=http_runs.TIMEOUT) as chat, \
            httpx.Client(base_url=server_url or adapter_url, timeout=http_runs.TIMEOUT) as server:
        systems = Systems(model, adapter, chat if chat_url else None, server if server_url else None, serial)
        return {scenario.name: paired_scenario(systems, config, ordinal, scenario)
                for ordinal, scenario in config.numbered()}
