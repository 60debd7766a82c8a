"""The embedded model re-encoded in other types: decode time and agreement with the original, in one run.

    .venv/bin/python -m bench.sizing.quantization [--model PATH] [--types Q8_0,Q4_0,Q4_K_M] [--repeats 5]
                                                   [--json OUT]

Each type is made with the same converter as `semif package --convert` (llama.cpp's quantizer). Decode
time is the floor of the decision benchmark (raw `llama_decode` of a whole fresh prompt, in process): the
models take turns prompt by prompt, in a rotating order, and each type's time is the median of its ratios to
the original's on the same prompt. Agreement is `semif_adapter.deploy.agreement` (12 fixed decisions, three scoring
methods, models taking turns). Prints a markdown table; about 3 minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.inprocess import Model, floor_ms
from bench.common.workload import Spec
from scripts.common.command import program_parser
from scripts.common.stats import summarize
from semif_adapter.deploy.agreement import measure
from semif_adapter.deploy.quantize import convert
from semif_adapter.engine.embedded_model import embedded_model_path

PROMPTS = (("short", 2), ("medium", 4))  # about 100 and 400 tokens, whole prompt decoded
SETTLE_S = 0.05


def decode_times(models: list[Model], repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Per prompt size: each model's floor on the same fresh prompts, the models rotating turn by turn."""
    found: dict[str, list[dict[str, Any]]] = {}
    for size, options in PROMPTS:
        specs = [Spec(size, 96_000 + i, i, options) for i in range(repeats + 1)]  # the first warms up
        samples: list[list[float]] = [[] for _ in models]
        for turn, spec in enumerate(specs):
            order = list(range(len(models)))
            order = order[turn % len(order):] + order[:turn % len(order)]
            for index in order:
                time.sleep(SETTLE_S)
                spent = floor_ms(models[index], models[index].tokens(spec), 0)
                if turn:
                    samples[index].append(spent)
        tokens = len(models[0].tokens(specs[0]).joined(0))
        found[size] = [{"tokens": tokens, "ms": summarize(values),
                        "paired_ratio": summarize([a / b for a, b in zip(values, samples[0], strict=True)], 4)}
                       for values in samples]
    return found


def run(model: Path, types: list[str], repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="semif-quant-") as scratch:
        conversions = [convert(model, Path(scratch), type_name) for type_name in types]
        paths = [model, *(c.output for c in conversions)]
        models = [Model.open(path, {}) for path in paths]
        try:
            times = decode_times(models, repeats)
        finally:
            for opened in models:
                opened.close()
        agreements = [measure(model, c.output) for c in conversions]
    rows = []
    for index, label in enumerate(["original", *types]):
        row: dict[str, Any] = {"type": label, "file": paths[index].name, "bytes": paths[index].stat().st_size
                               if index == 0 else conversions[index - 1].output_bytes}
        for size, entries in times.items():
            row[f"{size}_tokens"] = entries[index]["tokens"]
            row[f"{size}_ms"] = entries[index]["ms"]["p50"]
            row[f"{size}_ratio"] = entries[index]["paired_ratio"]["p50"]
        if index:
            row["agreement"] = {m.method: {"same_top": m.same_top, "decisions": m.decisions,
                                           "max_abs_dp": round(m.max_abs_dp, 4), "mean_abs_dp": round(m.mean_abs_dp, 4)}
                                for m in agreements[index - 1].methods}
            row["quantizer_notes"] = list(conversions[index - 1].notes)
        rows.append(row)
    return {"model": model.name, "repeats": repeats, "rows": rows, "raw": times}


def markdown(result: dict[str, Any]) -> str:
    sizes = [size for size, _ in PROMPTS]
    header = ["type", "MB", *[f"{s} ({result['rows'][0][f'{s}_tokens']} tok) ms, ratio" for s in sizes],
              "letters same top, max dp", "likelihood", "pmi"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in result["rows"]:
        cells = [row["type"], f"{row['bytes'] / 1e6:.0f}",
                 *[f"{row[f'{s}_ms']:.0f}, {row[f'{s}_ratio']:.3f}x" for s in sizes]]
        agreement = row.get("agreement", {})
        cells += [f"{a['same_top']}/{a['decisions']}, {a['max_abs_dp']:.3f}" if (a := agreement.get(m)) else "-"
                  for m in ("letters", "likelihood", "pmi")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = program_parser(__doc__, "bench.sizing.quantization")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M Q4_1)")
    parser.add_argument("--types", default="Q8_0,Q4_0,Q4_K_M", help="comma-separated target types")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    load_before = [round(value, 2) for value in os.getloadavg()]
    result = run((args.model or embedded_model_path()).resolve(), args.types.upper().split(","), args.repeats)
    result.update(load_before=load_before, load_after=[round(value, 2) for value in os.getloadavg()])
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(result))
    print(f"load average before {result['load_before']}, after {result['load_after']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
