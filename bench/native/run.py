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

The adapter clears llama-server's slots before every request (its answers are a fresh server's). llama-server is
asked two ways, each a server of its own, taking turns with the adapter: `fresh` (each request on an erased slot, as
the adapter asks it: the same numbers, so ours / fresh is what the doors cost, against the targets) and `cached`
(llama-server's own prompt cache: ours / cached is what fresh numbers cost). A way that fails (the heads that read
the embeddings answer 500 on a cached prefix in b11434) is reported with its error, and the others go on.
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
import threading
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
SYSTEMS = ("ours", "fresh", "cached")
TARGETED = "fresh"  # ours against it is the doors' cost: the same numbers on both sides
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
        self._one_slot = threading.Lock()
        if warmup is not None and self.ask(warmup).status_code != 200:
            raise RuntimeError("the direct llama-server refused the warm-up")

    def ask(self, body: dict[str, Any]) -> httpx.Response:
        return self.client.post("/v1/systemone", json=body)

    def ask_fresh(self, body: dict[str, Any]) -> httpx.Response:
        """The request on an erased slot, as the adapter asks it (one slot: the adapter's default), the erase and the
        request one step for concurrent callers, as the adapter admits them (an erase between another caller's erase
        and its request would be no erase)."""
        with self._one_slot:
            erased = self.client.post("/slots/0?action=erase", json={})
            if erased.status_code != 200:
                raise RuntimeError(f"the direct llama-server did not erase its slot: {erased.status_code} "
                                   f"{erased.text}")
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


def _rotated(systems: list[str], index: int) -> list[str]:
    """The systems' order for turn `index`: each goes first once every len(systems) turns."""
    shift = index % len(systems)
    return systems[shift:] + systems[:shift]


def latency(posts: dict[str, Callable[[dict[str, Any]], httpx.Response]], count: int, rounds: int,
            first_state: int, failed: dict[str, str]) -> dict[str, Any]:
    """p50 per system over `rounds` rounds, each system's turn in a rotating order; a system that fails is left out
    from then on, its error in `failed`."""
    times: dict[str, list[float]] = {system: [] for system in posts}
    ratios: dict[str, list[float]] = {system: [] for system in posts if system != "ours"}
    for index in range(rounds):
        order = _rotated([*posts], index)
        body = questions_body(SIZE, first_state + index, count)
        taken = {}
        for system in order:
            if system in failed:
                continue
            time.sleep(SETTLE_S)
            try:
                taken[system] = _timed(posts[system], body)
            except RuntimeError as error:
                failed[system] = str(error)
        for system, value in taken.items():
            times[system].append(value)
            if system != "ours" and "ours" in taken:
                ratios[system].append(taken["ours"] / value)
    p50 = {system: summarize(values)["p50"] for system, values in times.items() if values}
    paired = {system: round(statistics.median(values), 3) for system, values in ratios.items() if values}
    return {"questions": count, "rounds": rounds, "p50_ms": p50, "paired_ratio": paired, "target": P50_TARGET,
            "met": paired.get(TARGETED, float("inf")) <= P50_TARGET,
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


def _ratio_cell(ours: float, theirs: float | None, ratio: float | None, met: bool | None, digits: int) -> str:
    if theirs is None or ratio is None:
        return "failed"
    verdict = "" if met is None else (" met" if met else " MISSED")
    return f"{ours:.{digits}f} / {theirs:.{digits}f}: **{ratio:.3f}x**{verdict}"


def report(result: dict[str, Any]) -> str:
    """Two tables: what the doors cost (ours against llama-server asked fresh, against the targets) and what fresh
    numbers cost (ours against llama-server's cached path)."""
    head = (f"| type | p50 ms, 1 question: ours / {{0}} | p50 ms, 4 questions: ours / {{0}} | "
            f"decisions/s, {CLIENTS} clients: ours / {{0}} |")
    doors = ["**What the doors cost** (llama-server asked fresh: the same numbers as ours)", "",
             head.format("llama-server") + " cold start s: ours (its server) / llama-server |",
             "|---|---|---|---|---|"]
    fresh = ["**What fresh numbers cost** (llama-server on its cached path; no target)", "",
             head.format("cached"), "|---|---|---|---|"]
    failures = []
    for run in result["runs"]:
        rows, rate, cold = run["latency"], run["throughput"], run["cold_start"]
        name = f"`{run['decision_type']}`"
        for system, table, targeted in (("fresh", doors, True), ("cached", fresh, False)):
            cells = [_ratio_cell(row["p50_ms"]["ours"], row["p50_ms"].get(system), row["paired_ratio"].get(system),
                                 row["met"] if targeted else None, 0) for row in rows]
            cells.append(_ratio_cell(rate["ours"], rate["systems"].get(system), rate["ratios"].get(system),
                                     rate["met"] if targeted else None, 2))
            if targeted:
                cells.append(f"{cold['adapter_ping_s']:.2f} ({cold['native_start_s']:.2f}) / "
                             f"{cold['direct_health_s']:.2f}")
            table.append(f"| {name} | " + " | ".join(cells) + " |")
        failures += [f"- {name}, {system}: {error}" for system, error in run.get("failed", {}).items()]
    server = " ".join(result["runs"][0]["arguments"][1:])
    lines = [*doors, "", *fresh]
    if failures:
        lines += ["", "Failed (left out from then on):", *failures]
    lines += ["", f"Targets (ours against llama-server asked fresh): p50 at most {P50_TARGET}x (the median of the "
              f"per-round ratios), decisions/s at least {THROUGHPUT_TARGET}x. llama-server: `{server}` "
              "(each type's own model)."]
    lines += ["", f"Command: `{result['command']}`; {result['machine']}, {result['measured']}."]
    return "\n".join(lines)


def bench_type(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One type: the adapter and a direct llama-server like its own, asked fresh and on its cached path, taking
    turns."""
    from semif_adapter.core.native_service import WARMUP_REQUEST

    model = decision_model(name)
    env = {"SM_LLAMA_CPP_MODEL": str(model), "SEMIF_RESULT_CACHE_ENTRIES": "0",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    started = time.perf_counter()
    container = start_decision_container("decision", env, work / name)
    direct = cached = None
    failed: dict[str, str] = {}
    try:
        wait_for_ping(container.child, container.url + "/ping", START_TIMEOUT_S)
        adapter_ping_s = time.perf_counter() - started
        log_path = container.child.log_path
        ready = native_arguments(log_path.read_text() if log_path else "")
        # Two servers: asked on one after the other asked it fresh, a body would find its whole prompt cached.
        direct = DirectServer(ready["arguments"], WARMUP_REQUEST)
        cached = DirectServer(ready["arguments"], WARMUP_REQUEST)
        with httpx.Client(base_url=container.url, timeout=300) as client:
            posts: dict[str, Callable[[dict[str, Any]], httpx.Response]] = {
                "ours": lambda body: client.post("/v1/systemone", json=body),
                "fresh": direct.ask_fresh, "cached": cached.ask}
            rows = [latency(posts, count, args.rounds, 1 + 10_000 * position, failed)
                    for position, count in enumerate(COUNTS)]
            rates: dict[str, list[float]] = {system: [] for system in SYSTEMS}
            for turn in range(args.turns * len(SYSTEMS)):
                for position, system in enumerate(_rotated([*SYSTEMS], turn)):
                    if system in failed:
                        continue
                    time.sleep(SETTLE_S)
                    try:
                        rates[system].append(throughput(posts[system], args.requests,
                                                        100_000 + 1_000 * (len(SYSTEMS) * turn + position)))
                    except RuntimeError as error:
                        failed[system] = str(error)
        direct_health_s = direct.start_s
    finally:
        for server in (direct, cached):
            if server is not None:
                server.stop()
        container.child.stop(timeout_s=30)
    means = {system: statistics.fmean(values) for system, values in rates.items() if values and system not in failed}
    ratios = {system: round(means["ours"] / value, 3) for system, value in means.items() if system != "ours"}
    return {"model": model.name, "decision_type": name, "arguments": ready["arguments"], "latency": rows,
            "failed": failed,
            "throughput": {"ours": means["ours"], "systems": means, "turns": rates, "ratios": ratios,
                           "target": THROUGHPUT_TARGET,
                           "met": ratios.get(TARGETED, 0.0) >= THROUGHPUT_TARGET},
            "cold_start": {"adapter_ping_s": adapter_ping_s, "native_start_s": ready["start_ms"] / 1000,
                           "direct_health_s": direct_health_s}}


def main(argv: list[str] | None = None) -> int:
    from semif_adapter.engine.decision_types import DECISION_TYPES

    parser = program_parser(__doc__, "bench.native")
    parser.add_argument("--type", nargs="+", default=["openjev"], choices=[*DECISION_TYPES, "all"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--requests", type=int, default=12, help="requests per client in the throughput turn")
    parser.add_argument("--turns", type=int, default=1,
                        help="rounds of throughput turns (each system first once per round)")
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
