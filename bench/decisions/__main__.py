"""Decision latency and throughput against the floor and the alternatives, in one run on one machine.

    python -m bench.decisions [--model PATH] [--quick] [--threads N] [--out DIR]
    python -m bench.decisions --skip-memory --skip-knobs --variant-lib DIR --variant-env NAME=VALUE

The adapter runs as the real `container/serve serve` process and the chat path
as the real llama-server, both on loopback; the floor (raw llama_decode of the
tokens a decision needs) and SemIf's fresh reference method run in this process
through the adapter's own llama.cpp layer; llama-server also runs as a scorer
(`/completion`, `--parallel 4`, its prompt cache on) and SemIf's serial-prefix
mode runs in process on a context of its own. (1) Scenarios, `debias: permute`
included: the systems take turns request by request (see paired.py).
(2) The scoring methods' cost: letters, likelihood and pmi taking turns.
(3) Real traffic, interleaved and skewed: adapter, llama-server, serial
prefix and the machine's floor for the same tokens (bench/traffic/floor.py) taking
turns round by round (bench/traffic/phase.py). (4) The caches: restore vs
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
from pathlib import Path

from bench.decisions.run import bench
from scripts.common.command import program_parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = program_parser(__doc__, __package__ or "bench.decisions")
    parser.add_argument("--model", type=Path, help="GGUF file (default: the embedded SmolLM2-135M)")
    parser.add_argument("--quick", action="store_true", help="every phase in its smallest form (a few minutes)")
    parser.add_argument("--out", type=Path,
                        help="output directory (default docs/bench/decisions; --quick: build/bench-quick)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="every model and server of the run on N threads (default: the adapter's, from the CPUs)")
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


raise SystemExit(bench(parse_args()))
