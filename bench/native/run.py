"""What our doors cost on a decision model: the adapter's native path against llama-server b11434 called directly.

    python -m bench.native [--type openjev ...] [--rounds 30] [--requests 12] [--turns 1] [--out DIR]

Each type named (every type llama.cpp b11434 serves: `--type all`) in turn, in one run. The conformance of each type
is `python -m bench.native.conformance`.

Same file (a decision-typed copy of the embedded model, scripts/dev/decision_models.py), same requests, and the same
llama-server command line: the direct server is started with the arguments the adapter logged for its own, so the
only difference is the adapter in front (HTTP, validation, admission, translation). The systems take turns:

- latency: each round asks k questions (1 and 4, the System One bank's first) about one new state of each system,
  in an order that alternates by round, each turn after a pause (SETTLE_S); p50 per system and the median of the
  per-round ratios (ours / direct), target at most 1.03;
- throughput: 4 clients, each sending `--requests` requests of 3 questions about its own new states, once per
  system and again in the other order (`--turns` times); decisions/s = questions answered / wall time, the mean of
  the turns, target ours / direct >= 0.97;
- cold start: the adapter's process start to `/ping` 200, and of it the native server's own start (`start_ms`),
  against the direct server's process start to `/health` 200.

The adapter clears llama-server's slots before every request (its answers are a fresh server's); the direct server
keeps its cached path, so the ratios are what that costs as well as what the doors cost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.page.publish import publish
from bench.systemone.workload import THROUGHPUT_QUESTIONS, questions_body
from scripts.common.command import program_parser
from scripts.common.stats import summarize
from scripts.dev.decision_models import decision_model
from scripts.local.endpoints import start_decision_container
from scripts.local.processes import wait_for_ping

COUNTS = (1, 4)
CLIENTS = 4
P50_TARGET = 1.03
THROUGHPUT_TARGET = 0.97
SIZE = "short"
SYSTEMS = ("ours", "direct")
START_TIMEOUT_S = 180.0
# After its answer a llama-server's threads keep polling for work (ggml's threadpool, `--poll 50`), on the same 2
# cores: a system asked right after the other ran about 1.5x slower, whichever it was (measured: the first run of
# this bench, 2026-12-05). Each turn starts after this pause.
SETTLE_S = 1.0


def native_arguments(log_text: str) -> dict[str, Any]:
    """The adapter's "native decision server ready" line: its pid, port, start time and command line."""
    for line in log_text.splitlines():
        if '"native decision server ready"' in line:
            found: dict[str, Any] = json.loads(line)
            return found
    raise RuntimeError(f"the adapter started no native decision server:\n{log_text[-2000:]}")


class DirectServer:
    """llama-server started with another server's arguments on a port and a slot directory of its own, warmed up
    with `warmup` if one is given (without: a fresh server, whose first answer is the reference of every answer
    the adapter gives)."""

    def __init__(self, arguments: list[str], warmup: dict[str, Any] | None = None) -> None:
        from semif_adapter.engine.native_server import free_port  # the adapter's, where it is installed

        self.port = free_port()
        self._slot_dir = tempfile.TemporaryDirectory(prefix="semif-direct-slots-")
        arguments = list(arguments)
        arguments[arguments.index("--port") + 1] = str(self.port)
        if "--slot-save-path" in arguments:
            arguments[arguments.index("--slot-save-path") + 1] = self._slot_dir.name
        started = time.perf_counter()
        self.process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=300)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if self.client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the direct llama-server did not start")
            time.sleep(0.02)
        self.start_s = time.perf_counter() - started
        if warmup is not None and self.ask(warmup).status_code != 200:
            raise RuntimeError("the direct llama-server refused the warm-up")

    def ask(self, body: dict[str, Any]) -> httpx.Response:
        return self.client.post("/v1/systemone", json=body)

    def ask_fresh(self, body: dict[str, Any]) -> httpx.Response:
        """The request on an erased slot, as the adapter asks it (one slot: the adapter's default)."""
        erased = self.client.post("/slots/0?action=erase", json={})
        if erased.status_code != 200:
            raise RuntimeError(f"the direct llama-server did not erase its slot: {erased.status_code} {erased.text}")
        return self.ask(body)

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        self._slot_dir.cleanup()


def fresh_answer(arguments: list[str], body: dict[str, Any]) -> httpx.Response:
    """What a llama-server started with `arguments` answers to `body` as its first request: a server per call."""
    server = DirectServer(arguments)
    try:
        return server.ask(body)
    finally:
        server.stop()


def _timed(post: Callable[[dict[str, Any]], httpx.Response], body: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = post(body)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code} {response.text[:300]}")
    return elapsed


def latency(posts: dict[str, Callable[[dict[str, Any]], httpx.Response]], count: int, rounds: int,
            first_state: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {system: [] for system in SYSTEMS}
    ratios = []
    for index in range(rounds):
        order = SYSTEMS if index % 2 == 0 else SYSTEMS[::-1]
        body = questions_body(SIZE, first_state + index, count)
        taken = {}
        for system in order:
            time.sleep(SETTLE_S)
            taken[system] = _timed(posts[system], body)
        for system, value in taken.items():
            times[system].append(value)
        ratios.append(taken["ours"] / taken["direct"])
    p50 = {system: summarize(values)["p50"] for system, values in times.items()}
    paired = round(statistics.median(ratios), 3)
    return {"questions": count, "rounds": rounds, "p50_ms": p50, "paired_ratio": paired, "target": P50_TARGET,
            "met": paired <= P50_TARGET,
            "samples_ms": {system: [round(v, 3) for v in values] for system, values in times.items()}}


def throughput(post: Callable[[dict[str, Any]], httpx.Response], requests: int, first_state: int) -> float:
    """Decisions per second of CLIENTS clients, each asking `requests` requests about states of its own."""
    def client(index: int) -> None:
        for number in range(requests):
            _timed(post, questions_body(SIZE, first_state + index * requests + number, THROUGHPUT_QUESTIONS))

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return CLIENTS * requests * THROUGHPUT_QUESTIONS / (time.perf_counter() - started)


def report(result: dict[str, Any]) -> str:
    """One table of every type's figures against their targets."""
    lines = ["| type | p50 ms, 1 question: ours / direct | p50 ms, 4 questions: ours / direct | "
             f"decisions/s, {CLIENTS} clients: ours / direct | cold start s: ours (its server) / direct |",
             "|---|---|---|---|---|"]
    for run in result["runs"]:
        one, four = run["latency"]
        rate, cold = run["throughput"], run["cold_start"]
        cells = [f"{row['p50_ms']['ours']:.0f} / {row['p50_ms']['direct']:.0f}: **{row['paired_ratio']:.3f}x** "
                 f"{'met' if row['met'] else 'MISSED'}" for row in (one, four)]
        asked = " (direct asked fresh)" if run.get("direct") == "fresh" else ""
        lines.append(f"| `{run['decision_type']}`{asked} | {cells[0]} | {cells[1]} | {rate['ours']:.2f} / "
                     f"{rate['direct']:.2f}: **{rate['ratio']:.3f}x** {'met' if rate['met'] else 'MISSED'} | "
                     f"{cold['adapter_ping_s']:.2f} ({cold['native_start_s']:.2f}) / {cold['direct_health_s']:.2f} |")
    server = " ".join(result["runs"][0]["arguments"][1:])
    lines += ["", f"Targets: p50 at most {P50_TARGET}x llama-server's (the median of the per-round ratios), "
              f"decisions/s at least {THROUGHPUT_TARGET}x. llama-server: `{server}` (each type's own model)."]
    lines += ["", f"Command: `{result['command']}`; {result['machine']}, {result['measured']}."]
    return "\n".join(lines)


def bench_type(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One type: the adapter and a direct llama-server like its own, taking turns; the direct server on its cached
    path, or asked fresh (each request on an erased slot) for the types named in --fresh-direct."""
    from semif_adapter.core.native_service import WARMUP_REQUEST

    model = decision_model(name)
    env = {"SM_LLAMA_CPP_MODEL": str(model), "SEMIF_RESULT_CACHE_ENTRIES": "0",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    started = time.perf_counter()
    container = start_decision_container("decision", env, work / name)
    direct = None
    try:
        wait_for_ping(container.child, container.url + "/ping", START_TIMEOUT_S)
        adapter_ping_s = time.perf_counter() - started
        log_path = container.child.log_path
        ready = native_arguments(log_path.read_text() if log_path else "")
        direct = DirectServer(ready["arguments"], WARMUP_REQUEST)
        with httpx.Client(base_url=container.url, timeout=300) as client:
            fresh = name in args.fresh_direct
            posts: dict[str, Callable[[dict[str, Any]], httpx.Response]] = {
                "ours": lambda body: client.post("/v1/systemone", json=body),
                "direct": direct.ask_fresh if fresh else direct.ask}
            rows = [latency(posts, count, args.rounds, 1 + 10_000 * position) for position, count in enumerate(COUNTS)]
            rates: dict[str, list[float]] = {system: [] for system in SYSTEMS}
            for turn, order in enumerate((SYSTEMS, SYSTEMS[::-1]) * args.turns):
                for position, system in enumerate(order):
                    time.sleep(SETTLE_S)
                    rates[system].append(throughput(posts[system], args.requests,
                                                    100_000 + 1_000 * (2 * turn + position)))
        direct_health_s = direct.start_s
    finally:
        if direct is not None:
            direct.stop()
        container.child.stop(timeout_s=30)
    ours, theirs = statistics.fmean(rates["ours"]), statistics.fmean(rates["direct"])
    ratio = round(ours / theirs, 3)
    return {"model": model.name, "decision_type": name, "direct": "fresh" if fresh else "cached",
            "arguments": ready["arguments"], "latency": rows,
            "throughput": {"ours": ours, "direct": theirs, "turns": rates, "ratio": ratio,
                           "target": THROUGHPUT_TARGET, "met": ratio >= THROUGHPUT_TARGET},
            "cold_start": {"adapter_ping_s": adapter_ping_s, "native_start_s": ready["start_ms"] / 1000,
                           "direct_health_s": direct_health_s}}


def main(argv: list[str] | None = None) -> int:
    from semif_adapter.engine.decision_types import DECISION_TYPES

    parser = program_parser(__doc__, "bench.native")
    parser.add_argument("--type", nargs="+", default=["openjev"], choices=[*DECISION_TYPES, "all"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--requests", type=int, default=12, help="requests per client in the throughput turn")
    parser.add_argument("--turns", type=int, default=1, help="pairs of throughput turns (each order once per pair)")
    parser.add_argument("--fresh-direct", nargs="*", default=[], choices=list(DECISION_TYPES),
                        help="types whose direct server is asked fresh (its cached path fails on them)")
    parser.add_argument("--out", type=Path, help="write native.json and native.md here")
    args = parser.parse_args(argv)
    names = list(DECISION_TYPES) if "all" in args.type else args.type
    result = each_type("bench.native", names, lambda name, work: bench_type(name, args, work), argv)
    publish(result, report(result), args.out, "native")
    return 0


def each_type(module: str, names: list[str], run: Callable[[str, Path], dict[str, Any]],
              argv: list[str] | None) -> dict[str, Any]:
    """One run over the named types, in turn, with the command and the machine it ran on."""
    with tempfile.TemporaryDirectory(prefix="bench-native-") as work:
        runs = [run(name, Path(work)) for name in names]
    command = (f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    return {"runs": runs, "command": command, "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs",
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
