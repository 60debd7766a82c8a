"""Measure both local endpoints under load, faults and hostile input; write docs/reliability/report.{json,md}.

    python -m bench.reliability [--duration 60] [--clients 16] [--out docs/reliability]

Everything runs on 127.0.0.1 with the embedded model, bounded in time (about
10 minutes on 2 CPUs with the defaults), and stops by itself. Exit status 0
when every check passed, 1 otherwise (the report is written either way).

The load, soak, fuzz and fault drivers (one module each) talk to a real server on loopback, run for a bounded
number of requests or seconds, and return figures plus a list of problems (empty when the server behaved);
`suite` runs them all at report size, `tests/reliability/` runs the same code small.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from bench.common.paths import DOCS
from bench.reliability.config import SuiteConfig
from bench.reliability.report import render_markdown
from bench.reliability.suite import run_suite
from scripts.common.command import program_parser

DEFAULT_OUT = DOCS / "reliability"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = SuiteConfig()
    parser = program_parser(__doc__, __package__ or "bench.reliability")
    parser.add_argument("--duration", type=float, default=defaults.duration_s, help="decision load, seconds")
    parser.add_argument("--clients", type=int, default=defaults.clients, help="decision load, concurrent clients")
    parser.add_argument("--chat-duration", type=float, default=defaults.chat_duration_s)
    parser.add_argument("--examples", type=float, default=1.0,
                        help="scale the generated example counts (hypothesis, schemathesis)")
    parser.add_argument("--out", type=Path, help="directory for report.json and report.md (default docs/reliability)")
    return parser.parse_args(argv)


def command_line(args: argparse.Namespace) -> str:
    """The command as the report quotes it: the options that differ from their defaults."""
    defaults, given = SuiteConfig(), ["python", "-m", "bench.reliability"]
    for option, value, default in (("--duration", args.duration, defaults.duration_s),
                                   ("--clients", args.clients, defaults.clients),
                                   ("--chat-duration", args.chat_duration, defaults.chat_duration_s),
                                   ("--examples", args.examples, 1.0), ("--out", args.out, None)):
        if value != default:
            given += [option, str(value)]
    return shlex.join(given)


def run(args: argparse.Namespace) -> int:
    defaults = SuiteConfig()
    config = SuiteConfig(duration_s=args.duration, clients=args.clients, chat_duration_s=args.chat_duration,
                         http_examples=max(1, round(defaults.http_examples * args.examples)),
                         fuzz_examples=max(1, round(defaults.fuzz_examples * args.examples)),
                         validation_examples=max(1, round(defaults.validation_examples * args.examples)))
    report = run_suite(config, command_line(args))
    out = args.out or DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    document = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    (out / "report.json").write_text(document)
    (out / "report.md").write_text(render_markdown(json.loads(document)))  # from the JSON as written
    print(f"reliability: {report['verdict']} ({len(report['problems'])} problems) in {report['seconds']:.0f} s; "
          f"written to {out}")
    for problem in report["problems"]:
        print(f"  - {problem}")
    return 0 if report["verdict"] == "pass" else 1


raise SystemExit(run(parse_args()))
