"""`semif batch` and Batch Transform with OpenAI Decisions lines (`{"model", "input", "questions": [...]}`), answered
per line in OpenAI's shape, beside System One and SemIf lines in the same file.

The parts (fast): how a line is told, joined, placed and found again on a rerun. End to end (slow): the real gateway
and adapter on the embedded model as a user runs the tool, and a transform job's output assembled from the real
adapter's answers, joined by the tool against botocore's Stubber (test_batch_transform.py's machinery).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from support.openai_decisions import MODEL, QUESTIONS, check_decision

from scripts.batch.chunking import plan_chunks
from scripts.batch.join import JoinError, answer_lines, failed, join
from scripts.batch.records import parse_input
from scripts.batch.resume import read_previous
from scripts.batch.sample import sample_lines
from tools.batch.test_batch_cli import AdapterLog, run_batch, write_lines
from tools.batch.test_batch_parts import systemone_lines
from tools.batch.test_batch_transform import Aws, _assemble, run_job
from tools.batch.test_batch_transform import aws as aws  # noqa: PLC0414 (the fixture, used here by name)

TICKETS = ["The parcel arrived today and the screen is cracked; I need a replacement before Friday.",
           "Hi, I was charged twice for my March invoice and want my money back.",
           "Can you tell me whether the Pro plan includes single sign-on?"]


def openai_lines(count: int) -> list[str]:
    """OpenAI requests, one ticket each, every question type (named and unnamed, typed choice values)."""
    return [json.dumps({"model": MODEL, "input": TICKETS[n % len(TICKETS)], "questions": QUESTIONS},
                       ensure_ascii=False) for n in range(count)]


def refused_line() -> str:
    """An OpenAI request the adapter refuses on its line: a score of one level."""
    return json.dumps({"model": MODEL, "input": TICKETS[0], "questions": [
        {"type": "score", "instructions": "How bad?", "levels": [{"label": "only"}]}]})


def sha(line: str | bytes) -> str:
    return hashlib.sha256(line.encode() if isinstance(line, str) else line).hexdigest()


# ---- the parts ---------------------------------------------------------------------------------------------

def _answer(questions: list[dict[str, Any]], **changes: Any) -> bytes:
    answers = [{"type": q["type"], "name": q.get("name"), "probability": 0.5} for q in questions]
    return json.dumps({"answers": answers, "model": "m", "usage": {"input_tokens": 3}, **changes}).encode()


def test_input_tells_openai_lines_from_system_one_and_semif_lines() -> None:
    lines = [openai_lines(1)[0], systemone_lines(1, seed=5)[0], sample_lines(1, 1, seed=3)[0],
             json.dumps({"input": "x", "questions": [{"type": "predicate"}], "decision": {"id": "d"}})]
    records = parse_input("".join(line + "\n" for line in lines).encode(), "in").records
    assert [r.key for r in records] == [1, 2, "t00001-action", 4]  # the adapter's rule: input and a list is OpenAI's
    assert [r.openai for r in records] == [True, False, False, True]
    assert records[0].asked == (("predicate", "refund"), ("choice", "team"), ("choice", None), ("score", "anger"))
    assert [r.decisions for r in records] == [4, 3, 1, 1]
    chunks, _ = plan_chunks(records, max_bytes=100_000, max_decisions=4)
    assert [[r.number for r in chunk.records] for chunk in chunks] == [[1], [2, 3], [4]]


def test_join_places_openai_answers_and_errors_by_input_line() -> None:
    lines = [openai_lines(1)[0], refused_line(), openai_lines(1)[0]]
    records = parse_input("".join(line + "\n" for line in lines).encode(), "in").records
    answer = _answer(QUESTIONS)
    refused = {"error": {"message": "questions[0].levels: too short", "type": "invalid_request_error",
                         "param": "questions[0].levels", "code": "array_too_short"}, "line": 2}
    busy = {"error": {"message": "busy", "type": "server_error", "param": None, "code": "queue_full"}, "line": 3}
    results = join(0, records, [answer, json.dumps(refused).encode(), json.dumps(busy).encode()])
    assert results[0].answered and results[0].line is not None and results[0].line.startswith(answer[:-1])
    assert json.loads(results[0].line) == {**json.loads(answer), "x_line": 1, "x_request_sha256": sha(lines[0])}
    assert results[1].code == "array_too_short"
    assert json.loads(results[1].line or b"") == {**refused, "line": 2, "x_request_sha256": sha(lines[1])}
    assert (results[2].code, results[2].line) == ("queue_full", None)  # of the moment: asked again on a rerun
    with pytest.raises(JoinError, match="answers out of order"):
        join(0, records[:1], [_answer(list(reversed(QUESTIONS)))])
    too_large = failed(0, records[0], "body_too_large", "the line is over the request limit")
    assert json.loads(too_large.line or b"") == {"error": {"message": "the line is over the request limit",
                                                           "type": "invalid_request_error", "param": None,
                                                           "code": "body_too_large"},
                                                 "line": 1, "x_request_sha256": sha(lines[0])}
    assert failed(0, records[0], "timeout", "no answer in time").line is None  # of the moment: not written


def test_a_rerun_finds_openai_lines_again_by_number_and_digest(tmp_path: Path) -> None:
    lines = [openai_lines(1)[0], refused_line()]
    inputs = parse_input("".join(line + "\n" for line in lines).encode(), "in")
    results = join(0, inputs.records, [_answer(QUESTIONS), json.dumps(
        {"error": {"message": "m", "type": "invalid_request_error", "param": None, "code": "array_too_short"},
         "line": 2}).encode()])
    output = tmp_path / "out.jsonl"
    output.write_bytes(b"".join((r.line or b"") + b"\n" for r in results))
    assert read_previous(output, inputs).codes == {1: None, 2: "array_too_short"}
    edited = parse_input((lines[0] + " \n" + lines[1] + "\n").encode(), "in")  # line 1's bytes changed
    with pytest.raises(Exception, match="x_request_sha256 differs"):
        read_previous(output, edited)


# ---- end to end --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_an_openai_file_mixed_with_other_lines_is_answered_in_order(local_endpoints: Any, tmp_path: Path) -> None:
    lines = [openai_lines(1)[0], refused_line(), systemone_lines(1, seed=1411)[0], sample_lines(1, 1, seed=1411)[0],
             openai_lines(2)[1]]
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    local = ("--local", "--port", str(local_endpoints.port))
    log = AdapterLog(local_endpoints)
    first = run_batch(source, "-o", output, *local, "--limit", "2", "--max-decisions", "4")
    assert first.returncode == 1, first.stderr  # the refused line
    log.expect(2)  # 4 decisions, then 1: one request each
    second = run_batch(source, "-o", output, *local, "--max-decisions", "8")
    assert second.returncode == 1, second.stderr
    log.expect(3)
    assert second.stdout.splitlines()[1] == "batch: errors by code (final, in OUTPUT): array_too_short 1 (line 2)"
    written = [json.loads(line) for line in output.read_bytes().splitlines()]
    for number in (1, 5):
        answer = written[number - 1]
        assert (answer["x_line"], answer["x_request_sha256"]) == (number, sha(lines[number - 1]))
        check_decision({key: value for key, value in answer.items() if not key.startswith("x_")}, QUESTIONS)
    refused = written[1]
    assert (refused["line"], refused["x_request_sha256"]) == (2, sha(lines[1]))
    assert refused["error"]["type"] == "invalid_request_error" and refused["error"]["param"] == "questions[0].levels"
    assert set(written[2]["answers"]) == set(json.loads(lines[2])["questions"])  # System One's, by its ids
    assert written[3]["decision_id"] == json.loads(lines[3])["decision"]["id"]
    before = output.read_bytes()
    assert run_batch(source, "-o", output, *local).returncode == 1
    log.expect(0)  # nothing asked twice
    assert output.read_bytes() == before


@pytest.mark.slow
def test_openai_answers_in_a_file_equal_single_answers(local_endpoints: Any, runtime: Any, tmp_path: Path) -> None:
    """A line's answers are the ones the same request gets alone on /invocations (apart from timing)."""
    lines = openai_lines(3)
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    result = run_batch(source, "-o", output, "--local", "--port", str(local_endpoints.port), "--max-decisions", "12")
    assert result.returncode == 0, result.stderr

    def numbers(document: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in answer.items() if k != "x_timing"} for answer in document["answers"]]

    for line, answer in zip(lines, output.read_bytes().splitlines(), strict=True):
        single = runtime.invoke_endpoint(EndpointName="local-decision", ContentType="application/json",
                                         Body=line.encode())
        assert numbers(json.loads(answer)) == numbers(json.loads(single["Body"].read()))


@pytest.mark.slow
def test_a_transform_job_answers_openai_lines(aws: Aws, runtime: Any, tmp_path: Path) -> None:
    """SageMaker splits the file by line and posts mini-batches of JSON Lines; the tool joins the assembled output."""
    lines = [*openai_lines(2), refused_line(), sample_lines(1, 1, seed=1412)[0], openai_lines(1)[0]]
    assembled = _assemble(runtime, lines)
    output = tmp_path / "answers.jsonl"
    summary = run_job(aws, tmp_path, lines, assembled, output)
    written = output.read_bytes().splitlines()
    answers = answer_lines(assembled)
    for number in (1, 2, 5):
        assert written[number - 1].startswith(answers[number - 1][:-1])  # the adapter's bytes, then the place
        assert json.loads(written[number - 1]) == {**json.loads(answers[number - 1]), "x_line": number,
                                                   "x_request_sha256": sha(lines[number - 1])}
    assert json.loads(written[2]) == {**json.loads(answers[2]), "line": 3, "x_request_sha256": sha(lines[2])}
    assert json.loads(written[3])["decision_id"] == json.loads(lines[3])["decision"]["id"]
    assert summary.answered == 4 and summary.decisions == 4 + 4 + 1 + 4
    assert dict(summary.errors) == {"array_too_short": [3]}
