"""Real traffic, systems taking turns round by round: the adapter, llama-server with its prompt cache, and
SemIf's serial-prefix mode answer the same interleaved and skewed workloads, and the machine's floor for them
(`floor.py`) decodes the same tokens with nothing around llama.cpp.

The adapter and llama-server get the requests from concurrent closed-loop clients over loopback HTTP (a client
sends its next request when its previous one is answered); the serial-prefix mode is one process taking the
same requests grouped by state (its best case), so its latencies are service times, not waits in a queue. In
each round every system answers the same requests, in a rotating order of systems; each round has states of
its own. Reported per system: decisions/s, latency p50/p95, the prompt tokens each reused from its caches.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench.common import http_runs
from bench.common.http_runs import Outcome
from bench.common.inprocess import Model, SerialAnswer, SerialPrefix
from bench.common.workload import Spec
from bench.decisions import completion
from bench.traffic.floor import TrafficFloor
from bench.traffic.workloads import Interleaved, Skewed, grouped_by_state
from scripts.common.stats import summarize

SYSTEMS = ("adapter", "server", "serial", "floor")
IN_PROCESS = ("serial", "floor")  # their latencies are service times: no queue, no HTTP
SETTLE_S = 0.5  # between systems: the previous one's threads have stopped


class Peers:
    """The systems, each able to answer a workload round given as client streams or a shared list."""

    def __init__(self, model: Model, serial: SerialPrefix, floor: TrafficFloor, adapter_url: str,
                 server_url: str | None) -> None:
        self.model, self.serial, self.floor = model, serial, floor
        self.adapter_url, self.server_url = adapter_url, server_url

    def names(self) -> tuple[str, ...]:
        return SYSTEMS if self.server_url else tuple(name for name in SYSTEMS if name != "server")

    def in_process(self, name: str, specs: list[Spec]) -> tuple[float, list[SerialAnswer], list[Spec]]:
        return self.serial_round(specs) if name == "serial" else self.floor.round(specs)

    def http(self, name: str, streams: list[list[Spec]] | None, shared: tuple[int, list[Spec]] | None) \
            -> tuple[float, list[Outcome], list[Spec]]:
        encode = http_runs.encode if name == "adapter" else (lambda spec: completion.body(self.model, spec))
        url = self.adapter_url if name == "adapter" else self.server_url
        path = "/invocations" if name == "adapter" else completion.PATH
        assert url is not None
        if streams is not None:
            wall, outcomes = http_runs.per_client(url, [[encode(s) for s in stream] for stream in streams], path)
            return wall, outcomes, [spec for stream in streams for spec in stream]
        assert shared is not None
        clients, specs = shared
        wall, outcomes = http_runs.closed_loop(url, clients, [encode(spec) for spec in specs], path)
        return wall, outcomes, specs

    def serial_round(self, specs: list[Spec]) -> tuple[float, list[SerialAnswer], list[Spec]]:
        ordered = grouped_by_state(specs)
        started = time.perf_counter()
        answers = [self.serial.decide(spec) for spec in ordered]
        return time.perf_counter() - started, answers, ordered


def _summary(name: str, wall: float, answers: list[Any], model: Model, options: int) -> dict[str, Any]:
    """decisions/s, latency, cached and evaluated tokens per request, and each answer's letter probabilities."""
    if name in IN_PROCESS:
        ok = answers
        latency = [a.ms for a in ok]
        cached = [a.cached_tokens for a in ok]
        evaluated = [a.evaluated_tokens for a in ok]
        probabilities = [a.probabilities for a in ok]
        extra: dict[str, Any] = {}
    elif name == "adapter":
        ok = [o for o in answers if o.ok and o.document]
        timing = [o.document["timing"] for o in ok]
        latency, probabilities = [o.ms for o in ok], [o.document["probabilities"] for o in ok]
        cached = [int(t["cached_tokens"]) for t in timing]
        evaluated = [int(t["evaluated_tokens"]) for t in timing]
        sources = [str(t["cache_source"]) for t in timing]
        extra = {"cache_sources": {source: sources.count(source) for source in sorted(set(sources))},
                 "restore_ms": summarize([float(t["restore_ms"]) for t in timing if t["cache_source"] == "host"])}
    else:
        ok = [o for o in answers if completion.counters(o) is not None]
        counts = [completion.counters(o) for o in ok]
        latency = [o.ms for o in ok]
        cached = [c["cached"] for c in counts if c]
        evaluated = [c["evaluated"] for c in counts if c]
        probabilities = [completion.letter_probabilities(model, o, options) for o in ok]
        extra = {}
    return {"requests": len(answers), "ok": len(ok), "errors": len(answers) - len(ok), "wall_s": round(wall, 3),
            "throughput_per_s": round(len(ok) / wall, 4) if wall else None, "latency_ms": summarize(latency),
            "cached_tokens": summarize([float(c) for c in cached]),
            "evaluated_tokens": summarize([float(e) for e in evaluated]), "probabilities": probabilities, **extra}


def _agreement(rounds: list[dict[str, Any]], other: str) -> dict[str, Any] | None:
    """Same top option as the adapter, request by request (probabilities by spec: the answer orders differ)."""
    same = total = 0
    worst = 0.0
    for entry in rounds:
        ours, theirs = entry["by_spec"].get("adapter", {}), entry["by_spec"].get(other, {})
        for key, probabilities in ours.items():
            if key not in theirs:
                continue
            mine, found = np.asarray(probabilities), np.asarray(theirs[key])
            total += 1
            same += int(np.argmax(mine) == np.argmax(found))
            worst = max(worst, float(np.abs(mine - found).max()))
    return {"same_top": same, "compared": total, "max_abs_dp": round(worst, 4)} if total else None


def _workload(peers: Peers, rounds: int, plan: Any, options: int) -> dict[str, Any]:
    """`plan(round_)` -> (client streams or None, (clients, shared list) or None)."""
    names = peers.names()
    per_round: list[dict[str, Any]] = []
    totals: dict[str, dict[str, list[Any]]] = {name: {"wall": [], "answers": []} for name in names}
    for round_ in range(rounds):
        streams, shared = plan(round_)
        entry: dict[str, Any] = {"order": [], "throughput_per_s": {}, "by_spec": {}}
        order = list(names[round_ % len(names):] + names[:round_ % len(names)])
        for name in order:
            time.sleep(SETTLE_S)
            if name in IN_PROCESS:
                specs = [s for stream in streams for s in stream] if streams is not None else shared[1]
                wall, answers, asked = peers.in_process(name, specs)
            else:
                wall, answers, asked = peers.http(name, streams, shared)
            summary = _summary(name, wall, answers, peers.model, options)
            entry["order"].append(name)
            entry["throughput_per_s"][name] = summary["throughput_per_s"]
            entry["by_spec"][name] = {(s.state_index, s.question_index): p
                                      for s, p in zip(asked, summary["probabilities"], strict=False) if p}
            totals[name]["wall"].append(wall)
            totals[name]["answers"].extend(answers)
        per_round.append(entry)
    systems = {}
    for name in names:
        summary = _summary(name, sum(totals[name]["wall"]), totals[name]["answers"], peers.model, options)
        summary.pop("probabilities")
        systems[name] = summary
    ratios = [entry["throughput_per_s"]["adapter"] / entry["throughput_per_s"][other]
              for entry in per_round for other in ("server",) if entry["throughput_per_s"].get(other)]
    result = {"systems": systems, "rounds": [{"order": e["order"], "throughput_per_s": e["throughput_per_s"]}
                                             for e in per_round],
              "adapter_over_server_per_round": [round(r, 3) for r in ratios],
              "agreement_with_adapter": {other: _agreement(per_round, other) for other in names if other != "adapter"}}
    return result


def traffic_phase(peers: Peers, interleaved: Interleaved, skewed: Skewed) -> dict[str, Any]:
    return {
        "interleaved": {"workload": interleaved.name, "clients": interleaved.clients,
                        "questions": interleaved.questions,
                        **_workload(peers, interleaved.rounds, lambda r: (interleaved.streams(r), None),
                                    interleaved.options)},
        "skewed": {"workload": skewed.name, "clients": skewed.clients, "requests": skewed.requests,
                   **_workload(peers, skewed.rounds, lambda r: (None, (skewed.clients, skewed.plan(r))),
                               skewed.options)},
    }
