"""Every number a running decision adapter answers for the labelled sets, without timings, in one JSON file: run it
against two builds (or settings) of the adapter and `cmp` the files to show that a change left every score's bits alone.

    .venv/bin/python -m scripts.dev.answer_numbers http://127.0.0.1:8080 /tmp/a.json [--cases 40]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SYSTEMONE_CASES = ROOT / "tests" / "data" / "systemone.jsonl"
SEMIF_CASES = ROOT / "tests" / "data" / "decisions.jsonl"
METHODS = ("pmi", "likelihood", "letters")
SEMIF_NUMBERS = ("option_ids", "probabilities", "option_logits")


def read_cases(path: Path, limit: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[:limit]]


def systemone_numbers(client: httpx.Client, case: dict[str, Any], method: str) -> list[Any]:
    body = {"model": "jev-latest", "state": case["state"], "questions": case["questions"], "x_scoring": method}
    response = client.post("/v1/systemone", json=body)
    answer = response.json()
    if response.is_success:
        answer = answer["answers"]
        for item in answer.values():
            item.pop("x_timing", None)
    return [method, case["id"], response.status_code, answer]


def semif_numbers(client: httpx.Client, case: dict[str, Any], method: str) -> list[Any]:
    response = client.post("/invocations", json={"decision": case["decision"], "scoring": method})
    answer = response.json()
    if response.is_success:
        answer = {key: answer[key] for key in SEMIF_NUMBERS}
    return [method, case["decision"]["id"], response.status_code, answer]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the adapter, e.g. http://127.0.0.1:8080")
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("--cases", type=int, default=40, help="cases from each labelled set")
    args = parser.parse_args()
    systemone, semif = read_cases(SYSTEMONE_CASES, args.cases), read_cases(SEMIF_CASES, args.cases)
    with httpx.Client(base_url=args.url, timeout=120) as client:
        rows = [row for method in METHODS for row in (
            *(systemone_numbers(client, case, method) for case in systemone),
            *(semif_numbers(client, case, method) for case in semif))]
    args.out.write_text(json.dumps(rows))
    print(f"{len(rows)} answers, {sum(row[2] == 200 for row in rows)} of them 200, in {args.out}")


if __name__ == "__main__":
    main()
