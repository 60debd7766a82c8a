"""The adapter's own share of a cold start: process start to `/ping` 200 and to the first answer.

A serverless endpoint (or a new instance) pays this on top of what SageMaker does before the container runs
(image pull, `model.tar.gz` download and unpack), which depends on SageMaker and is not measured here. Each round
starts `container/serve serve` as the image runs it (the local endpoints' settings, embedded model unless
`--model`), polls `/ping`, then sends one decision per scoring method: the first answer after start-up and the
same decisions sent again (no result cache) show what the warm-up decision already paid for.

    python -m bench.sizing.cold_start [--rounds 5] [--model x.gguf] [--json OUT]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common.paths import ROOT
from bench.reliability.servers import Server
from scripts.common.command import program_parser
from scripts.common.stats import summarize
from scripts.local.endpoints import container_env, start_decision_container
from scripts.local.processes import http_status, wait_until

POLL_S = 0.02
START_TIMEOUT_S = 300.0
METHODS = ("pmi", "likelihood", "letters")
PAYLOAD = ROOT / "scripts" / "payloads" / "decision.json"  # what the smoke test sends


def one_round(model: Path, log_dir: Path) -> dict[str, Any]:
    """Seconds from spawn to /ping 200 and to each first answer; the adapter's own ready-line figures."""
    log_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    env = {**container_env(os.environ, model), "SEMIF_RESULT_CACHE_ENTRIES": "0"}  # a repeat is decoded again
    container = start_decision_container("cold-start", env, log_dir)
    try:
        wait_until(lambda: http_status(f"{container.url}/ping") == 200, timeout_s=START_TIMEOUT_S,
                   what=f"{container.child.name} /ping", alive=container.child.alive, interval_s=POLL_S)
        ping_s = time.perf_counter() - started
        with httpx.Client(timeout=60) as client:
            answers, payload = {}, json.loads(PAYLOAD.read_text())
            for method in METHODS:
                answers[method] = _answer(client, container.url, {**payload, "scoring": method})
            first_answer_s = time.perf_counter() - started
            for method in METHODS:  # the same decisions again (result cache off; state and baseline now cached)
                answers[method]["warm_round_trip_ms"] = _answer(client, container.url,
                                                                {**payload, "scoring": method})["round_trip_ms"]
        ready = Server(container).ready_fields()
    finally:
        container.child.stop(30)
    return {"ping_s": round(ping_s, 3), "first_answers_s": round(first_answer_s, 3),
            "load_ms": ready.get("load_ms"), "model_hash_ms": ready.get("model_hash_ms"), "answers": answers}


def _answer(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, float]:
    sent = time.perf_counter()
    response = client.post(f"{url}/invocations", json=body)
    response.raise_for_status()
    return {"round_trip_ms": round((time.perf_counter() - sent) * 1000, 1),
            "server_ms": response.json()["timing"]["total_ms"]}


def report(rounds: list[dict[str, Any]], model: Path) -> dict[str, Any]:
    def figures(values: list[float]) -> dict[str, float]:
        summary = summarize(values)
        return {key: summary[key] for key in ("p50", "min", "max")}

    return {"model": model.name, "rounds": len(rounds), "load_avg": os.getloadavg(),
            "ping_s": figures([r["ping_s"] for r in rounds]),
            "adapter_load_s": figures([r["load_ms"] / 1000 for r in rounds if r["load_ms"] is not None]),
            "model_hash_s": figures([r["model_hash_ms"] / 1000 for r in rounds if r["model_hash_ms"] is not None]),
            "first_answer_ms": {m: figures([r["answers"][m]["round_trip_ms"] for r in rounds]) for m in METHODS},
            "second_answer_ms": {m: figures([r["answers"][m]["warm_round_trip_ms"] for r in rounds]) for m in METHODS},
            "raw": rounds}


def markdown(result: dict[str, Any]) -> str:
    def cell(figures: dict[str, float]) -> str:
        return f"{figures['p50']:.3g} ({figures['min']:.3g}-{figures['max']:.3g})"

    lines = [f"Cold start of the adapter, {result['model']}, {result['rounds']} rounds, load average "
             f"{', '.join(f'{x:.2f}' for x in result['load_avg'])}; p50 (min-max)", "",
             "| phase | figure |", "|---|---|",
             f"| spawn to `/ping` 200 (s) | {cell(result['ping_s'])} |",
             f"| of which the adapter's load + warm-up (`load_ms` of the ready line, s) | "
             f"{cell(result['adapter_load_s'])} |",
             f"| of which the model's sha256 (s) | {cell(result['model_hash_s'])} |"]
    lines += [f"| first `{m}` answer after `/ping`, then the same again (ms, round trip) | "
              f"{cell(result['first_answer_ms'][m])}; {cell(result['second_answer_ms'][m])} |" for m in METHODS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from semif_adapter.engine.embedded_model import embedded_model_path

    parser = program_parser(__doc__, "bench.sizing.cold_start")
    parser.add_argument("--rounds", type=int, default=5, help="cold starts, one after another (5)")
    parser.add_argument("--model", type=Path, help="a .gguf (default: the embedded model)")
    parser.add_argument("--json", type=Path, help="write every figure as JSON")
    args = parser.parse_args(argv)
    model = args.model or embedded_model_path()
    with tempfile.TemporaryDirectory() as logs:
        rounds = [one_round(model, Path(logs) / f"round-{n}") for n in range(args.rounds)]  # a log each
    result = report(rounds, model)
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
