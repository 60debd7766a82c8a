"""The batch tool's pieces on their own (no server): input ids, chunking, the join, OUTPUT and its resume."""

from __future__ import annotations

import datetime
import hashlib
import json
import random
import re
from pathlib import Path

import pytest
from support.systemone import NOUL, SCORE, body

from scripts.batch.chunking import plan_chunks
from scripts.batch.errors import BatchRefused
from scripts.batch.join import JoinError, Result, failed, join
from scripts.batch.progress import Summary
from scripts.batch.records import InputFile, InputRecord, parse_input
from scripts.batch.resume import OrderedWriter, read_previous
from scripts.batch.s3_objects import S3Location
from scripts.batch.sample import QUESTIONS, sample_lines, ticket
from scripts.batch.transform import JobPlan, job_name, job_request


def systemone_lines(count: int, seed: int) -> list[str]:
    """System One requests about sample tickets, a line each: a choice, a yes/no and a score (its id not ASCII)."""
    rng = random.Random(seed)
    _key, question, options = QUESTIONS[0]
    action = {"type": "choice", "instructions": question, "criteria": options}
    return [json.dumps(body({"action": action, "refund": NOUL, "colère": SCORE}, state=ticket(rng, number)),
                       ensure_ascii=False) for number in range(1, count + 1)]


def _lines(count: int) -> bytes:
    return "".join(line + "\n" for line in sample_lines(count, 4, seed=3)).encode()


def _answer(record: InputRecord) -> bytes:
    return json.dumps({"decision_id": record.decision_id, "probabilities": [0.5, 0.5]}).encode()


def test_input_keeps_editor_line_numbers_across_blank_lines_and_crlf() -> None:
    first, second = sample_lines(2, 4, seed=3)
    inputs = parse_input(f"{first}\r\n\n  \n{second}".encode(), "in.jsonl")
    assert [(r.number, r.decision_id) for r in inputs.records] == [(1, "t00001-action"), (4, "t00001-urgency")]
    assert inputs.records[0].raw == first.encode() and inputs.blank_lines == 2


def test_input_problems_are_listed_with_their_lines() -> None:
    bad = b"\n".join([b"[1]", b'{"decision": {"id": 7}}', b'{"decisions": []}', b"{}", b"x", b"y", b"z"])
    with pytest.raises(BatchRefused) as refused:
        parse_input(bad, "in.jsonl")
    assert str(refused.value).startswith("in.jsonl: line 1: no decision.id (each line is one request: ")
    assert str(refused.value).endswith(" (and 2 more)")
    with pytest.raises(BatchRefused, match="no request lines"):
        parse_input(b"\n\n", "in.jsonl")


def test_chunks_respect_both_limits_and_an_oversized_line_stands_alone() -> None:
    records = parse_input(_lines(10), "in").records
    chunks, oversized = plan_chunks(records, max_bytes=10_000, max_decisions=3)
    assert [len(c.records) for c in chunks] == [3, 3, 3, 1] and oversized == []
    size = len(records[0].raw) + 1
    chunks, _ = plan_chunks(records[:4], max_bytes=2 * size + 1, max_decisions=16)
    assert all(len(c.body) <= 2 * size + 1 for c in chunks) and len(chunks) == 2
    big = InputRecord(3, "big", b"x" * 10_000)
    chunks, oversized = plan_chunks([*records[:2], big, *records[2:4]], max_bytes=10_000, max_decisions=16)
    assert oversized == [2]
    assert [(c.start, len(c.records)) for c in chunks] == [(0, 2), (3, 2)]  # contiguous runs around it


def test_join_keeps_answers_and_numbers_error_lines_by_input_line() -> None:
    records = parse_input(_lines(3), "in").records
    error = b'{"error":{"code":"invalid_request","message":"m","field":"decision.options"},"line":2}'
    results = join(10, records, [_answer(records[0]), error, _answer(records[2])])
    assert [r.index for r in results] == [10, 11, 12]
    assert results[0].line == _answer(records[0]) and results[0].answered
    assert json.loads(results[1].line or b"") == {
        "error": {"code": "invalid_request", "message": "m", "field": "decision.options"}, "line": 2,
        "decision_id": records[1].decision_id}
    busy = join(0, records[:1], [b'{"error":{"code":"shutting_down","message":"stopping"},"line":1}'])
    assert busy[0].line is None and busy[0].code == "shutting_down"  # to be asked again, not written


@pytest.mark.parametrize(("answers", "message"), [
    (lambda r: [_answer(r[0])], "1 answer lines for 2 request lines"),
    (lambda r: [_answer(r[1]), _answer(r[0])], "holds decision 't00001-action', but its answer is for"),
    (lambda r: [b"[]", b"{}"], "is not a JSON object"),
])
def test_join_refuses_answers_that_do_not_match(answers: object, message: str) -> None:
    records = parse_input(_lines(2), "in").records
    with pytest.raises(JoinError, match=re.escape(message)):
        join(0, records, answers(records))  # type: ignore[operator]


def test_writer_holds_back_early_results_and_writes_in_input_order(tmp_path: Path) -> None:
    records = parse_input(_lines(4), "in").records
    output = tmp_path / "out.jsonl"
    writer = OrderedWriter(output, read_previous(output, parse_input(_lines(4), "in")))
    assert writer.settle([Result(2, records[2], _answer(records[2])), Result(3, records[3], _answer(records[3]))]) \
        == []
    assert writer.settle([failed(1, records[1], "queue_full", "busy")]) == []
    assert output.read_bytes() == b""  # index 0 still outstanding
    released = writer.settle([Result(0, records[0], _answer(records[0]))])
    assert [result.index for result in released] == [0, 1, 2, 3]  # what the summary counts: OUTPUT's order
    assert [json.loads(x)["decision_id"] for x in output.read_bytes().splitlines()] == [
        records[0].decision_id, records[2].decision_id, records[3].decision_id]
    assert writer.close() == 0


def test_resume_cuts_an_incomplete_last_line_and_asks_retryable_lines_again(tmp_path: Path) -> None:
    inputs = parse_input(_lines(4), "in")
    records = inputs.records
    output = tmp_path / "out.jsonl"
    retry = json.dumps({"error": {"code": "queue_full", "message": "m"}, "line": 2,
                        "decision_id": records[1].decision_id})
    final = json.dumps({"error": {"code": "invalid_request", "message": "m"}, "line": 3,
                        "decision_id": records[2].decision_id})
    complete = b"\n".join([_answer(records[0]), retry.encode(), final.encode()]) + b"\n"
    output.write_bytes(complete + _answer(records[3])[:20])  # cut off mid-write
    previous = read_previous(output, inputs)
    assert previous.codes == {records[0].decision_id: None, records[2].decision_id: "invalid_request"}
    assert previous.keep_bytes == len(complete)
    OrderedWriter(output, previous).close()
    assert output.read_bytes() == complete
    summary = Summary.start(inputs, previous)
    assert (summary.answered_before, dict(summary.errors), summary.not_sent) == (1, {"invalid_request": [3]}, 2)


def test_output_of_another_input_or_tool_is_refused(tmp_path: Path) -> None:
    inputs = parse_input(_lines(2), "in")
    output = tmp_path / "out.jsonl"
    output.write_text('{"probabilities": [1]}\n')
    with pytest.raises(BatchRefused, match="line 1 is not an answer or error line with a decision_id"):
        read_previous(output, inputs)


def test_summary_reports_every_fate_by_code() -> None:
    inputs = parse_input(_lines(6), "in")
    records = inputs.records
    summary = Summary.start(inputs, read_previous(Path("/nonexistent"), inputs))
    summary.add([Result(0, records[0], b"{}"), failed(1, records[1], "prompt_too_long", "m"),
                 failed(2, records[2], "queue_full", "m"), failed(3, records[3], "queue_full", "m")])
    summary.elapsed_s = 2.0
    assert summary.report() == [
        "6 lines: 1 answered (0 before this run, 1 now in 2.0 s: 0.50 decisions/s), 1 failed, 2 to retry, 2 not sent",
        "errors by code (final, in OUTPUT): prompt_too_long 1 (line 2)",
        "to retry (not in OUTPUT; run the same command again): queue_full 2 (lines 3, 4)"]
    assert not summary.complete


def _mixed() -> InputFile:
    """System One lines 1, 3 and 5 (5 repeats 1's request), SemIf decisions on lines 2 and 4."""
    semif, one = sample_lines(2, 4, seed=3), systemone_lines(2, seed=5)
    return parse_input("".join(line + "\n" for line in [one[0], semif[0], one[1], semif[1], one[0]]).encode(), "in")


def _systemone_answer(record: InputRecord) -> bytes:
    return json.dumps({"model": "m", "answers": {qid: {"type": "noul", "noul": 0.5} for qid in record.question_ids},
                       "usage": {"input_tokens": 9, "output_tokens": 0}}, ensure_ascii=False).encode()


def _sha(record: InputRecord) -> str:
    return hashlib.sha256(record.raw).hexdigest()


def test_input_tells_system_one_lines_from_semif_lines() -> None:
    records = _mixed().records
    assert [r.key for r in records] == [1, "t00001-action", 3, "t00001-urgency", 5]  # a request has no id: its line
    assert records[0].question_ids == ("action", "refund", "colère") and records[0].decisions == 3
    assert (records[1].question_ids, records[1].decisions) == ((), 1)
    assert records[4].raw == records[0].raw  # a request asked twice is two lines to answer
    both = parse_input(b'{"decision": {"id": "x"}, "questions": {"q": {}}}', "in").records[0]
    assert both.key == "x"  # the adapter's rule: a body with a decision is SemIf's
    with pytest.raises(BatchRefused, match=r"^in: line 2: no decision\.id .*or a System One request"):
        parse_input(b'{"questions": []}\n{"state": "s"}\n', "in")  # line 1 is the adapter's to refuse


def test_chunks_count_a_system_one_line_as_its_questions() -> None:
    records = _mixed().records  # 3, 1, 3, 1 and 3 decisions
    chunks, _ = plan_chunks(records, max_bytes=100_000, max_decisions=4)
    assert [[r.number for r in c.records] for c in chunks] == [[1, 2], [3, 4], [5]]
    chunks, _ = plan_chunks(records, max_bytes=100_000, max_decisions=2)
    assert [[r.number for r in c.records] for c in chunks] == [[1], [2], [3], [4], [5]]  # a line is never split


def test_join_places_system_one_answers_and_errors_by_input_line() -> None:
    records = _mixed().records
    answer = _systemone_answer(records[0])
    invalid = {"detail": [{"loc": ["body", "questions"], "msg": "Input should be a valid dictionary",
                           "type": "dict_type"}], "line": 2}
    results = join(0, records[:3], [answer, b'{"decision_id":"t00001-action"}', json.dumps(invalid).encode()])
    assert results[0].answered and results[0].line is not None
    assert results[0].line.startswith(answer[:-1])  # the adapter's bytes, then where they belong
    assert json.loads(results[0].line) == {**json.loads(answer), "x_line": 1, "x_request_sha256": _sha(records[0])}
    assert results[1].line == b'{"decision_id":"t00001-action"}'
    assert results[2].code == "dict_type"
    assert json.loads(results[2].line or b"") == {**invalid, "line": 3, "x_request_sha256": _sha(records[2])}
    busy = {"detail": {"error_type": "service_unavailable", "message": "busy"}, "line": 1}
    retry = join(0, records[:1], [json.dumps(busy).encode()])[0]
    assert (retry.line, retry.code) == (None, "service_unavailable")  # asked again on a rerun, not written
    large = failed(0, records[0], "body_too_large", "the line is too large", "body")
    assert large.code == "request_too_large" and json.loads(large.line or b"") == {
        "detail": {"error_type": "request_too_large", "message": "the line is too large"}, "line": 1,
        "x_request_sha256": _sha(records[0])}
    with pytest.raises(JoinError, match=r"line 1 asks questions .* answers out of order"):
        join(0, records[:1], [_systemone_answer(records[1])])


def test_resume_finds_system_one_lines_by_number_and_digest(tmp_path: Path) -> None:
    inputs = _mixed()
    records = inputs.records
    invalid = b'{"detail":[{"loc":["body"],"msg":"m","type":"dict_type"}],"line":3}'
    output = tmp_path / "out.jsonl"
    done = join(0, records[:3], [_systemone_answer(records[0]), b'{"decision_id":"t00001-action"}', invalid])
    output.write_bytes(b"".join((result.line or b"") + b"\n" for result in done))
    previous = read_previous(output, inputs)
    assert previous.codes == {1: None, "t00001-action": None, 3: "dict_type"}
    summary = Summary.start(inputs, previous)
    assert (summary.answered_before, dict(summary.errors), summary.not_sent) == (2, {"dict_type": [3]}, 2)
    semif, one = sample_lines(2, 4, seed=3), systemone_lines(2, seed=5)
    edited = parse_input("\n".join([one[1], semif[0], one[0]]).encode(), "in")  # lines 1 and 3 swapped
    with pytest.raises(BatchRefused, match="line 1 answers a System One request that input line 1 does not hold"):
        read_previous(output, edited)
    stranger = {"x_line": 2, "x_request_sha256": _sha(records[0]), "answers": {}}  # line 2 is a SemIf line
    output.write_text(json.dumps(stranger) + "\n")
    with pytest.raises(BatchRefused, match="OUTPUT belongs to another input"):
        read_previous(output, inputs)


def test_a_jobs_lines_are_found_in_the_input_by_id_or_by_bytes() -> None:
    inputs = _mixed()
    records = inputs.records
    job = parse_input(b"\n".join(r.raw for r in [records[1], records[0], records[2]]), "job").records
    found, strangers = inputs.locate(job, finished=lambda key: key == 1)
    assert [r.number for r in found] == [2, 5, 3] and strangers == []  # of two copies, the one OUTPUT lacks
    assert [r.number for r in inputs.locate(job, finished=lambda key: False)[0]] == [2, 1, 3]
    other = parse_input(systemone_lines(3, seed=6)[2].encode(), "job").records
    assert inputs.locate(other, finished=lambda key: False) == ([], other)


def test_summary_counts_a_system_one_lines_questions_as_decisions() -> None:
    inputs = _mixed()
    summary = Summary.start(inputs, read_previous(Path("/nonexistent"), inputs))
    summary.add([Result(0, inputs.records[0], b"{}"), Result(1, inputs.records[1], b"{}")])
    summary.elapsed_s = 2.0
    assert summary.report() == [
        "5 lines: 2 answered (0 before this run, 2 now in 2.0 s: 4 decisions, 2.00 decisions/s), 3 not sent",
        "not sent: run the same command again to ask the rest"]


def test_job_names_fit_sagemaker() -> None:
    now = datetime.datetime(2026, 12, 1, 9, 30, 5, tzinfo=datetime.UTC)
    assert job_name("semif-dev", now) == "semif-dev-batch-20261201-093005"
    long = job_name("My_Stack.Name" * 10, now)
    assert len(long) <= 63 and re.fullmatch(r"[A-Za-z0-9](-*[A-Za-z0-9])*", long)


def test_job_request_names_the_output_key_when_given() -> None:
    plan = JobPlan(model_name="m", output=S3Location.parse("s3://b/out/"), input_prefix=None,
                   instance_type="ml.m5.large", instance_count=1, max_payload_mb=1, max_concurrent_transforms=1,
                   output_kms_key="arn:aws:kms:us-east-1:1:key/k")
    request = job_request(plan, "job", S3Location.parse("s3://b/in/x.jsonl"))
    assert request["TransformOutput"] == {"S3OutputPath": "s3://b/out/job/", "Accept": "application/jsonlines",
                                          "AssembleWith": "Line", "KmsKeyId": "arn:aws:kms:us-east-1:1:key/k"}
    with pytest.raises(BatchRefused, match="is not an s3://bucket/key URI"):
        S3Location.parse("https://b/key")
