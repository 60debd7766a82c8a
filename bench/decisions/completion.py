"""llama-server as a decision scorer: the adapter's letters prompt through `/completion`, one token, its top logprobs.

What a user would run instead of the adapter: llama-server with `--parallel 4` and its default host-memory
prompt cache (`--cache-ram`), given the same prompt text the adapter evaluates (its chat template rendered by
the adapter's own prompt builder) and asked for one token with `n_probs`; the option letters' probabilities
are read from the returned top logprobs. Its own counters say how many prompt tokens it read
(`tokens_evaluated`), reused from a slot or its prompt cache (`timings.cache_n`; `tokens_cached` is the slot's
length afterwards, not the reuse) and computed (`timings.prompt_n`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from bench.common.http_runs import Outcome
from bench.common.inprocess import Model
from bench.common.workload import Spec

PATH = "/completion"
N_PROBS = 64  # enough for every option letter to be among the top tokens of a lettered prompt
SETTINGS = {"SM_LLAMA_CPP_PARALLEL": "4"}  # --parallel 4; --cache-ram left at its default (8192 MiB)


def body(model: Model, spec: Spec) -> bytes:
    """The adapter's whole prompt for this decision, as text; llama-server tokenizes it (special tokens parsed)."""
    return json.dumps({"prompt": model.plan(spec).text(0), "n_predict": 1, "n_probs": N_PROBS,
                       "temperature": 0, "cache_prompt": True}).encode()


def letter_probabilities(model: Model, outcome: Outcome, options: int) -> list[float] | None:
    """Softmax over the option letters found among the top logprobs (a letter not found counts as 0)."""
    if not outcome.ok or outcome.document is None:
        return None
    try:
        top = outcome.document["completion_probabilities"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    by_id = {int(entry["id"]): float(entry["logprob"]) for entry in top}
    logprobs = [by_id.get(token, -math.inf) for token in model.letters.slot_tokens[:options]]
    peak = max(logprobs)
    if peak == -math.inf:
        return None
    weights = [math.exp(value - peak) for value in logprobs]
    return [weight / math.fsum(weights) for weight in weights]


def counters(outcome: Outcome) -> dict[str, int] | None:
    """Prompt tokens as llama-server read them, reused from its caches, and computed."""
    if not outcome.ok or outcome.document is None:
        return None
    document: dict[str, Any] = outcome.document
    timings = document.get("timings") or {}
    return {"prompt": int(document.get("tokens_evaluated", 0)), "cached": int(timings.get("cache_n", 0)),
            "evaluated": int(timings.get("prompt_n", 0))}
