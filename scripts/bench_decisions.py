"""Decision latency and throughput against the floor and the alternatives, in one run on one machine.

    .venv/bin/python scripts/bench_decisions.py [--model PATH] [--quick] [--out DIR]
                                                [--variant-lib DIR] [--variant-env NAME=VALUE]

The adapter runs as the real `container/serve serve` process and the chat path
as the real llama-server, both on loopback; the floor (raw llama_decode of the
tokens a decision needs) and SemIf's fresh reference method run in this process
through the adapter's own llama.cpp layer; llama-server also runs as a scorer
(`/completion`, `--parallel 4`, its prompt cache on) and SemIf's serial-prefix
mode runs in process on a context of its own. (1) Scenarios, `debias: permute`
included: the systems take turns request by request (see phase_paired).
(2) The scoring methods' cost: letters, likelihood and pmi taking turns.
(3) Real traffic, interleaved and skewed: adapter, llama-server, serial
prefix and the machine's floor for the same tokens (traffic_floor) taking
turns round by round (phase_traffic). (4) The caches: restore vs
recompute, the identical-request path. (5) Python overhead per decision and two
probes, in process. (6) Fan-out, concurrency and a burst past the queue,
adapter only. (7) Memory after many distinct states, an adapter of its own with
a small SEMIF_CACHE_BYTES. (8) llama.cpp settings, taking turns in process.
(9) With --variant-*, the floor in child processes with another libllama build
(e.g. AVX-512) or environment.
Writes decisions.json, decisions.md and decisions.png under --out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

if not __package__:  # `python scripts/bench_decisions.py`: run as the module of its package (relative imports)
    import runpy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(runpy.run_module("scripts.bench_decisions", run_name="__main__", alter_sys=True) and 0)

ROOT = Path(__file__).resolve().parent.parent

from semif_adapter.embedded_model import embedded_model_path
from semif_adapter.settings import cpu_quota

from .bench import completion, servers
from .bench import config as configs
from .bench.chart import render_chart
from .bench.inprocess import Model, SerialPrefix
from .bench.phase_cache import identical_phase, memory_phase, restore_phase
from .bench.phase_http import concurrency, fanout
from .bench.phase_inprocess import floor_sets, knob_phase, overhead, probes
from .bench.phase_methods import method_phase
from .bench.phase_paired import paired_phase
from .bench.phase_traffic import Peers, traffic_phase
from .bench.report import markdown, permute_costs, rows, targets
from .bench.traffic_floor import TrafficFloor
from .usage import command_parser

FULL_OUT = ROOT / "docs" / "bench"
QUICK_OUT = ROOT / "build" / "bench-quick"
T = TypeVar("T")


def load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                    platform.processor())


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--", "container/semif_adapter", "scripts/bench", "scripts/bench_decisions.py")
    return git("rev-parse", "--short", "HEAD") + ("+local changes" if dirty else "")


class Phases:
    """Runs named phases, printing progress and recording wall time and load for each."""

    def __init__(self) -> None:
        self.log: dict[str, dict[str, Any]] = {}

    def run(self, name: str, function: Callable[..., T], *args: Any) -> T:
        before, started = load(), time.monotonic()
        print(f"bench: {name} (load {before[0]})", file=sys.stderr, flush=True)
        result = function(*args)
        self.log[name] = {"wall_s": round(time.monotonic() - started, 1), "load_before": before,
                          "load_after": load()}
        return result


def variant_floors(model: Path, config: configs.Config, overrides: dict[str, str]) -> dict[str, Any]:
    """The knob floor set in a child process with extra environment: another libllama (the bindings load
    LLAMA_CPP_LIB_PATH at import) or OpenMP settings (read once, when libgomp loads)."""
    env = {key: value for key, value in os.environ.items() if key != "LLAMA_CPP_LIB_PATH"}
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as scratch:
        out = Path(scratch) / "floors.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--model", str(model), "--floor-json", str(out)]
        subprocess.run([*command, *(["--quick"] if config.quick else [])], env={**env, **overrides}, check=True)
        return json.loads(out.read_text())


def variants(args: argparse.Namespace) -> list[tuple[str, dict[str, str]]]:
    found = [(f"library {library}", {"LLAMA_CPP_LIB_PATH": library}) for library in args.variant_lib]
    for setting in args.variant_env:
        name, _, value = setting.partition("=")
        found.append((setting, {name: value}))
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser(__doc__, "bench_decisions")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--quick", action="store_true", help="every phase in its smallest form (a few minutes)")
    parser.add_argument("--out", type=Path, help=f"output directory (default {FULL_OUT}; --quick: {QUICK_OUT})")
    parser.add_argument("--skip-chat", action="store_true", help="no llama-server answering as chat")
    parser.add_argument("--skip-server", action="store_true", help="no llama-server scoring through /completion")
    parser.add_argument("--skip-memory", action="store_true", help="no memory phase (10,000 states in a full run)")
    parser.add_argument("--memory-states", type=int, metavar="N",
                        help="distinct states of the memory phase (full run: 10,000, about 25 min on 2 cores)")
    parser.add_argument("--skip-knobs", action="store_true", help="no llama.cpp settings phase")
    parser.add_argument("--variant-lib", action="append", default=[], metavar="DIR",
                        help="time the floor with the libllama in DIR too, e.g. an AVX-512 build (repeatable)")
    parser.add_argument("--variant-env", action="append", default=[], metavar="NAME=VALUE",
                        help="time the floor with this environment too, e.g. OMP_WAIT_POLICY=passive (repeatable)")
    parser.add_argument("--floor-json", type=Path, help=argparse.SUPPRESS)  # the child of --variant-*
    return parser.parse_args(argv)


def served_phases(results: dict[str, Any], phases: Phases, model: Path, config: configs.Config,
                  *, with_chat: bool, with_server: bool) -> None:
    """Everything that needs the servers: all up for the whole time, idle when not measured."""
    with contextlib.ExitStack() as stack:
        adapter = stack.enter_context(servers.adapter(model, {"SEMIF_QUEUE_SIZE": str(config.queue_size)}))
        results["adapter_ready"] = adapter.ready_fields()
        threads = int(results["adapter_ready"].get("threads") or cpu_quota())
        chat = stack.enter_context(servers.llama_server(model, threads)) if with_chat else None
        server = stack.enter_context(servers.llama_server(model, threads, completion.SETTINGS)) \
            if with_server else None
        inproc = Model.open(model, {})
        stack.callback(inproc.close)
        serial_model = Model.open(model, {})  # the serial-prefix mode's own context: nothing else touches it
        stack.callback(serial_model.close)
        serial = SerialPrefix(serial_model)
        # the traffic floor: contexts of its own on the in-process model, one per adapter worker
        floor = TrafficFloor(inproc, int(results["adapter_ready"].get("workers") or 1), threads)
        stack.callback(floor.close)
        results["head_tokens"] = len(inproc.tokenizer.head(inproc.letters.frame.head))
        results["context_bytes"] = inproc.runtime.context_bytes
        results["server_settings"] = {"argv_env": completion.SETTINGS, "n_probs": completion.N_PROBS} \
            if server else None
        results["scenarios"] = phases.run(
            "scenarios, systems taking turns",
            lambda: paired_phase(inproc, config, adapter.url, chat.url if chat else None,
                                 server_url=server.url if server else None, serial=serial))
        results["methods"] = phases.run("scoring methods, taking turns", method_phase, adapter.url, config)
        results["traffic"] = phases.run(
            "interleaved and skewed traffic, systems taking turns", traffic_phase,
            Peers(inproc, serial, floor, adapter.url, server.url if server else None), config.interleaved,
            config.skewed)
        results["restore"] = phases.run("prefix restore vs recompute", restore_phase, inproc, config)
        results["identical"] = phases.run("identical requests", identical_phase, adapter.url, config)
        results["python_overhead_ms"] = phases.run("python overhead", overhead, inproc, config)
        results["probes"] = phases.run("probes", probes, inproc, config)
        results["fanout"] = phases.run("fan-out", fanout, adapter.url, config)
        results["concurrency"] = phases.run("concurrency", concurrency, adapter.url, config)


def write_outputs(results: dict[str, Any], out: Path) -> None:
    results["rows"] = rows(results)
    results["permute"] = permute_costs(results["rows"])
    results["targets"] = targets(results, results["rows"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "decisions.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "decisions.md").write_text(markdown(results))
    render_chart(results, out / "decisions.png")
    print(markdown(results))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = configs.quick() if args.quick else configs.full()
    if args.memory_states:
        config = dataclasses.replace(config, memory=dataclasses.replace(config.memory, states=args.memory_states))
    model = (args.model or embedded_model_path()).resolve()
    if args.floor_json:
        opened = Model.open(model, {})
        try:
            args.floor_json.write_text(json.dumps(floor_sets([opened], config, [not config.quick])[0]))
        finally:
            opened.close()
        return 0
    started, load_before, clock = time.strftime("%Y-%m-%d %H:%M:%S %Z"), load(), time.monotonic()
    phases = Phases()
    results: dict[str, Any] = {}
    served_phases(results, phases, model, config, with_chat=not args.skip_chat, with_server=not args.skip_server)
    results["memory"] = None if args.skip_memory else phases.run(
        f"memory, {config.memory.states} distinct states", memory_phase, model, results["context_bytes"], config)
    results["knobs"] = [] if args.skip_knobs else phases.run("llama.cpp settings", knob_phase, model, config)
    results["variants"] = []
    if args.variant_lib or args.variant_env:  # each variant against a baseline in a child process of its own
        runs = [("default (child process)", {}), *variants(args), ("default again (drift)", {})]
        results["variants"] = [{"label": label, "env": env,
                                "floors": phases.run(f"floor: {label}", variant_floors, model, config, env)}
                               for label, env in runs]
    results["meta"] = {
        "started": started, "quick": config.quick, "model": model.name, "cpu": _cpu_model(), "cpus": cpu_quota(),
        "threads": results["adapter_ready"].get("threads"), "commit": _commit(), "python": platform.python_version(),
        "load_before": load_before, "load_after": load(), "wall_s": round(time.monotonic() - clock, 1),
        "phases": phases.log, "llama_cpp_lib": os.environ.get("LLAMA_CPP_LIB_PATH", "bundled"),
    }
    out = args.out or (QUICK_OUT if args.quick else FULL_OUT)
    write_outputs(results, out)
    print(f"bench: wrote {out}/decisions.{{json,md,png}} in {results['meta']['wall_s']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
