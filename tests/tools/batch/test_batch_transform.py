"""`scripts.batch --transform` against botocore Stubber, joining an output assembled from real adapter answers.

The assembled output is what SageMaker would write with `SplitType=Line`, `BatchStrategy=MultiRecord` and
`AssembleWith=Line`: the real adapter (through the local gateway) answers the job's lines in mini-batches, and
a newline ends each mini-batch's answer. Stubber checks every AWS request the script makes, in order: the
CreateTransformJob shape, the upload, the polling and the download.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from scripts import batch
from scripts.batch import runner
from scripts.batch.join import answer_lines
from scripts.batch.sample import sample_lines
from scripts.common.command import parse
from scripts.common.polling import Poller
from tools.batch.test_batch_parts import systemone_lines
from tools.smoke.test_smoke_aws import FakeTime

pytestmark = pytest.mark.slow
REGION = "us-east-1"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
JOB = "semif-dev-batch-test"
BUCKET = "semif-dev-batch"
MODEL = "DecisionModel-abc123"
OUTPUTS = {"DecisionModelName": MODEL, "DecisionEndpointConfigName": "DecisionConfig-1",
           "BatchInputUri": f"s3://{BUCKET}/input/", "BatchOutputUri": f"s3://{BUCKET}/output/"}
MINI_BATCH = 3  # lines per request, as SageMaker packs them up to MaxPayloadInMB
JSONL = "application/jsonlines"
UPLOADED = f"s3://{BUCKET}/input/{JOB}/tickets.jsonl"  # where a local input's pending lines go


def _client(name: str) -> Any:
    return boto3.client(name, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


@dataclass
class Aws:
    """Stubbed clients behind a session-like `client(name)`; what was uploaded is kept for the test to read."""

    clients: dict[str, Any]
    stubs: dict[str, Stubber]
    uploads: list[bytes]

    def client(self, name: str, **_: Any) -> Any:
        return self.clients[name]

    def response(self, service: str, operation: str, body: dict[str, Any], params: dict[str, Any]) -> None:
        self.stubs[service].add_response(operation, body, params)


@pytest.fixture
def aws() -> Iterator[Aws]:
    clients = {name: _client(name) for name in ("s3", "sagemaker", "cloudformation")}
    uploads: list[bytes] = []

    def keep(params: dict[str, Any], **_: Any) -> None:
        body = params["Body"]
        uploads.append(body.read() if hasattr(body, "read") else bytes(body))
        if hasattr(body, "seek"):
            body.seek(0)

    clients["s3"].meta.events.register("before-parameter-build.s3.PutObject", keep)
    stubs = {name: Stubber(client) for name, client in clients.items()}
    for stub in stubs.values():
        stub.activate()
    yield Aws(clients, stubs, uploads)
    for stub in stubs.values():
        stub.deactivate()


def _assemble(runtime: Any, lines: list[str]) -> bytes:
    """What the job's `.out` holds: each mini-batch's JSON Lines answer, then the newline AssembleWith adds."""
    out = b""
    for start in range(0, len(lines), MINI_BATCH):
        body = "".join(line + "\n" for line in lines[start:start + MINI_BATCH]).encode()
        answer = runtime.invoke_endpoint(EndpointName="local-decision", ContentType=JSONL, Accept=JSONL, Body=body)
        out += answer["Body"].read() + b"\n"
    return out


@pytest.fixture(scope="module")
def job_lines() -> list[str]:
    lines = sample_lines(7, 4, seed=1402)
    bad = json.loads(lines[4])
    bad["decision"]["options"] = bad["decision"]["options"][:1]  # refused by the adapter: an error on its line
    lines[4] = json.dumps(bad)
    return lines


@pytest.fixture
def tickets(tmp_path: Path, job_lines: list[str]) -> Path:
    source = tmp_path / "tickets.jsonl"
    source.write_text("".join(line + "\n" for line in job_lines))
    return source


@pytest.fixture(scope="module")
def assembled(runtime: Any, job_lines: list[str]) -> bytes:
    return _assemble(runtime, job_lines)


def _stack(aws: Aws) -> None:
    aws.response("cloudformation", "describe_stacks", {"Stacks": [{
        "StackName": "semif-dev", "StackStatus": "UPDATE_COMPLETE", "CreationTime": NOW,
        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()]}]}, {"StackName": "semif-dev"})
    variant = {"VariantName": "AllTraffic", "ModelName": MODEL, "InstanceType": "ml.m5.large",
               "InitialInstanceCount": 1}
    aws.response("sagemaker", "describe_endpoint_config", {
        "EndpointConfigName": "DecisionConfig-1", "CreationTime": NOW, "ProductionVariants": [variant],
        "EndpointConfigArn": "arn:aws:sagemaker:us-east-1:1:endpoint-config/d"},
        {"EndpointConfigName": "DecisionConfig-1"})


def _job(status: str, input_uri: str, **extra: Any) -> dict[str, Any]:
    return {"TransformJobName": JOB, "TransformJobArn": f"arn:aws:sagemaker:us-east-1:1:transform-job/{JOB}",
            "TransformJobStatus": status, "ModelName": MODEL, "CreationTime": NOW,
            "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": input_uri}}},
            "TransformOutput": {"S3OutputPath": f"s3://{BUCKET}/output/{JOB}/"},
            "TransformResources": {"InstanceType": "ml.m5.large", "InstanceCount": 2}, **extra}


def _expected_job(input_uri: str) -> dict[str, Any]:
    """The CreateTransformJob request: line split, multi-record batches, line assembly, JSON Lines both ways."""
    return {
        "TransformJobName": JOB, "ModelName": MODEL,
        "MaxConcurrentTransforms": 1, "MaxPayloadInMB": 1,  # the adapter's /execution-parameters
        "BatchStrategy": "MultiRecord",
        "ModelClientConfig": {"InvocationsTimeoutInSeconds": 3600, "InvocationsMaxRetries": 1},
        "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": input_uri}},
                           "ContentType": JSONL, "CompressionType": "None", "SplitType": "Line"},
        "TransformOutput": {"S3OutputPath": f"s3://{BUCKET}/output/{JOB}/", "Accept": JSONL, "AssembleWith": "Line"},
        "TransformResources": {"InstanceType": "ml.m5.large", "InstanceCount": 2},
    }


def _download(aws: Aws, key: str, body: bytes) -> None:
    """download_file: a HeadObject for the size, then a GetObject of the bytes."""
    aws.response("s3", "head_object", {"ContentLength": len(body), "ETag": '"e"'}, {"Bucket": BUCKET, "Key": key})
    aws.response("s3", "get_object", {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentLength": len(body),
                                      "ETag": '"e"'}, {"Bucket": BUCKET, "Key": key})


def _upload(aws: Aws) -> None:
    """upload_file of a small file: one PutObject next to the job (the bytes are kept by the `aws` fixture)."""
    aws.response("s3", "put_object", {"ETag": '"e"'}, {"Bucket": BUCKET, "Key": f"input/{JOB}/tickets.jsonl",
                                                       "Body": ANY, "ChecksumAlgorithm": ANY})


def _start(aws: Aws, input_uri: str = UPLOADED, *, upload: bool = True) -> None:
    """The stack read, the input uploaded (unless read in place), the job created, and one poll InProgress."""
    _stack(aws)
    if upload:
        _upload(aws)
    aws.response("sagemaker", "create_transform_job",
                 {"TransformJobArn": f"arn:aws:sagemaker:us-east-1:1:transform-job/{JOB}"}, _expected_job(input_uri))
    aws.response("sagemaker", "describe_transform_job", _job("InProgress", input_uri), {"TransformJobName": JOB})


def _finish(aws: Aws, outcome: dict[str, Any], output: bytes | None) -> None:
    """The poll that sees the job end, then (when it completed) the listing and download of its `.out`."""
    aws.response("sagemaker", "describe_transform_job", outcome, {"TransformJobName": JOB})
    if output is not None:
        key = f"output/{JOB}/tickets.jsonl.out"
        aws.response("s3", "list_objects_v2", {"Contents": [{"Key": key}], "KeyCount": 1},
                     {"Bucket": BUCKET, "Prefix": f"output/{JOB}/"})
        _download(aws, key, output)


def _cli(input_path: str, output: Path, *extra: str) -> Any:
    return parse(batch, [input_path, "-o", str(output), "--transform", "--env", "dev", "--instance-count", "2",
                         "--job-name", JOB, *extra])


def _expected_output(job_lines: list[str], assembled: bytes) -> list[bytes]:
    """The answers as the adapter wrote them; the refused line as an error carrying its input line and id."""
    answers = [line for line in assembled.split(b"\n") if line.strip()]
    expected = []
    for number, (request, answer) in enumerate(zip(job_lines, answers, strict=True), start=1):
        if b'"error"' not in answer:
            expected.append(answer)
            continue
        document = {"error": json.loads(answer)["error"], "line": number,
                    "decision_id": json.loads(request)["decision"]["id"]}
        expected.append(json.dumps(document, separators=(",", ":")).encode())
    return expected


def test_transform_job_runs_and_its_output_is_joined(aws: Aws, tmp_path: Path, tickets: Path, job_lines: list[str],
                                                      assembled: bytes) -> None:
    output = tmp_path / "answers.jsonl"
    _start(aws)
    _finish(aws, _job("Completed", UPLOADED), assembled)
    clock = FakeTime()
    summary = runner.answer(_cli(str(tickets), output), session=aws, poller=clock.poller(timeout_s=600, interval_s=60))
    for stub in aws.stubs.values():
        stub.assert_no_pending_responses()
    assert aws.uploads == [tickets.read_bytes()]
    assert clock.sleeps == [60]  # one poll while InProgress
    assert output.read_bytes().splitlines() == _expected_output(job_lines, assembled)
    assert assembled.count(b"\n\n") == 3  # 7 lines in 3 mini-batches: the join skipped an empty line after each
    assert summary.stopped is None and summary.answered == 6
    assert dict(summary.errors) == {"invalid_request": [5]}
    assert not summary.complete


def _assemble_lines(assembled: bytes, skip: int) -> bytes:
    """The output of a job that read all but the first `skip` lines (one mini-batch per line, no empty lines)."""
    return b"".join(line + b"\n" for line in [x for x in assembled.split(b"\n") if x.strip()][skip:])


def test_rerun_uploads_only_the_lines_not_answered(aws: Aws, tmp_path: Path, tickets: Path, job_lines: list[str],
                                                    assembled: bytes) -> None:
    output = tmp_path / "answers.jsonl"
    first = [line for line in assembled.split(b"\n") if line.strip()][:3]
    output.write_bytes(b"".join(line + b"\n" for line in first))
    _start(aws)
    _finish(aws, _job("Completed", UPLOADED), _assemble_lines(assembled, 3))
    summary = runner.answer(_cli(str(tickets), output), session=aws, poller=FakeTime().poller())
    assert aws.uploads == ["".join(line + "\n" for line in job_lines[3:]).encode()]
    lines = output.read_bytes().splitlines()
    assert lines[:3] == first  # never rewritten
    assert lines == _expected_output(job_lines, assembled)
    assert summary.answered_before == 3 and summary.answered == 3


def test_s3_input_is_read_in_place(aws: Aws, tmp_path: Path, tickets: Path, job_lines: list[str],
                                   assembled: bytes) -> None:
    input_uri = f"s3://{BUCKET}/exports/tickets.jsonl"
    _download(aws, "exports/tickets.jsonl", tickets.read_bytes())  # read first, for the ids to join by
    _start(aws, input_uri, upload=False)
    _finish(aws, _job("Completed", input_uri), assembled)
    output = tmp_path / "answers.jsonl"
    runner.answer(_cli(input_uri, output), session=aws, poller=FakeTime().poller())
    assert aws.uploads == []
    assert output.read_bytes().splitlines() == _expected_output(job_lines, assembled)


def test_failed_job_writes_nothing_and_says_why(aws: Aws, tmp_path: Path, tickets: Path,
                                                job_lines: list[str]) -> None:
    reason = "ClientError: See job logs for more information"
    _start(aws)
    _finish(aws, _job("Failed", UPLOADED, FailureReason=reason), None)
    output = tmp_path / "answers.jsonl"
    summary = runner.answer(_cli(str(tickets), output), session=aws, poller=FakeTime().poller())
    assert summary.stopped == (f"FAILED: transform job {JOB} is Failed: {reason} (nothing was written; SageMaker "
                               "keeps no partial output)")
    assert output.read_bytes() == b""
    assert summary.not_sent == len(job_lines)


def test_attach_collects_a_job_an_interrupted_run_started(aws: Aws, tmp_path: Path, tickets: Path,
                                                          job_lines: list[str], assembled: bytes) -> None:
    """The job's own input object says which lines it read; nothing is started or uploaded."""
    aws.response("sagemaker", "describe_transform_job", _job("InProgress", UPLOADED), {"TransformJobName": JOB})
    _download(aws, f"input/{JOB}/tickets.jsonl", tickets.read_bytes())
    _finish(aws, _job("Completed", UPLOADED), assembled)
    output = tmp_path / "answers.jsonl"
    args = parse(batch, [str(tickets), "-o", str(output), "--transform", "--attach", JOB])
    runner.answer(args, session=aws, poller=FakeTime().poller())
    for stub in aws.stubs.values():
        stub.assert_no_pending_responses()
    assert output.read_bytes().splitlines() == _expected_output(job_lines, assembled)


def test_an_interrupted_wait_says_how_to_collect_the_job(aws: Aws, tmp_path: Path, tickets: Path) -> None:
    _start(aws)

    def ctrl_c(_seconds: float) -> None:
        raise KeyboardInterrupt

    poller = Poller(timeout_s=600, interval_s=60, sleep=ctrl_c, clock=lambda: 0.0, progress=lambda _: None)
    summary = runner.answer(_cli(str(tickets), tmp_path / "answers.jsonl"), session=aws, poller=poller)
    assert summary.stopped == (f"FAILED: interrupted while transform job {JOB} runs; it keeps running: collect it "
                               f"later with --attach {JOB}, or stop it with `aws sagemaker stop-transform-job "
                               f"--transform-job-name {JOB}`")


@pytest.fixture(scope="module")
def systemone_job_lines() -> list[str]:
    """System One requests (line 5 repeats line 1's), one refused on its line, and a SemIf decision among them."""
    requests = systemone_lines(3, seed=1410)
    bad = json.loads(requests[1])
    bad["questions"]["action"]["criteria"] = {"refund": None}  # one option: a choice needs two (422)
    return [requests[0], json.dumps(bad, ensure_ascii=False), sample_lines(1, 1, seed=1410)[0], requests[2],
            requests[0]]


@pytest.fixture(scope="module")
def systemone_assembled(runtime: Any, systemone_job_lines: list[str]) -> bytes:
    return _assemble(runtime, systemone_job_lines)


def _placed(job_lines: list[str], assembled: bytes) -> list[Any]:
    """What OUTPUT says of each line: the adapter's answer or error; a System One one also which line it answers."""
    expected = []
    for number, (request, answer) in enumerate(zip(job_lines, answer_lines(assembled), strict=True), start=1):
        document = json.loads(answer)
        if "questions" in json.loads(request):
            place = "line" if "detail" in document else "x_line"
            document = {**document, place: number, "x_request_sha256": hashlib.sha256(request.encode()).hexdigest()}
        expected.append(document)
    return expected


def run_job(aws: Aws, tmp_path: Path, lines: list[str], assembled: bytes, output: Path) -> Any:
    """A job on `lines` (written to tickets.jsonl, uploaded whole) whose output is `assembled`, joined into `output`;
    its summary."""
    source = tmp_path / "tickets.jsonl"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    _start(aws)
    _finish(aws, _job("Completed", UPLOADED), assembled)
    summary = runner.answer(_cli(str(source), output), session=aws, poller=FakeTime().poller())
    for stub in aws.stubs.values():
        stub.assert_no_pending_responses()
    assert aws.uploads == [source.read_bytes()]
    return summary


def test_transform_job_answers_system_one_lines(aws: Aws, tmp_path: Path, systemone_job_lines: list[str],
                                                systemone_assembled: bytes) -> None:
    output = tmp_path / "answers.jsonl"
    summary = run_job(aws, tmp_path, systemone_job_lines, systemone_assembled, output)
    written = output.read_bytes().splitlines()
    assert [json.loads(line) for line in written] == _placed(systemone_job_lines, systemone_assembled)
    assert written[0].startswith(answer_lines(systemone_assembled)[0][:-1])  # the adapter's bytes, then the place
    assert summary.answered == 4 and summary.decisions == 3 + 1 + 3 + 3
    assert dict(summary.errors) == {"too_short": [2]}


def test_attach_finds_system_one_lines_by_their_bytes(aws: Aws, tmp_path: Path, systemone_job_lines: list[str],
                                                      systemone_assembled: bytes) -> None:
    """Line 1 was answered before the job started: the job read lines 2-5, and its copy of line 1's request is
    line 5, the one OUTPUT lacks."""
    source = tmp_path / "tickets.jsonl"
    source.write_text("".join(line + "\n" for line in systemone_job_lines), encoding="utf-8")
    first = answer_lines(systemone_assembled)[0]
    sha = hashlib.sha256(systemone_job_lines[0].encode()).hexdigest()
    output = tmp_path / "answers.jsonl"
    output.write_bytes(first[:-1] + f',"x_line":1,"x_request_sha256":"{sha}"}}\n'.encode())
    staged = "".join(line + "\n" for line in systemone_job_lines[1:]).encode()
    aws.response("sagemaker", "describe_transform_job", _job("InProgress", UPLOADED), {"TransformJobName": JOB})
    _download(aws, f"input/{JOB}/tickets.jsonl", staged)
    _finish(aws, _job("Completed", UPLOADED), _assemble_lines(systemone_assembled, 1))
    args = parse(batch, [str(source), "-o", str(output), "--transform", "--attach", JOB])
    summary = runner.answer(args, session=aws, poller=FakeTime().poller())
    assert [json.loads(line) for line in output.read_bytes().splitlines()] == _placed(systemone_job_lines,
                                                                                    systemone_assembled)
    assert (summary.answered_before, summary.answered, summary.complete) == (1, 3, False)  # line 2 was refused
