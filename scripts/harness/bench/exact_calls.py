"""What exactness costs in raw llama.cpp: N answer tokens after a prompt, one sequence, every row's logits read,
decoded in calls of the batch size (computed in ubatches of 512 rows by flash attention's tiled kernel, which makes
rows of several sequences disturb each other in this llama.cpp) or of at most 63 tokens (`SUFFIX_WINDOW`, row by
row: exact), taking turns.

    .venv/bin/python -m scripts.harness.bench.exact_calls [--tokens 64 278 442] [--repeats 4]
"""

from __future__ import annotations

import argparse
import statistics
import time

from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.llama_runtime import LlamaRuntime
from semif_adapter.engine.suffix_windows import SUFFIX_WINDOW
from semif_adapter.settings import load_settings

from .inprocess import Decoder

PROMPT_TOKENS = 56
TEXT = "Tickets about payments, invoices and refunds are routed to the billing queue by the triage desk. "


def decode_ms(runtime: LlamaRuntime, decoder: Decoder, words: list[int], count: int, window: int) -> float:
    decoder.clear()
    decoder.decode_items([(words[i], i, (0,), False) for i in range(PROMPT_TOKENS)])
    items = [(words[PROMPT_TOKENS + i], PROMPT_TOKENS + i, (0,), True) for i in range(count)]
    started = time.perf_counter()
    decoder.decode_items(items, window)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 278, 442])
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    runtime = LlamaRuntime(embedded_model_path(), load_settings({"SM_LLAMA_CPP_CTX_SIZE": "4096"}))
    decoder = Decoder(runtime)
    words = runtime.tokenize(TEXT * 80, special=False)
    try:
        wide_label, exact_label = f"calls of {runtime.n_batch} ms", f"calls of {SUFFIX_WINDOW} ms"
        print(f"{'tokens':>6} {wide_label:>16} {exact_label:>15} {'ratio':>6}")
        for count in args.tokens:
            times: dict[int, list[float]] = {runtime.n_batch: [], SUFFIX_WINDOW: []}
            for _ in range(args.repeats):
                for window, spent in times.items():  # taking turns: the machine's speed drifts
                    spent.append(decode_ms(runtime, decoder, words, count, window))
            wide, exact = (statistics.median(spent) for spent in times.values())
            print(f"{count:>6} {wide:>16.0f} {exact:>15.0f} {exact / wide:>6.3f}", flush=True)
    finally:
        decoder.close()
        runtime.close()


if __name__ == "__main__":
    main()
