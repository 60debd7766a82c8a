"""The caches' own figures: restoring a prefix against recomputing it, the identical-request path, and memory
after many distinct states (an adapter of its own, with a small SEMIF_CACHE_BYTES, so evictions start early).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import http_runs, servers
from bench.common.inprocess import Model, restore_probe
from bench.common.workload import Spec
from bench.decisions.config import Config
from scripts.common.stats import summarize

JSONLINES = {"content-type": "application/jsonlines"}
TINY_OPTIONS = [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]
MEMORY_SLACK = 1.10  # issue 11: RSS within SEMIF_CACHE_BYTES + model + context, +10%


def restore_phase(model: Model, config: Config) -> list[dict[str, Any]]:
    repeats = 2 if config.quick else 5
    return [{"size": size, **restore_probe(model, model.tokens(Spec(size, 97_000 + index, 0, 4)), repeats)}
            for index, size in enumerate(config.restore_sizes)]


def identical_phase(url: str, config: Config) -> dict[str, Any]:
    """One fresh decision, then the same bytes again and again: answered from the result cache, end to end."""
    body = http_runs.encode(Spec("medium" if not config.quick else "short", 98_000, 0, 4))
    with httpx.Client(base_url=url, timeout=http_runs.TIMEOUT) as client:
        first = http_runs.post(client, "/invocations", body)
        repeats = [http_runs.post(client, "/invocations", body) for _ in range(config.identical_repeats)]
    ok = [o for o in repeats if o.ok and o.document]
    reference = first.document["probabilities"] if first.ok and first.document else None
    return {"first_ms": round(first.ms, 2), "latency_ms": summarize([o.ms for o in ok]),
            "server_total_ms": summarize([float(o.document["timing"]["total_ms"]) for o in ok]),
            "from_result_cache": sum(o.document["timing"]["cache_source"] == "result" for o in ok),
            "identical_probabilities": all(o.document["probabilities"] == reference for o in ok),
            "repeats": len(repeats), "failures": http_runs.failures([first, *repeats])}


def _tiny_batch(first: int, count: int) -> bytes:
    """Distinct states at the least decode cost (about 45 uncached tokens each): JSON Lines, one per line."""
    return b"".join(json.dumps({"decision": {"id": "m", "state": f"Case {first + i}.", "question": "Ok?",
                                             "options": TINY_OPTIONS}}).encode() + b"\n" for i in range(count))


def memory_phase(model_path: Path, context_bytes: int, config: Config) -> dict[str, Any]:
    """RSS of an adapter with a small prefix cache, read while it answers `states` decisions about distinct
    states (JSON Lines batches), against SEMIF_CACHE_BYTES + model file + the KV cache of each worker's context."""
    memory = config.memory
    env = {**config.settings, "SEMIF_CACHE_BYTES": str(memory.cache_bytes),
           "SEMIF_QUEUE_SIZE": str(max(32, memory.batch))}
    batches = -(-memory.states // memory.batch)
    every = max(1, batches // memory.checkpoints)
    readings: list[dict[str, int]] = []
    errors = 0
    with servers.adapter(model_path, env) as adapter, httpx.Client(base_url=adapter.url,
                                                                   timeout=http_runs.TIMEOUT) as client:
        ready = adapter.ready_fields()
        start_kib = adapter.rss_kib() or 0
        started = time.perf_counter()
        for batch in range(batches):
            count = min(memory.batch, memory.states - batch * memory.batch)
            response = client.post("/invocations", content=_tiny_batch(700_000 + batch * memory.batch, count),
                                   headers=JSONLINES)
            lines = response.text.splitlines() if response.status_code == 200 else []
            errors += count - sum("error" not in json.loads(line) for line in lines)
            if (batch + 1) % every == 0 or batch == batches - 1:
                readings.append({"states": batch * memory.batch + count, "rss_kib": adapter.rss_kib() or 0})
        seconds = time.perf_counter() - started
    model_bytes = model_path.stat().st_size
    contexts = int(ready.get("workers") or 1)  # each decision worker has a context (a KV cache) of its own
    bound = memory.cache_bytes + model_bytes + context_bytes * contexts
    peak = max(reading["rss_kib"] for reading in readings) * 1024
    return {"states": memory.states, "batch": memory.batch, "cache_bytes": memory.cache_bytes,
            "cache_bytes_reported": ready.get("prefix_cache_bytes"), "model_bytes": model_bytes,
            "context_bytes": context_bytes, "contexts": contexts, "bound_bytes": bound,
            "allowed_bytes": int(bound * MEMORY_SLACK),
            "rss_start_bytes": start_kib * 1024, "rss_peak_bytes": peak, "readings": readings, "errors": errors,
            "growth_bytes": peak - start_kib * 1024,
            "seconds": round(seconds, 1), "decisions_per_s": round(memory.states / seconds, 2) if seconds else None,
            "within": peak <= bound * MEMORY_SLACK}
