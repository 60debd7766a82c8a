"""What a door costs: the same questions through `/v1/decisions` (OpenAI's) and `/v1/systemone`, doors taking turns.

    python -m bench.doors [--model PATH] [--rounds 25] [--state text|conversation] [--out DIR]

One adapter, started as the image starts it, with its result cache and host prefix cache off and one worker (one
KV cache). Each round asks the same k questions (1 and 4: the System One bank's first four, which both contracts can
express) about one new state through each door, in an order that alternates by round; before each door's turn an
untimed question about another state takes the KV cache, so both doors read the round's state fresh: the same
tokens, the same work, only the door differs. Reported per k: each door's p50, and the median of the per-round
ratios (decisions / System One), against the target of at most 1.02. With `--state conversation` the round's state is
an agent's conversation around that text (a system turn, the text as the user's, a function call and its output, an
assistant turn): OpenAI's input items against the same conversation as System One's message state, which the adapter
reads as one internal question (tests/adapter/test_openai_conversations.py holds them equal to the bit).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.systemone.workload import MODEL, priming_body, questions_body
from scripts.common.command import program_parser
from scripts.common.stats import summarize
from scripts.local.endpoints import start_decision_container
from scripts.local.processes import wait_for_ping

COUNTS = (1, 4)
TARGET = 1.02
SIZE = "short"
DOORS = ("systemone", "decisions")


def as_decisions(body: dict[str, Any]) -> dict[str, Any]:
    """The System One body as an OpenAI Decisions body asking the same questions (the same internal questions)."""
    questions = []
    for name, question in body["questions"].items():
        asked: dict[str, Any] = {"type": question["type"], "name": name, "instructions": question["instructions"]}
        if question["type"] == "noul":
            if question.get("criteria"):
                raise ValueError(f"{name}: a predicate has no described outcomes")
            asked["type"] = "predicate"
        elif question["type"] == "choice":
            asked["choices"] = [{"value": key, **({"description": text} if text is not None else {})}
                                for key, text in question["criteria"].items()]
        else:
            asked["levels"] = [{"label": level} for level in question["criteria"]]
        questions.append(asked)
    return {"model": body["model"], "input": body["state"], "questions": questions}


def as_conversation(body: dict[str, Any], door: str) -> dict[str, Any]:
    """The body with its text state inside an agent's conversation, in the door's own shape."""
    system, done = "You are the support desk's triage agent.", "I looked the account up."
    call = {"name": "lookup_account", "arguments": '{"depth": 1}'}
    if door == "systemone":
        state: list[dict[str, Any]] = [
            {"role": "system", "content": system}, {"role": "user", "content": body["state"]},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "call_1", "type": "function", "function": call}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "two open tickets"},
            {"role": "assistant", "content": done}]
        return {**body, "state": state}
    items = [{"role": "system", "content": system}, {"role": "user", "content": body["input"]},
             {"type": "function_call", "call_id": "call_1", **call},
             {"type": "function_call_output", "call_id": "call_1", "output": "two open tickets"},
             {"role": "assistant", "content": done}]
    return {**body, "input": items}


def _timed(client: httpx.Client, door: str, body: dict[str, Any], conversation: bool = False) -> float:
    path, payload = ("/v1/systemone", body) if door == "systemone" else ("/v1/decisions", as_decisions(body))
    if conversation:
        payload = as_conversation(payload, door)
    started = time.perf_counter()
    response = client.post(path, json=payload, timeout=300)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{door}: {response.status_code} {response.text[:300]}")
    return elapsed


def _fresh(client: httpx.Client, door: str, body: dict[str, Any], other_state: int, conversation: bool) -> float:
    """The door's time for `body` after a question about another state took the KV cache."""
    flushed = client.post("/v1/systemone", json=priming_body(questions_body(SIZE, other_state, 1)), timeout=300)
    if flushed.status_code != 200:
        raise RuntimeError(f"priming: {flushed.status_code} {flushed.text[:300]}")
    return _timed(client, door, body, conversation)


def measure(client: httpx.Client, count: int, rounds: int, first_state: int, conversation: bool) -> dict[str, Any]:
    times: dict[str, list[float]] = {door: [] for door in DOORS}
    ratios = []
    for index in range(rounds):
        order = DOORS if index % 2 == 0 else DOORS[::-1]
        body = questions_body(SIZE, first_state + 3 * index, count)
        taken = {door: _fresh(client, door, body, first_state + 3 * index + 1 + position, conversation)
                 for position, door in enumerate(order)}
        for door, value in taken.items():
            times[door].append(value)
        ratios.append(taken["decisions"] / taken["systemone"])
    p50 = {door: summarize(values)["p50"] for door, values in times.items()}
    paired = round(statistics.median(ratios), 3)
    return {"questions": count, "rounds": rounds, "p50_ms": p50,
            "unpaired_ratio": round(float(p50["decisions"]) / float(p50["systemone"]), 3),
            "paired_ratio": paired, "target": TARGET, "met": paired <= TARGET,
            "samples_ms": {door: [round(v, 3) for v in values] for door, values in times.items()}}


def report(rows: list[dict[str, Any]], command: str) -> str:
    lines = ["| questions | `/v1/systemone` p50 ms | `/v1/decisions` p50 ms | ratio, paired per round (target <= 1.02) "
             "| ratio of p50s |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['questions']} | {row['p50_ms']['systemone']} | {row['p50_ms']['decisions']} | "
                     f"{row['paired_ratio']:.3f}x {'met' if row['met'] else 'MISSED'} | {row['unpaired_ratio']:.3f}x |")
    return "\n".join([*lines, "", f"Command: `{command}`; {rows[0]['rounds']} rounds per row."])


def main(argv: list[str] | None = None) -> int:
    parser = program_parser(__doc__, "bench.doors")
    parser.add_argument("--model", type=Path, help="a GGUF (default: the embedded model)")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--state", choices=("text", "conversation"), default="text",
                        help="the round's state: its text, or an agent's conversation around it")
    parser.add_argument("--out", type=Path, help="write doors.json and doors.md here (doors-conversation.*)")
    args = parser.parse_args(argv)
    from semif_adapter.engine.embedded_model import embedded_model_path  # the adapter's, where it is installed

    env = {"SM_LLAMA_CPP_MODEL": str(args.model or embedded_model_path()), "SEMIF_RESULT_CACHE_ENTRIES": "0",
           "SEMIF_CACHE_BYTES": "0", "SEMIF_WORKERS": "1",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    with tempfile.TemporaryDirectory(prefix="bench-doors-") as logs:
        container = start_decision_container("decision", env, Path(logs))
        try:
            wait_for_ping(container.child, container.url + "/ping", 120)
            with httpx.Client(base_url=container.url) as client:
                _timed(client, "decisions", questions_body(SIZE, 0, max(COUNTS)))  # warm: first-call costs
                rows = [measure(client, count, args.rounds, 1 + 10_000 * position, args.state == "conversation")
                        for position, count in enumerate(COUNTS)]
        finally:
            container.child.stop(timeout_s=30)
    command = "python -m bench.doors " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(rows, command.strip())
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        name = "doors" if args.state == "text" else "doors-conversation"
        (args.out / f"{name}.json").write_text(json.dumps({"model": MODEL, "state": args.state, "rows": rows},
                                                          indent=1) + "\n")
        (args.out / f"{name}.md").write_text(text + "\n")
    return 0
