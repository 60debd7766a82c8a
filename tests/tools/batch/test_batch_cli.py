"""`python -m scripts.batch` end to end: the real gateway and adapter on the embedded model, as a user runs it.

What the adapter was asked is read from its own access log (each JSON Lines request logs its `lines`), so
"nothing is asked twice" is checked on the server's side, not the tool's word for it.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scripts import batch
from scripts.batch.sample import sample_lines
from scripts.common.command import parse
from scripts.local.processes import wait_until
from tools.batch.test_batch_parts import systemone_lines

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
JSONL = "application/jsonlines"
TIMING = re.compile(rb'"timing":\{[^{}]*\}')
X_TIMING = re.compile(rb'"x_timing":\{[^{}]*\}')  # a System One answer's, and each of its answers'
PLACE = re.compile(rb',"x_line":\d+,"x_request_sha256":"[0-9a-f]{64}"\}$')  # where a System One answer belongs


def run_batch(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scripts.batch", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def ids(path: Path) -> list[str]:
    return [json.loads(line)["decision_id"] for line in path.read_bytes().splitlines()]


def input_ids(lines: list[str]) -> list[str]:
    return [json.loads(line)["decision"]["id"] for line in lines]


class AdapterLog:
    """The decision container's access log: how many request lines it was asked since a mark."""

    def __init__(self, gateway: Any) -> None:
        self.path = gateway.log_dir / "local-decision.log"
        self.mark = self.path.stat().st_size

    def asked(self) -> int:
        total = 0
        for raw in self.path.read_bytes()[self.mark:].splitlines():
            entry = json.loads(raw)
            if entry.get("event") == "request" and entry.get("path") == "/invocations":
                total += entry.get("lines", 1)
        return total

    def expect(self, count: int) -> None:
        """Exactly `count` lines asked (the log line follows the answer by a moment, hence the wait)."""
        wait_until(lambda: self.asked() >= count, timeout_s=10, what=f"{count} lines in the adapter's log")
        assert self.asked() == count
        self.mark = self.path.stat().st_size


@pytest.fixture
def local(local_endpoints: Any) -> tuple[str, ...]:
    return ("--local", "--port", str(local_endpoints.port))


def test_a_file_is_answered_in_order_with_errors_on_their_lines(local_endpoints: Any, local: tuple[str, ...],
                                                                 tmp_path: Path) -> None:
    lines = sample_lines(9, 3, seed=1403)
    bad = json.loads(lines[4])
    bad["decision"]["question"] = ""
    lines[4] = json.dumps(bad)
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    log = AdapterLog(local_endpoints)
    result = run_batch(source, "-o", output, *local, "--max-decisions", "4")
    assert result.returncode == 1, result.stderr  # one line failed
    log.expect(9)
    assert ids(output) == input_ids(lines)
    error = json.loads(output.read_bytes().splitlines()[4])
    assert error["line"] == 5 and error["decision_id"] == input_ids(lines)[4]
    assert error["error"]["code"] == "invalid_request" and error["error"]["field"] == "decision.question"
    assert "decisions/s" in result.stderr  # the progress bar
    assert result.stdout.splitlines() == [
        result.stdout.splitlines()[0],
        "batch: errors by code (final, in OUTPUT): invalid_request 1 (line 5)"]
    assert re.fullmatch(r"batch: 9 lines: 8 answered \(0 before this run, 8 now in [\d.]+ s: [\d.]+ decisions/s\), "
                        r"1 failed", result.stdout.splitlines()[0])

    before = output.read_bytes()
    again = run_batch(source, "-o", output, *local)
    assert again.returncode == 1  # the refused line stays refused: it is final, not asked again
    log.expect(0)
    assert output.read_bytes() == before


def test_rerun_after_a_stopped_run_asks_only_the_rest(local_endpoints: Any, local: tuple[str, ...],
                                                      tmp_path: Path) -> None:
    lines = sample_lines(12, 4, seed=1404)
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    log = AdapterLog(local_endpoints)
    first = run_batch(source, "-o", output, *local, "--limit", "5", "--max-decisions", "3")
    assert first.returncode == 1, first.stderr
    assert "7 not sent" in first.stdout
    log.expect(5)
    written = output.read_bytes()
    second = run_batch(source, "-o", output, *local, "--max-decisions", "3")
    assert second.returncode == 0, second.stderr
    log.expect(7)
    assert output.read_bytes().startswith(written)  # appended, never rewritten
    assert ids(output) == input_ids(lines)
    third = run_batch(source, "-o", output, *local)
    assert third.returncode == 0
    log.expect(0)
    assert third.stdout.startswith("batch: 12 lines: 12 answered (12 before this run, 0 now")


def test_interrupted_run_resumes_complete_and_in_order(local: tuple[str, ...], tmp_path: Path) -> None:
    lines = sample_lines(12, 2, seed=1405)
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "scripts.batch", str(source), "-o", str(output), *local, "--max-decisions", "1",
               "--no-progress"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: output.exists() and output.read_bytes().count(b"\n") >= 3, timeout_s=120,
               what="three answers", alive=lambda: process.poll() is None)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "batch: interrupted; the lines answered so far are in" in stderr
    assert "not sent" in stdout
    done = ids(output)
    assert 3 <= len(done) < len(lines)
    assert done == input_ids(lines)[:len(done)]
    resumed = run_batch(source, "-o", output, *local)
    assert resumed.returncode == 0, resumed.stderr
    assert ids(output) == input_ids(lines)
    assert f"({len(done)} before this run, {len(lines) - len(done)} now" in resumed.stdout


def _batched_and_single(gateway: Any, runtime_for: Callable[..., Any], tmp_path: Path,
                        lines: list[str], max_decisions: int) -> tuple[list[bytes], list[bytes]]:
    """The lines' answers from one batch run and then one request each (last line first), on a gateway whose
    adapter keeps no result cache, so that each answer is computed afresh."""
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    result = run_batch(source, "-o", output, "--local", "--port", str(gateway.port), "--max-decisions",
                       str(max_decisions))
    assert result.returncode == 0, result.stderr
    runtime = runtime_for(gateway.url)
    singles = [runtime.invoke_endpoint(EndpointName="local-decision", ContentType="application/json",
                                       Body=line.encode())["Body"].read() for line in reversed(lines)][::-1]
    return output.read_bytes().splitlines(), singles


def test_json_lines_answers_equal_single_answers(uncached_gateway: Any, runtime_for: Callable[..., Any],
                                                 tmp_path: Path) -> None:
    """Byte for byte apart from timing, each computed afresh: this gateway's adapter keeps no result cache."""
    batched, singles = _batched_and_single(uncached_gateway, runtime_for, tmp_path, sample_lines(8, 4, seed=1406), 8)
    assert all(TIMING.search(answer) for answer in [*batched, *singles])
    assert [TIMING.sub(b"", answer) for answer in batched] == [TIMING.sub(b"", answer) for answer in singles]


def test_a_system_one_file_mixed_with_semif_lines_is_answered_in_order(local_endpoints: Any, local: tuple[str, ...],
                                                                         tmp_path: Path) -> None:
    requests = systemone_lines(3, seed=1408)
    bad = json.loads(requests[1])
    bad["questions"]["colère"]["criteria"] = {"0": "calm", "1": "angry"}  # score levels as a map: refused (422)
    lines = [requests[0], json.dumps(bad, ensure_ascii=False), sample_lines(1, 1, seed=1408)[0], requests[2]]
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    log = AdapterLog(local_endpoints)
    first = run_batch(source, "-o", output, *local, "--limit", "2", "--max-decisions", "4")
    assert first.returncode == 1, first.stderr
    log.expect(2)  # 3 decisions each: one request per line
    assert re.fullmatch(r"batch: 4 lines: 1 answered \(0 before this run, 1 now in [\d.]+ s: 3 decisions, [\d.]+ "
                        r"decisions/s\), 1 failed, 2 not sent", first.stdout.splitlines()[0])
    second = run_batch(source, "-o", output, *local, "--max-decisions", "4")
    assert second.returncode == 1, second.stderr  # the refused line stays refused
    log.expect(2)
    assert re.fullmatch(r"batch: 4 lines: 3 answered \(1 before this run, 2 now in [\d.]+ s: 4 decisions, [\d.]+ "
                        r"decisions/s\), 1 failed", second.stdout.splitlines()[0])
    assert second.stdout.splitlines()[1] == "batch: errors by code (final, in OUTPUT): list_type 1 (line 2)"
    written = [json.loads(line) for line in output.read_bytes().splitlines()]
    digests = [hashlib.sha256(line.encode()).hexdigest() for line in lines]
    for number in (1, 4):
        answer = written[number - 1]
        assert (answer["x_line"], answer["x_request_sha256"]) == (number, digests[number - 1])
        assert {qid: a["type"] for qid, a in answer["answers"].items()} == {"action": "choice", "refund": "noul",
                                                                             "colère": "score"}
    assert written[1]["line"] == 2 and written[1]["x_request_sha256"] == digests[1]
    assert written[1]["detail"][0]["loc"][:3] == ["body", "questions", "colère"]
    assert written[2]["decision_id"] == input_ids(lines[2:3])[0] and "probabilities" in written[2]
    before = output.read_bytes()
    assert run_batch(source, "-o", output, *local).returncode == 1
    log.expect(0)
    assert output.read_bytes() == before


def test_system_one_answers_in_a_file_equal_single_answers(uncached_gateway: Any,
                                                           runtime_for: Callable[..., Any], tmp_path: Path) -> None:
    """Byte for byte apart from timing and the line's place, each computed afresh (no result cache)."""
    batched, singles = _batched_and_single(uncached_gateway, runtime_for, tmp_path, systemone_lines(2, seed=1409), 6)
    assert all(PLACE.search(answer) for answer in batched)
    assert all(len(X_TIMING.findall(answer)) == 4 for answer in [*batched, *singles])  # the request's, 3 answers'
    assert [X_TIMING.sub(b"", PLACE.sub(b"}", answer)) for answer in batched] == [X_TIMING.sub(b"", a) for a in singles]


def _decision_port(gateway: Any) -> int:
    """The decision container's own port, from its start-up log line."""
    for raw in (gateway.log_dir / "local-decision.log").read_bytes().splitlines():
        entry = json.loads(raw)
        if entry.get("event") == "starting":
            return int(entry["port"])
    raise AssertionError("no start-up line in the decision container's log")


def test_endpoint_url_posts_to_the_container(local_endpoints: Any, tmp_path: Path) -> None:
    lines = sample_lines(4, 4, seed=1403)
    source = write_lines(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    result = run_batch(source, "-o", output, "--endpoint-url", f"http://127.0.0.1:{_decision_port(local_endpoints)}",
                       "--concurrency", "2", "--max-decisions", "1")
    assert result.returncode == 0, result.stderr
    assert ids(output) == input_ids(lines)
    wrong = run_batch(source, "-o", tmp_path / "other.jsonl", "--endpoint-url", local_endpoints.url)
    assert wrong.returncode == 1
    assert "is this a decision container?" in wrong.stderr
    assert (tmp_path / "other.jsonl").read_bytes() == b""


def test_unknown_endpoint_stops_at_once(local_endpoints: Any, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", sample_lines(40, 4, seed=1407))
    result = run_batch(source, "-o", tmp_path / "out.jsonl", "--local", "--port", str(local_endpoints.port),
                       "--prefix", "nope", "--max-decisions", "1")
    assert result.returncode == 1
    assert "FAILED: nope-decision: ValidationError: Endpoint nope-decision of account" in result.stderr
    assert "40 not sent" in result.stdout


@pytest.fixture
def scripted(threaded_server: Callable[[Any], Any]) -> Iterator[Callable[[Callable[[bytes], Response]], str]]:
    """A stand-in container whose /invocations answers as the test says (for failures the real one never has)."""
    servers: list[Any] = []

    def serve(answer: Callable[[bytes], Response]) -> str:
        async def invocations(request: Request) -> Response:
            return answer(await request.body())

        server = threaded_server(Starlette(routes=[Route("/invocations", invocations, methods=["POST"])]))
        servers.append(server)
        return server.__enter__()

    yield serve
    for server in servers:
        server.__exit__(None, None, None)


def test_busy_container_lines_are_left_to_retry_and_the_run_stops(scripted: Callable[..., str],
                                                                   tmp_path: Path) -> None:
    def busy(_body: bytes) -> Response:
        return JSONResponse({"error": {"code": "queue_full", "message": "busy"}}, status_code=503,
                            headers={"Retry-After": "0"})

    source = write_lines(tmp_path / "in.jsonl", sample_lines(8, 4, seed=1))
    output = tmp_path / "out.jsonl"
    result = run_batch(source, "-o", output, "--endpoint-url", scripted(busy), "--max-decisions", "1",
                       "--attempts", "2")
    assert result.returncode == 1
    assert "5 requests in a row failed, the last with queue_full; stopping" in result.stderr
    assert "to retry (not in OUTPUT; run the same command again): queue_full 5 (lines 1, 2, 3, 4, 5)" in result.stdout
    assert output.read_bytes() == b""  # nothing final: a rerun asks every line


def test_an_answer_of_the_wrong_shape_is_not_written(scripted: Callable[..., str], tmp_path: Path) -> None:
    def one_line_short(body: bytes) -> Response:
        answers = [json.dumps({"decision_id": json.loads(line)["decision"]["id"]}) for line in body.splitlines()]
        return Response("\n".join(answers[:-1]) + "\n", media_type=JSONL)

    source = write_lines(tmp_path / "in.jsonl", sample_lines(3, 4, seed=1))
    result = run_batch(source, "-o", tmp_path / "out.jsonl", "--endpoint-url", scripted(one_line_short))
    assert result.returncode == 1
    assert "bad_response 3 (lines 1, 2, 3)" in result.stdout
    assert (tmp_path / "out.jsonl").read_bytes() == b""


@pytest.mark.parametrize(("args", "message"), [
    (["--endpoint", "x", "--port", "1"], "--port does not apply to this target"),
    (["--local", "--instance-count", "2"], "--instance-count does not apply to this target"),
    (["--transform"], "--transform needs --env"),
    (["--transform", "--env", "dev", "--concurrency", "2"], "--concurrency does not apply"),
    (["--transform", "--attach", "j", "--job-name", "k"], "--attach names the job; drop --job-name"),
    (["--local", "--concurrency", "0"], "must be at least 1"),
    ([], "one of the arguments --local --endpoint-url --endpoint --transform is required"),
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse(batch, ["in.jsonl", "-o", "out.jsonl", *args])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_s3_input_needs_a_transform(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(batch, ["s3://bucket/in.jsonl", "-o", "out.jsonl", "--local"])
    assert "add --transform" in capsys.readouterr().err


def test_refused_files_exit_2_and_send_nothing(tmp_path: Path) -> None:
    lines = sample_lines(4, 4, seed=1)
    source = write_lines(tmp_path / "in.jsonl", [lines[0], lines[1], "", lines[0], "{not json", lines[1]])
    result = run_batch(source, "-o", tmp_path / "out.jsonl", "--endpoint-url", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"batch: refused: {source}: line 5: not JSON (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)); decision id 't00001-action' is on lines 1, 4 (ids must be unique); decision id "
        "'t00001-urgency' is on lines 2, 6 (ids must be unique)")
    other = write_lines(tmp_path / "other.jsonl", lines[2:])
    output = write_lines(tmp_path / "out.jsonl", [json.dumps({"decision_id": "t00001-action"})])
    result = run_batch(other, "-o", output, "--endpoint-url", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert "line 1 answers decision 't00001-action', which the input does not hold" in result.stderr
