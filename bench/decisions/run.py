"""The decision benchmark's run: the servers up, the phases in turn, then decisions.json, .md and .png."""


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
from pathlib import Path
from typing import Any

from bench.common import servers
from bench.common.inprocess import Model, SerialPrefix
from bench.common.paths import BENCH_DOCS, BUILD
from bench.common.runs import Phases, commit, cpu_model, load
from bench.decisions import completion
from bench.decisions import config as configs
from bench.decisions.caches import identical_phase, memory_phase, restore_phase
from bench.decisions.chart import render_chart
from bench.decisions.concurrency import concurrency, fanout
from bench.decisions.in_process import floor_sets, knob_phase, overhead, probes
from bench.decisions.methods import method_phase
from bench.decisions.paired import paired_phase
from bench.decisions.report import markdown, permute_costs, rows, targets
from bench.page.publish import publish
from bench.traffic.floor import TrafficFloor
from bench.traffic.phase import Peers, traffic_phase
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.settings import cpu_quota

FULL_OUT = BENCH_DOCS / "decisions"
QUICK_OUT = BUILD / "bench-quick"


def variant_floors(model: Path, config: configs.Config, overrides: dict[str, str]) -> dict[str, Any]:
    """The knob floor set in a child process with extra environment: another libllama (the bindings load
    LLAMA_CPP_LIB_PATH at import) or OpenMP settings (read once, when libgomp loads)."""
    env = {key: value for key, value in os.environ.items() if key != "LLAMA_CPP_LIB_PATH"}
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as scratch:
        out = Path(scratch) / "floors.json"
        command = [sys.executable, "-m", __package__, "--model", str(model), "--floor-json", str(out),
                   *(["--quick"] if config.quick else []),
                   *(["--threads", str(config.threads)] if config.threads else [])]
        subprocess.run(command, env={**env, **overrides}, check=True)
        return json.loads(out.read_text())


def variants(args: argparse.Namespace) -> list[tuple[str, dict[str, str]]]:
    found = [(f"library {library}", {"LLAMA_CPP_LIB_PATH": library}) for library in args.variant_lib]
    for setting in args.variant_env:
        name, _, value = setting.partition("=")
        found.append((setting, {name: value}))
    return found


def served_phases(results: dict[str, Any], phases: Phases, model: Path, config: configs.Config,
                  *, with_chat: bool, with_server: bool) -> None:
    """Everything that needs the servers: all up for the whole time, idle when not measured."""
    with contextlib.ExitStack() as stack:
        adapter = stack.enter_context(servers.adapter(model, {**config.settings,
                                                              "SEMIF_QUEUE_SIZE": str(config.queue_size)}))
        results["adapter_ready"] = adapter.ready_fields()
        threads = int(results["adapter_ready"].get("threads") or cpu_quota())
        chat = stack.enter_context(servers.llama_server(model, threads)) if with_chat else None
        server = stack.enter_context(servers.llama_server(model, threads, completion.SETTINGS)) \
            if with_server else None
        inproc = Model.open(model, config.settings)
        stack.callback(inproc.close)
        serial_model = Model.open(model, config.settings)  # the serial-prefix mode's own context: nothing else uses
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
    publish(results, markdown(results), out, "decisions", render_chart)


def bench(args: argparse.Namespace) -> int:
    """Every phase (or the floor alone, in a --variant-* child), then the report files; the exit status."""
    config = configs.quick() if args.quick else configs.full()
    if args.memory_states:
        config = dataclasses.replace(config, memory=dataclasses.replace(config.memory, states=args.memory_states))
    if args.threads:
        config = dataclasses.replace(config, threads=args.threads)
    model = (args.model or embedded_model_path()).resolve()
    if args.floor_json:
        opened = Model.open(model, config.settings)
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
        # the baseline again at the end shows how far the machine drifted meanwhile (not in a quick run: minutes)
        drift = [] if config.quick else [("default again (drift)", {})]
        runs = [("default (child process)", {}), *variants(args), *drift]
        results["variants"] = [{"label": label, "env": env,
                                "floors": phases.run(f"floor: {label}", variant_floors, model, config, env)}
                               for label, env in runs]
    results["meta"] = {
        "started": started, "quick": config.quick, "model": model.name, "cpu": cpu_model(), "cpus": cpu_quota(),
        "threads": results["adapter_ready"].get("threads"), "commit": commit(), "python": platform.python_version(),
        "load_before": load_before, "load_after": load(), "wall_s": round(time.monotonic() - clock, 1),
        "phases": phases.log, "llama_cpp_lib": os.environ.get("LLAMA_CPP_LIB_PATH", "bundled"),
    }
    out = args.out or (QUICK_OUT if args.quick else FULL_OUT)
    write_outputs(results, out)
    print(f"bench: wrote {out}/decisions.{{json,md,png}} in {results['meta']['wall_s']:.0f} s", file=sys.stderr)
    return 0
