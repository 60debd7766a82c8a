"""What a second decoding thread costs every llama_decode in this process: the same call (by default 16 tokens
after 330 cached, one logits row, the adapter's geometry) timed on one worker thread alone, then again once another
live thread has decoded too. The adapter decodes on several threads (start-up probes, then each worker). With a
llama.cpp built with OpenMP each of those threads keeps a libgomp pool, and with more pool threads than CPUs libgomp
throttles its spin-waits: ~16 ms more per call (measured 61.5 -> 79.4 ms). The project builds ggml's own thread pool
(-DGGML_OPENMP=OFF), which this bench shows costs nothing; point LLAMA_CPP_LIB_PATH at an OpenMP build to compare.

    .venv/bin/python -m scripts.harness.bench.omp_pools [--tokens 16] [--repeats 6]
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
from collections.abc import Callable

from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.llama_runtime import LlamaRuntime
from semif_adapter.settings import load_settings

from .inprocess import Decoder

CACHED = 330
TEXT = "Tickets about payments, invoices and refunds are routed to the billing queue by the triage desk. "


class Worker:
    """A live thread that runs the jobs it is given, one at a time (as a decision worker does)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[Callable[[], float] | None] = queue.Queue()
        self._done: queue.Queue[float] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._done.put(job())

    def run(self, job: Callable[[], float]) -> float:
        self._jobs.put(job)
        return self._done.get()

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16, help="tokens in the timed call")
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    new = args.tokens
    runtime = LlamaRuntime(embedded_model_path(), load_settings({}))
    decoders = [Decoder(runtime.primary), Decoder(runtime.new_context())]
    words = runtime.tokenize(TEXT * 40, special=False)

    def small_call(decoder: Decoder) -> Callable[[], float]:
        def timed() -> float:
            decoder.clear()
            decoder.decode_items([(words[i], i, (0,), False) for i in range(CACHED)])
            return 1000 * decoder.decode_items([(words[CACHED + i], CACHED + i, (0,), i == new - 1)
                                                for i in range(new)])
        return timed

    workers = [Worker(), Worker()]
    try:
        alone = [workers[0].run(small_call(decoders[0])) for _ in range(args.repeats)]
        workers[1].run(small_call(decoders[1]))  # a second thread decodes once, then idles (stays alive)
        beside = [workers[0].run(small_call(decoders[0])) for _ in range(args.repeats)]
        print(f"{new} tokens after {CACHED}, {runtime.primary.threads} threads, median of {args.repeats}:")
        print(f"  the only decoding thread:          {statistics.median(alone):6.1f} ms")
        print(f"  another live thread has decoded:   {statistics.median(beside):6.1f} ms")
    finally:
        for worker in workers:
            worker.stop()
        for decoder in decoders:
            decoder.close()
        runtime.close()


if __name__ == "__main__":
    main()
