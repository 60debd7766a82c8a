"""A lone decision with one decision worker and with two, taking turns request by request.

    .venv/bin/python -m scripts.harness.bench.lone_workers [--decisions N]

Two workers split the cores only while both have a decision (`core_share`); a decision that is alone gets every
core, so with one client at a time both adapters should take the same time. Each request has a state neither
adapter has seen, at two sizes, so every one evaluates its state (letters, 4 options, no result cache).
"""

from __future__ import annotations

import contextlib
import statistics
import time

import httpx

from semif_adapter.engine.embedded_model import embedded_model_path

from ...common.command import program_parser
from . import servers
from .workload import Spec

WORKERS = (1, 2)
SIZES = ("short", "medium")  # the benchmark's own states (workload.state_text)


def main(argv: list[str] | None = None) -> int:
    parser = program_parser(__doc__, f"{__package__}.lone_workers")
    parser.add_argument("--decisions", type=int, default=16, help="per size and adapter")
    args = parser.parse_args(argv)
    model = embedded_model_path().resolve()
    with contextlib.ExitStack() as stack:
        urls = {workers: stack.enter_context(servers.adapter(model, {"SEMIF_WORKERS": str(workers),
                                                                     "SEMIF_RESULT_CACHE_ENTRIES": "0"})).url
                for workers in WORKERS}
        with httpx.Client(timeout=120) as client:
            for size in SIZES:
                times: dict[int, list[float]] = {workers: [] for workers in WORKERS}
                evaluated: dict[int, list[int]] = {workers: [] for workers in WORKERS}
                for index in range(args.decisions):
                    spec = Spec(size, state_index=index, question_index=index, options=4)  # a new state each time
                    for workers in WORKERS if index % 2 else WORKERS[::-1]:  # who goes first alternates
                        started = time.perf_counter()
                        response = client.post(urls[workers] + "/invocations", json=spec.body())
                        response.raise_for_status()
                        times[workers].append((time.perf_counter() - started) * 1000)
                        evaluated[workers].append(response.json()["timing"]["evaluated_tokens"])
                for workers in WORKERS:
                    print(f"{size} states, {workers} worker(s): p50 {statistics.median(times[workers]):.1f} ms, "
                          f"mean {statistics.mean(times[workers]):.1f} ms, evaluated tokens "
                          f"{statistics.mean(evaluated[workers]):.1f} ({args.decisions} decisions)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
