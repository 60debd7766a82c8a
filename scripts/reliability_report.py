"""Measure both local endpoints under load, faults and hostile input; write docs/reliability/report.{json,md}.

    python scripts/reliability_report.py [--duration 60] [--clients 16] [--out docs/reliability]

Everything runs on 127.0.0.1 with the embedded model, bounded in time (about
10 minutes on 2 CPUs with the defaults), and stops by itself. Exit status 0
when every check passed, 1 otherwise (the report is written either way).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

if not __package__:  # `python scripts/reliability_report.py`: run as the module of its package (relative imports)
    import runpy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(runpy.run_module("scripts.reliability_report", run_name="__main__", alter_sys=True) and 0)

from .reliability.report import render_markdown
from .reliability.suite import SuiteConfig, run_suite

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "docs" / "reliability"


def main(argv: list[str] | None = None) -> int:
    defaults = SuiteConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=defaults.duration_s, help="decision load, seconds")
    parser.add_argument("--clients", type=int, default=defaults.clients, help="decision load, concurrent clients")
    parser.add_argument("--chat-duration", type=float, default=defaults.chat_duration_s)
    parser.add_argument("--examples", type=float, default=1.0,
                        help="scale the generated example counts (hypothesis, schemathesis)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory for report.json and report.md")
    args = parser.parse_args(argv)
    config = SuiteConfig(duration_s=args.duration, clients=args.clients, chat_duration_s=args.chat_duration,
                         http_examples=max(1, round(defaults.http_examples * args.examples)),
                         fuzz_examples=max(1, round(defaults.fuzz_examples * args.examples)),
                         validation_examples=max(1, round(defaults.validation_examples * args.examples)))
    command = shlex.join(["python", "scripts/reliability_report.py", *(argv if argv is not None else sys.argv[1:])])
    report = run_suite(config, command)
    args.out.mkdir(parents=True, exist_ok=True)
    document = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    (args.out / "report.json").write_text(document)
    (args.out / "report.md").write_text(render_markdown(json.loads(document)))  # from the JSON as written
    print(f"reliability: {report['verdict']} ({len(report['problems'])} problems) in {report['seconds']:.0f} s; "
          f"written to {args.out}")
    for problem in report["problems"]:
        print(f"  - {problem}")
    return 0 if report["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
