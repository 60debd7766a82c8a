"""The public System One conformance suite on each decision type: what a type's head meets, and what it cannot.

    python -m bench.native.conformance [--type all | TYPE ...] [--out DIR]

The adapter as the image starts it, on each type's test model (scripts/dev/decision_models.py), with an API key;
`jevcompat test` unmodified against it. Kept per type: the verdict line and every check that did not pass, with its
first finding (a joint head's `semantics.question-order`, a head's option or batch limit).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.native.run import each_type
from bench.page.publish import publish
from scripts.common.command import program_parser
from scripts.dev.decision_models import decision_model
from scripts.local.endpoints import start_decision_container
from scripts.local.processes import wait_for_ping

API_KEY = "sk-semif-native-conformance"
START_TIMEOUT_S = 180.0


def conformance(name: str, work: Path) -> dict[str, Any]:
    from semif_adapter.doors.api_keys import HASH_PREFIX, digest

    keys = work / f"{name}-keys.txt"
    keys.write_text(f"conformance {HASH_PREFIX}{digest(API_KEY).hex()}\n")
    env = {"SM_LLAMA_CPP_MODEL": str(decision_model(name)), "SEMIF_API_KEYS_FILE": str(keys),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    container = start_decision_container("decision", env, work / name)
    report = work / f"{name}-jevcompat.json"
    try:
        wait_for_ping(container.child, container.url + "/ping", START_TIMEOUT_S)
        done = subprocess.run([str(Path(sys.executable).with_name("jevcompat")), "test", container.url, "--json",
                               str(report), "--timeout", "300", "--key", API_KEY],
                              capture_output=True, text=True, check=False)
    finally:
        container.child.stop(timeout_s=30)
    if not report.exists():
        raise RuntimeError(f"jevcompat wrote no report: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    results = json.loads(report.read_text())["results"]
    not_passed = {r["id"]: (r.get("findings") or [{}])[0].get("message", r["status"]) for r in results
                  if r["status"] not in {"pass", "skip"}}
    verdict = next((line.strip() for line in reversed(done.stdout.splitlines()) if "MUST" in line), "")
    return {"decision_type": name, "verdict": verdict, "not_passed": not_passed}


def report(result: dict[str, Any]) -> str:
    lines = ["| type | jevcompat | not passed, and why |", "|---|---|---|"]
    for run in result["runs"]:
        why = "; ".join(f"`{rid}`: {message}" for rid, message in run["not_passed"].items()) or "none"
        lines.append(f"| `{run['decision_type']}` | {run['verdict']} | {why} |")
    lines += ["", f"Command: `{result['command']}`; {result['machine']}, {result['measured']}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from semif_adapter.engine.decision_types import DECISION_TYPES

    parser = program_parser(__doc__, "bench.native.conformance")
    parser.add_argument("--type", nargs="+", default=["all"], choices=[*DECISION_TYPES, "all"])
    parser.add_argument("--out", type=Path, help="write conformance.json and conformance.md here")
    args = parser.parse_args(argv)
    names = list(DECISION_TYPES) if "all" in args.type else args.type
    result = each_type("bench.native.conformance", names, conformance, argv)
    publish(result, report(result), args.out, "conformance")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
