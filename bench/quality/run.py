"""Quality on data nobody here wrote, through a System One endpoint: sys1bench's canary and jevbench-mini.

    python -m bench.quality --url http://127.0.0.1:8080 --out build/quality
    python -m bench.quality --url URL --out DIR --limit 20 --jevbench-max-requests 50

Both harnesses run as their users run them, as commands from their own venv (`.venv-bench`, requirements-bench.txt),
offline: every item they send ships in their wheels. (1) `sys1bench run` of its packaged 200-item canary (1,100
questions: 2 choice, 7 noul and 2 score question keys, in two domains) through its `jev_typesafe` adapter pointed
at URL, then `sys1bench score`; its per-question scorecards, and the same scorecard (sys1bench's own function) over
each primitive's rows: accuracy, ECE (15 bins) and ECE over the noise floor, Brier. (2) `jevbench eval` of its
default suite, jevbench-mini (1,248 requests, 1,055 of them distinct): the coherence score (0-100), its five
dimensions (BAT is batch independence) and eleven groups; and the argmax accuracy of the base answers against
JevBench's gold answers (its repository's data/gold.jsonl, not in the wheel: --jevbench-gold, $SEMIF_JEVBENCH_GOLD,
or ~/.cache/semif-sagemaker/data/jevbench-gold.jsonl when it is there), counted as JevBench's leaderboard counts
it: over the questions whose gold is known, the most probable answer, a k-way tie earning 1/k (overall and per
question type, with how often a noul is answered yes). Everything goes to
OUT/quality.json; the tools' own files (predictions, reports, logs, request caches) stay beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common.tables import table_lines
from bench.systemone.tools import ToolMissingError, tool, tool_env
from scripts.common.command import program_parser
from scripts.dev.build_llama_cpp import cache_root

MODEL = "jev-latest"
GOLD_ENV = "SEMIF_JEVBENCH_GOLD"
GOLD_CACHED = cache_root() / "data" / "jevbench-gold.jsonl"
SUITE = "jevbench-mini"
# Run by the tools venv's Python: sys1bench's own scorecard over each primitive's rows (its CLI scores per question).
_PER_PRIMITIVE = """
import collections, json, sys
from sys1bench.report import scorecard
from sys1bench.runners.benchmark_runner import load_predictions
rows = [r for r in load_predictions(sys.argv[1]) if r.arm in (None, "main")]
groups = collections.defaultdict(list)
for row in rows:
    groups[row.primitive].append(row)
print(json.dumps({primitive: scorecard(found) for primitive, found in sorted(groups.items())}, default=str))
"""
_PACKAGED = """
import json, pathlib, jevbench, sys1bench
from sys1bench.data import canary_path
cases = pathlib.Path(jevbench.__file__).parent / "suites" / "jevbench-240" / "cases.jsonl"
print(json.dumps({"canary": str(canary_path()), "sys1bench": sys1bench.__version__, "jevbench": jevbench.__version__,
                  "jevbench_cases": str(cases)}))
"""


def _tools_python(script: str, *args: str) -> Any:
    run = subprocess.run([str(tool("python")), "-c", script, *args], env=tool_env(), capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout)


def _command(argv: list[str], log: Path) -> dict[str, Any]:
    """Run a tool command, its output in `log`; what ran, its exit status and how long it took."""
    started = time.monotonic()
    with log.open("w") as output:
        status = subprocess.run(argv, env=tool_env(), stdout=output, stderr=subprocess.STDOUT, check=False).returncode
    return {"argv": argv, "exit_status": status, "wall_s": round(time.monotonic() - started, 1), "log": str(log)}


def _card(card: dict[str, Any]) -> dict[str, Any]:
    calibration = card.get("calibration") or {}
    return {"n": card.get("n_rows"), "accuracy": card.get("accuracy"), "ece_15": calibration.get("ece_width_15"),
            "ece_over_floor": calibration.get("ece_over_floor"), "brier": calibration.get("brier"),
            "schema_failure_rate": card.get("schema_failure_rate"),
            "transport_failure_rate": card.get("transport_failure_rate"),
            "latency_p50_ms": (card.get("latency") or {}).get("p50")}


def sys1bench_canary(endpoint: str, out: Path, canary: str, limit: int | None, concurrency: int) -> dict[str, Any]:
    """The canary through sys1bench's `jev_typesafe` adapter (a local server: any key, the alias allowed)."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "config.yaml"
    config.write_text(json.dumps({"adapter": "jev_typesafe", "model_id": MODEL, "url": endpoint, "api_key": "local",
                                  "allow_alias": True, "deployment": "local", "timeout_s": 300}, indent=1) + "\n")
    predictions, summary = out / "predictions.jsonl", out / "summary.json"
    run = _command([str(tool("sys1bench")), "run", canary, str(predictions), "--config", str(config), "--cache",
                    str(out / "cache.sqlite"), "--concurrency", str(concurrency),
                    *(["--limit", str(limit)] if limit else [])], out / "run.log")
    if not predictions.exists():
        return {"run": run, "error": "sys1bench wrote no predictions (see its log)"}
    score = _command([str(tool("sys1bench")), "score", str(predictions), "--out", str(summary), "--table",
                      str(out / "table.md")], out / "score.log")
    rows = [json.loads(line) for line in predictions.read_text().splitlines() if line.strip()]
    cards = json.loads(summary.read_text()) if summary.exists() else {}
    return {"run": run, "score": score, "items": len({row["task_id"] for row in rows}), "questions": len(rows),
            "rows_with_errors": sum(bool(row.get("error")) for row in rows),
            "model_returned": sorted({row["model_id"] for row in rows}),
            "per_question": {name.split(" / ", 1)[-1]: _card(card) for name, card in cards.items()},
            "per_primitive": {primitive: _card(card) for primitive, card in
                              _tools_python(_PER_PRIMITIVE, str(predictions)).items()}}


def argmax_accuracy(bases: dict[str, Any], gold: dict[str, dict[str, Any]], cases: dict[str, Any]) -> dict[str, Any]:
    """JevBench's leaderboard accuracy: each case's base answers against its gold, over the questions whose gold is
    known; the most probable answer counts, a k-way tie earning 1/k; also the mean probability of the gold answer.
    The same per question type (`by_type`), and for noul how often the gold and the answer are yes: a model without
    a yes/no signal shows it there first."""
    scored: dict[str, list[tuple[float, float]]] = {}
    noul_yes: list[tuple[bool, bool]] = []
    for case_id, entry in bases.items():
        for question_id, answer in (gold.get(case_id) or {}).items():
            distribution = (entry.get("base") or {}).get(question_id)
            if answer == "unknown" or not distribution:
                continue
            kind = cases[case_id]["questions"][question_id]["type"]
            key = ("true" if answer is True else "false") if kind == "noul" else str(answer)
            top = max(distribution.values())
            winners = [option for option, p in distribution.items() if abs(p - top) <= 1e-9]
            scored.setdefault(kind, []).append((1.0 / len(winners) if key in winners else 0.0,
                                                float(distribution.get(key, 0.0))))
            if kind == "noul":
                noul_yes.append((answer is True, distribution.get("true", 0.0) > distribution.get("false", 0.0)))
    found = _accuracy([row for rows in scored.values() for row in rows])
    found["by_type"] = {kind: _accuracy(rows) for kind, rows in sorted(scored.items())}
    if noul_yes:
        found["by_type"]["noul"].update(gold_yes_rate=sum(g for g, _ in noul_yes) / len(noul_yes),
                                        answered_yes_rate=sum(a for _, a in noul_yes) / len(noul_yes))
    return found


def _accuracy(rows: list[tuple[float, float]]) -> dict[str, Any]:
    if not rows:
        return {"accuracy": None, "gold_probability": None, "n": 0}
    return {"accuracy": sum(credit for credit, _ in rows) / len(rows),
            "gold_probability": sum(p for _, p in rows) / len(rows), "n": len(rows)}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def jevbench_suite(endpoint: str, out: Path, *, name: str, suite: str, max_requests: int | None, concurrency: int,
                   gold_path: Path | None, cases_path: str) -> dict[str, Any]:
    """`jevbench eval` of the suite; its scores, and the argmax accuracy when the gold answers are at hand."""
    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "report.json"
    run = _command([str(tool("jevbench")), "eval", "--url", endpoint, "--model", MODEL, "--suite", suite, "--name",
                    name, "--out", str(report_path), "--cache-dir", str(out / "cache"), "--concurrency",
                    str(concurrency), *(["--max-requests", str(max_requests)] if max_requests else [])],
                   out / "eval.log")
    if not report_path.exists():
        return {"run": run, "error": "jevbench wrote no report (see its log)"}
    report = json.loads(report_path.read_text())
    scores, result = report["scores"], report["result"]
    found: dict[str, Any] = {
        "run": run, "suite": suite, "coherence_score": _percent(scores.get("overall")),
        "ci": [_percent(v) for v in (scores.get("ci") or {}).get("overall") or []],
        "dimensions": {k: _percent(v) for k, v in (scores.get("pillars") or {}).items()},
        "batch_independence": _percent((scores.get("pillars") or {}).get("BAT")),
        "groups": {k: _percent(v) for k, v in (scores.get("groups") or {}).items()},
        "cases": scores.get("n_cases"), "requests": result.get("requests"), "cache_hits": result.get("cache_hits"),
        "errors": len(result.get("errors") or []), "backend_down": result.get("backend_down"),
        "truncated_by_budget": result.get("truncated_by_budget"), "wall_seconds": result.get("wall_seconds")}
    if gold_path is None:
        found["argmax_accuracy"] = {"accuracy": None, "note": f"no gold answers: JevBench's data/gold.jsonl is not in "
                                    f"its wheel; give it with --jevbench-gold, ${GOLD_ENV} or at {GOLD_CACHED}"}
    else:
        gold = {entry["id"]: entry["gold"] for entry in _jsonl(gold_path)}
        cases = {case["id"]: case for case in _jsonl(Path(cases_path))}
        found["argmax_accuracy"] = {**argmax_accuracy(result.get("bases") or {}, gold, cases), "gold": str(gold_path),
                                    "gold_sha256": hashlib.sha256(gold_path.read_bytes()).hexdigest()}
    return found


def _percent(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1/systemone") else url + "/v1/systemone"


def default_gold() -> Path | None:
    if os.environ.get(GOLD_ENV):
        return Path(os.environ[GOLD_ENV])
    return GOLD_CACHED if GOLD_CACHED.exists() else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = program_parser(__doc__, __package__ or "bench.quality")
    parser.add_argument("--url", required=True, help="the server's root URL (or its /v1/systemone)")
    parser.add_argument("--out", type=Path, required=True, help="folder for quality.json and the tools' own files")
    parser.add_argument("--name", help="the system's name in jevbench's report (default: the URL)")
    parser.add_argument("--limit", type=int, help="only the canary's first N items (a smoke run)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="requests in flight, for both tools (default 1, their own default: the answers of a "
                             "server that batches requests may change with it; ours do not)")
    parser.add_argument("--jevbench-suite", default=SUITE, help=f"a bundled jevbench suite (default {SUITE})")
    parser.add_argument("--jevbench-max-requests", type=int, help="cap jevbench's uncached requests (a smoke run)")
    parser.add_argument("--jevbench-gold", type=Path, default=default_gold(),
                        help=f"JevBench's data/gold.jsonl, for the argmax accuracy (default ${GOLD_ENV}, else "
                             f"{GOLD_CACHED} when it exists)")
    parser.add_argument("--skip-sys1bench", action="store_true")
    parser.add_argument("--skip-jevbench", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    endpoint, started = _endpoint(args.url), time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        packaged = _tools_python(_PACKAGED)
    except ToolMissingError as missing:
        print(f"quality: {missing}", file=sys.stderr)
        return 2
    results: dict[str, Any] = {"endpoint": endpoint, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                               "versions": {k: packaged[k] for k in ("sys1bench", "jevbench")},
                               "smoke": bool(args.limit or args.jevbench_max_requests)}
    if not args.skip_sys1bench:
        results["sys1bench"] = sys1bench_canary(endpoint, args.out / "sys1bench", packaged["canary"], args.limit,
                                                args.concurrency)
    if not args.skip_jevbench:
        results["jevbench"] = jevbench_suite(endpoint, args.out / "jevbench", name=args.name or endpoint,
                                             suite=args.jevbench_suite, max_requests=args.jevbench_max_requests,
                                             concurrency=args.concurrency, gold_path=args.jevbench_gold,
                                             cases_path=packaged["jevbench_cases"])
    results["wall_s"] = round(time.monotonic() - started, 1)
    (args.out / "quality.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n".join(summary_lines(results)))
    return 0


def summary_lines(results: dict[str, Any]) -> list[str]:
    lines = [f"# Quality through {results['endpoint']} ({results['wall_s']:.0f} s)", ""]
    canary = results.get("sys1bench") or {}
    if canary.get("per_primitive"):
        lines += [f"sys1bench canary: {canary['items']} items, {canary['questions']} questions, "
                  f"{canary['rows_with_errors']} with errors", ""]
        lines += table_lines(["primitive", "n", "accuracy", "ECE (15 bins)", "ECE / floor", "Brier"],
                        [[name, c["n"], c["accuracy"], c["ece_15"], c["ece_over_floor"], c["brier"]]
                         for name, c in canary["per_primitive"].items()])
    bench = results.get("jevbench") or {}
    if "coherence_score" in bench:
        accuracy = bench["argmax_accuracy"].get("accuracy")
        lines += [f"jevbench ({bench['suite']}): coherence score {bench['coherence_score']} (95% {bench['ci']}), "
                  f"batch independence {bench['batch_independence']}, argmax accuracy "
                  f"{'-' if accuracy is None else f'{accuracy:.3f}'}; dimensions {bench['dimensions']}; "
                  f"{bench['requests']} requests, {bench['errors']} errors", ""]
        by_type = bench["argmax_accuracy"].get("by_type") or {}
        if by_type:
            lines += table_lines(["type", "n", "argmax accuracy", "p(gold)", "gold yes", "answered yes"],
                            [[kind, c["n"], c["accuracy"], c["gold_probability"], c.get("gold_yes_rate", "-"),
                              c.get("answered_yes_rate", "-")] for kind, c in by_type.items()])
    return lines
