"""Memory of the widest System One question on each model of the matrix: peak RSS against a stated bound.

    python -m bench.sizing.model_memory [--out docs/bench/sizing/model_memory.json] [--options 255]

For each model (the embedded SmolLM2, 49k vocabulary; Gemma 3 270M, 262k vocabulary) the adapter is started as
the image starts it, with its own defaults, and asked one choice of `--options` options with `likelihood` and then
`pmi` (every answer token's logits read). The engine keeps at most one ubatch of logits per context (a 262k
vocabulary's are 1 MB per position), so the peak must stay within the idle process (model mapped, contexts made)
plus, per worker, one ubatch of logits for llama.cpp's output buffer and one for its compute graph:
`bound = idle + workers x 2 x ubatch x vocabulary x 4 bytes` (a few MB of Python answers aside).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common.servers import adapter
from bench.reliability.servers import Server
from scripts.common.command import program_parser
from scripts.dev.pypi_models import GEMMA3_270M
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.gguf_header import read_gguf_info
from semif_adapter.engine.llama_runtime import default_ubatch
from semif_adapter.settings import load_settings

OPTIONS = 255
REQUEST_TIMEOUT_S = 900.0


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def _vocabulary(model: Path) -> int:
    with model.open("rb") as stream:
        vocabulary = read_gguf_info(stream).vocab_size
    if vocabulary is None:
        raise RuntimeError(f"{model}: the header does not say the vocabulary's size")
    return vocabulary


def _ready_line(server: Server) -> dict[str, Any]:
    lines = [json.loads(line) for line in server.log_text().splitlines() if '"event": "ready"' in line]
    return lines[-1]


def question(options: int) -> dict[str, Any]:
    criteria = {"Billing": "Payments, invoices, refunds",
                **{f"Queue {i:03d}": f"Tickets routed to queue {i}" for i in range(1, options)}}
    return {"type": "choice", "instructions": "Which queue should this ticket go to?", "criteria": criteria}


def measure(model: Path, vocabulary: int, options: int) -> dict[str, Any]:
    with adapter(model) as server:
        ready = _ready_line(server)
        workers = int(ready["workers"])
        ubatch = default_ubatch(vocabulary, load_settings({}).batch_size)
        idle_kib = _status_kib(server.pid, "VmRSS")
        runs = {}
        for method in ("likelihood", "pmi"):
            started = time.perf_counter()
            response = httpx.post(server.url + "/v1/systemone", timeout=REQUEST_TIMEOUT_S, json={
                "model": "jev-latest", "state": "A customer writes that the invoice for order 4471 was charged twice.",
                "questions": {"queue": question(options)}, "x_scoring": method})
            response.raise_for_status()
            runs[method] = {"seconds": round(time.perf_counter() - started, 1),
                            "evaluated_tokens": response.json()["x_timing"]["evaluated_tokens"]}
        peak_kib = _status_kib(server.pid, "VmHWM")
    bound = idle_kib * 1024 + workers * 2 * ubatch * vocabulary * 4
    return {"model": model.name, "model_bytes": model.stat().st_size, "vocabulary": vocabulary, "ubatch": ubatch,
            "workers": workers, "context": ready["model"]["context"], "options": options, "runs": runs,
            "idle_rss_bytes": idle_kib * 1024, "peak_rss_bytes": peak_kib * 1024, "bound_bytes": bound,
            "within_bound": peak_kib * 1024 <= bound}


def markdown(results: list[dict[str, Any]]) -> str:
    rows = ["| model | vocabulary | ubatch | workers | context | idle RSS | peak RSS | bound | within |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        mib = lambda value: f"{value / 2**20:.0f} MiB"  # noqa: E731
        rows.append(f"| {r['model']} | {r['vocabulary']:,} | {r['ubatch']} | {r['workers']} | {r['context']} | "
                    f"{mib(r['idle_rss_bytes'])} | {mib(r['peak_rss_bytes'])} | {mib(r['bound_bytes'])} | "
                    f"{'yes' if r['within_bound'] else 'NO'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = program_parser(__doc__, "bench.sizing.model_memory")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--options", type=int, default=OPTIONS, help="options of the one choice question (255)")
    args = parser.parse_args(argv)
    results = [measure(path, _vocabulary(path), args.options) for path in (embedded_model_path(), GEMMA3_270M.path())]
    print(markdown(results))
    if args.out:
        args.out.write_text(json.dumps({"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                        "results": results}, indent=1) + "\n")
    return 0 if all(r["within_bound"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
