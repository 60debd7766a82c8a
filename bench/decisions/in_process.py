"""In-process extras: Python overhead per decision, the two probes, and llama.cpp settings side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common.inprocess import (
    Model,
    batching_probe,
    chunking_probe,
    floor_ms,
    pipeline_overhead_ms,
)
from bench.common.workload import Spec
from bench.decisions.config import Config
from scripts.common.stats import summarize


def overhead(model: Model, config: Config) -> dict[str, Any]:
    """Python per decision inside the adapter's pipeline, llama_decode excluded, for three request kinds."""
    size, count = config.knob_size, 1 if config.quick else 3
    kinds = {
        f"{size}/4/same": [Spec(size, 90_000, i, 4) for i in range(count + 1)],
        f"{size}/16/fresh": [Spec(size, 91_000 + i, i, 16) for i in range(count + 1)],
        f"{size}/4/same/permute": [Spec(size, 92_000, i, 4, "permute") for i in range(count + 1)],
    }
    return {kind: summarize(pipeline_overhead_ms(model, specs)[1:]) for kind, specs in kinds.items()}


def probes(model: Model, config: Config) -> dict[str, Any]:
    size = config.knob_size
    first, second = model.tokens(Spec(size, 93_000, 0, 4)), model.tokens(Spec(size, 93_000, 1, 4))
    fresh = model.tokens(Spec(size, 94_000, 0, 4))
    repeats = 1 if config.quick else 2
    return {"cross_request_batching": batching_probe(model, first, second, repeats),
            "chunked_evaluation": chunking_probe(model, fresh, repeats)}


def floor_sets(models: list[Model], config: Config, long: list[bool]) -> list[dict[str, Any]]:
    """The fixed prompts every knob and library variant is timed on; the models take turns prompt by prompt,
    so a drift in the machine's load hits them all alike."""
    repeats = 1 if config.quick else 3  # quick: one measured prompt after the warm-up (the run only has to work)
    results: list[dict[str, Any]] = [{} for _ in models]
    for label, size, cached in (("fresh", config.knob_size, 0), ("suffix", config.knob_size, 2),
                                ("long_fresh", "long", 0)):
        taking_part = [index for index in range(len(models)) if label != "long_fresh" or long[index]]
        if not taking_part:
            continue
        runs = 2 if size == "long" else repeats
        specs = [Spec(size, 95_000, i, 4) if cached else Spec(size, 95_000 + i, i, 4) for i in range(runs + 1)]
        samples: dict[int, list[float]] = {index: [] for index in taking_part}
        for turn, spec in enumerate(specs):
            shift = turn % len(taking_part)
            for index in taking_part[shift:] + taking_part[:shift]:
                model = models[index]
                spent = floor_ms(model, model.tokens(spec), cached)
                if turn:  # the first prompt warms up
                    samples[index].append(spent)
        planned = models[0].tokens(specs[0])
        tokens = len(planned.branches[0]) + sum(len(t) for _, t in planned.chunks[cached:])
        for index, values in samples.items():
            results[index][label] = {**summarize(values), "tokens": tokens}
    return results


def knob_phase(model_path: Path, config: Config) -> list[dict[str, Any]]:
    """Thread count, flash attention and micro-batch size: one context each, all open, taking turns."""
    models: list[Model] = []
    try:
        for knob in config.knobs:
            models.append(Model.open(model_path, {**config.settings, **knob.env}))
        floors = floor_sets(models, config, [knob.long for knob in config.knobs])
        return [{"label": knob.label, "env": knob.env, "threads": model.settings.threads,
                 "flash_attn": model.settings.flash_attn.name.lower(), "ubatch": model.runtime.n_ubatch, **floor}
                for knob, model, floor in zip(config.knobs, models, floors, strict=True)]
    finally:
        for model in models:
            model.close()
