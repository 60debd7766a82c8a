"""System One servers side by side: questions per state, options per choice, decisions/s, conformance.

    .venv/bin/python -m bench.systemone                  # adapter and semif-serve -> docs/bench/systemone/
    .venv/bin/python -m bench.systemone --quick --mock   # smallest form, jevcompat mock only
    .venv/bin/python -m bench.systemone --system kev=http://127.0.0.1:8009 --adapter

Every system is a real server on loopback: our adapter (`container/serve serve`, its `/v1/systemone`), SemIf's
`semif-serve` on the same GGUF (bench/systemone/peer.py), the reference server `jevcompat mock`, or any
System One root URL given with --system. One run measures, with the systems taking turns request by request:
(a) p50 latency for 1, 2, 4, 8 questions about one fresh state, and what each question beyond the first costs
against the raw-decode floor of its own evaluated tokens (floor.py); (b) one choice over 2, 16, 64 and
255 options against the floor of its tokens (a refusal is recorded as one); (c) decisions/s on the same triage
tickets, closed-loop clients all at once, round by round; (d) each system's `jevcompat test` verdict.
Writes systemone.json (every request), systemone.md and systemone.png under --out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import servers
from bench.common.paths import BENCH_DOCS, BUILD
from bench.common.runs import Phases, commit, cpu_model, load
from bench.page.publish import publish
from bench.systemone import config as configs
from bench.systemone.chart import render_chart
from bench.systemone.floor import RawFloor
from bench.systemone.peer import PeerMissingError, installation, semif_serve
from bench.systemone.phases import (
    adapters,
    conformance_phase,
    options_phase,
    questions_phase,
    semif_phase,
    throughput_phase,
    warm_up,
)
from bench.systemone.report import markdown
from bench.systemone.tools import Running, ToolMissingError, mock_server
from scripts.common.command import program_parser
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.settings import cpu_quota

FULL_OUT = BENCH_DOCS / "systemone"
QUICK_OUT = BUILD / "bench-systemone-quick"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = program_parser(__doc__, __package__)
    parser.add_argument("--adapter", action="store_true", help="start our adapter (default with --semif-serve "
                                                               "when no system is named)")
    parser.add_argument("--semif-serve", action="store_true", help="start SemIf's semif-serve on the same GGUF")
    parser.add_argument("--mock", action="store_true", help="start `jevcompat mock`, the reference server")
    parser.add_argument("--system", action="append", default=[], metavar="NAME=URL",
                        help="a running System One server, by its root URL (repeatable)")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--quick", action="store_true", help="every phase in its smallest form")
    parser.add_argument("--out", type=Path, help=f"output directory (default {FULL_OUT}; --quick: {QUICK_OUT})")
    parser.add_argument("--no-floor", action="store_true", help="no in-process floor (no model loaded here)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-conformance", action="store_true", help="no `jevcompat test` runs")
    args = parser.parse_args(argv)
    if not (args.adapter or args.semif_serve or args.mock or args.system):
        args.adapter = args.semif_serve = True
    return args


def _named(setting: str) -> Running:
    name, _, url = setting.partition("=")
    if not name or not url.startswith("http"):
        raise SystemExit(f"--system takes NAME=URL (a server root such as http://127.0.0.1:8000), not {setting!r}")
    return Running(name, url.rstrip("/"))


def start_systems(stack: contextlib.ExitStack, args: argparse.Namespace, model: Path,
                  results: dict[str, Any]) -> list[Running]:
    """The systems in their reporting order (ours first); all up for the whole run, idle when not measured."""
    systems: list[Running] = []
    threads = cpu_quota()
    if args.adapter:
        adapter = stack.enter_context(servers.adapter(model))
        results["adapter_ready"] = adapter.ready_fields()
        threads = int(results["adapter_ready"].get("threads") or threads)
        systems.append(Running("adapter", adapter.url))
    if args.semif_serve:
        results["semif_serve"] = {**installation(model), "threads": threads}
        systems.append(stack.enter_context(semif_serve(model, threads)))
    if args.mock:
        systems.append(stack.enter_context(mock_server()))
    systems += [_named(setting) for setting in args.system]
    return systems


def run(args: argparse.Namespace) -> dict[str, Any]:
    config = configs.quick() if args.quick else configs.full()
    model = (args.model or embedded_model_path()).resolve()
    out = args.out or (QUICK_OUT if args.quick else FULL_OUT)
    started, phases = time.monotonic(), Phases()
    results: dict[str, Any] = {"meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                        "quick": config.quick, "model": model.name, "commit": commit(),
                                        "cpu": cpu_model(),
                                        "cpus": cpu_quota(), "load_before": load()},
                               "config": dataclasses.asdict(config)}
    with contextlib.ExitStack() as stack:
        systems = start_systems(stack, args, model, results)
        floor = None if args.no_floor else RawFloor(model)
        if floor:
            stack.callback(floor.close)
        results["systems"] = {system.name: system.url for system in systems}
        phases.run("warm-up", warm_up, systems, config)
        results["questions"] = phases.run("questions per state, taking turns", questions_phase, systems, config,
                                          floor)
        results["options"] = phases.run("options per choice, taking turns", options_phase, systems, config, floor)
        if adapters(systems):
            results["semif"] = phases.run("fresh SemIf decisions", semif_phase, systems, config, floor)
        if not args.skip_throughput:
            results["throughput"] = phases.run("throughput, round by round", throughput_phase, systems,
                                               config.throughput)
        if not args.skip_conformance:
            results["conformance"] = phases.run("jevcompat test", conformance_phase, systems, out)
    results["meta"].update(load_after=load(), wall_s=round(time.monotonic() - started, 1), phases=phases.log,
                           floor_threads=None if args.no_floor else cpu_quota())
    return results


def write_outputs(results: dict[str, Any], out: Path) -> None:
    publish(results, markdown(results), out, "systemone", render_chart)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run(args)
    except (PeerMissingError, ToolMissingError) as missing:
        print(f"bench: {missing}", file=sys.stderr)
        return 2
    write_outputs(results, args.out or (QUICK_OUT if args.quick else FULL_OUT))
    print(f"bench: systemone done in {results['meta']['wall_s']} s", file=sys.stderr)
    return 0
