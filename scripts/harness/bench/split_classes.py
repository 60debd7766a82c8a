"""Which splits of one decode reproduce its logits bit for bit, by the sizes of the parts (the premise of
`semif_adapter.engine.partial_reuse`), with flash attention as the adapter runs it and off.

    .venv/bin/python -m scripts.harness.bench.split_classes [--model PATH] [--step N] [--json OUT]

Decodes one fixed prompt whole, then in two parts at every split point (every N-th with --step), and prints
which split points gave the same last-token logits bytes, grouped by the kernel class of each part
(`partial_reuse.kernel_class`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np

from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.partial_reuse import kernel_class

from ...common.command import program_parser
from .inprocess import Model

CLASS_NAMES = {1: "single", 2: "row", 3: "tiled"}
PROMPT = ("Ticket 1042: the customer reports that the November invoice was charged twice to the card ending in "
          "4411; they ask for a refund of the duplicate charge and a confirmation by email. ") * 4


def split_table(model: Model, step: int = 1) -> dict[str, object]:
    """Per (class of the first part, class of the second): split points tried, identical, worst difference."""
    runtime, decoder = model.runtime, model.decoder
    tokens = runtime.tokenize(PROMPT, special=False, add_bos=runtime.add_bos)

    def last_logits(parts: list[list[int]]) -> np.ndarray:
        decoder.clear()
        position = 0
        for index, part in enumerate(parts):
            decoder.decode([(0, position, part, index == len(parts) - 1)])
            position += len(part)
        return runtime.logits_row(len(parts[-1]) - 1).copy()

    whole = last_logits([tokens])
    tried, same, worst = Counter(), Counter(), Counter()
    for split in range(1, len(tokens), step):
        pair = f"{CLASS_NAMES[kernel_class(split)]}+{CLASS_NAMES[kernel_class(len(tokens) - split)]}"
        difference = float(np.abs(last_logits([tokens[:split], tokens[split:]]) - whole).max())
        tried[pair] += 1
        same[pair] += difference == 0.0
        worst[pair] = max(worst[pair], difference)
    return {"tokens": len(tokens), "classes": {pair: {"splits": tried[pair], "bit_identical": same[pair],
                                                      "max_abs_logit_diff": round(worst[pair], 4)}
                                               for pair in sorted(tried)}}


def main(argv: list[str] | None = None) -> int:
    parser = program_parser(__doc__, f"{__package__}.split_classes")
    parser.add_argument("--model", type=Path, help="a .gguf (default: the embedded model)")
    parser.add_argument("--step", type=int, default=1, help="try every N-th split point (1: all)")
    parser.add_argument("--json", type=Path, help="write the table as JSON")
    args = parser.parse_args(argv)
    results = {}
    for name, setting in (("flash attention auto (the adapter's default)", "auto"), ("flash attention off", "off")):
        model = Model.open(args.model or embedded_model_path(), {**os.environ, "SM_LLAMA_CPP_FLASH_ATTN": setting})
        try:
            results[setting] = split_table(model, args.step)
        finally:
            model.close()
        print(f"{name}: {results[setting]['tokens']} tokens, every two-part split")
        for pair, row in results[setting]["classes"].items():
            print(f"  {pair:13} {row['bit_identical']:4} of {row['splits']:4} bit-identical, "
                  f"max |logit difference| {row['max_abs_logit_diff']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
