"""A decision-typed GGUF served by llama.cpp's own decision engine, behind every door of the adapter.

The models are the tiny random-weight model with the embedded model's tokenizer and decision metadata added
(scripts/dev/decision_models.py, `tiny=True`: its answers mean nothing; these tests are of plumbing). The answers are
compared with those of llama-server b11434 called directly on the same file: a fresh llama-server started with the
adapter's own command line (from its log) and asked the same request as its first.
Every type through every door: test_native_types.py.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.adapter_process import START_TIMEOUT, AdapterProcess
from support.admission import send, wait_admitted
from support.jevcompat_run import KEY, jevcompat
from support.native_answers import same_answer
from support.systemone import many_options

from bench.native.run import fresh_answer, native_arguments
from bench.reliability.rawhttp import read_response
from scripts.dev.decision_models import decision_model, write_decision_model
from scripts.local.processes import wait_until
from semif_adapter.core.native_service import CALL_TIMEOUT_SECONDS
from semif_adapter.doors.api_keys import HASH_PREFIX, digest
from semif_adapter.engine.embedded_model import embedded_model_path

pytestmark = pytest.mark.slow
STATE = "I was charged twice for my order last week and nobody has replied."
QUESTIONS: dict[str, Any] = {
    "route": {"type": "choice", "instructions": "Which team should handle this?",
              "criteria": {"billing": "payments and refunds", "shipping": None, "technical": None}},
    "urgency": {"type": "score", "instructions": "How urgent is this?",
                "criteria": ["can wait", "this week", "today", "right now"]},
    "angry": {"type": "noul", "instructions": "Is the customer angry?",
              "criteria": {"true": "the customer is angry", "false": "the customer is calm"}},
}


def native_log(adapter: AdapterProcess) -> dict[str, Any]:
    return native_arguments(adapter.logs())


@pytest.fixture(scope="module")
def openjev() -> Path:
    return decision_model("openjev", tiny=True)


@pytest.fixture
def head(request: pytest.FixtureRequest, openjev: Path) -> Path:
    """The decision model of the test: OpenJev's unless a test asks for another type, on the tiny model unless it
    asks `(type, "embedded")` for the embedded model's copy (a request slow enough to be caught in flight)."""
    if not hasattr(request, "param"):
        return openjev
    name, base = request.param if isinstance(request.param, tuple) else (request.param, "tiny")
    return decision_model(name, tiny=base == "tiny")


@pytest.fixture
def pair(head: Path) -> Iterator[tuple[AdapterProcess, list[str], httpx.Client]]:
    """A fresh adapter on the decision model, its native server's command line (a fresh llama-server started with it
    is the reference of every answer: `fresh_answer`), and a client."""
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(head), "SEMIF_RESULT_CACHE_ENTRIES": "0"})
    try:
        adapter.wait_ready()
        with httpx.Client(base_url=adapter.url, timeout=120) as client:
            yield adapter, native_log(adapter)["arguments"], client
    finally:
        adapter.stop()



def test_the_adapter_takes_the_native_path_and_says_so(pair, openjev):
    adapter, arguments, client = pair
    assert arguments[arguments.index("--host") + 1] == "127.0.0.1"  # loopback only
    assert '"decision engine: native"' in adapter.logs() and '"decision_type": "openjev"' in adapter.logs()
    assert client.get("/ping").status_code == 200
    models = client.get("/v1/models").json()
    assert models["models"][0]["name"] == openjev.stem
    assert models["models"][0]["x_decision"]["type"] == "openjev"
    assert models["models"][0]["x_decision"]["semantics"] == ["answers each question on its own"]


@pytest.mark.parametrize("head", ["nimble"], indirect=True)
def test_each_request_is_counted_under_the_native_scoring_in_the_metrics(pair):
    adapter, _, client = pair
    for route in ("/v1/systemone", "/invocations"):
        assert client.post(route, json={"state": STATE, "questions": QUESTIONS}).status_code == 200

    def emf_records() -> list[dict]:  # one EMF line per request; a line names "Decisions" twice (definition and value)
        return [json.loads(line) for line in adapter.logs().splitlines() if '"Decisions"' in line]

    wait_until(lambda: len(emf_records()) >= 2, timeout_s=10, what="the EMF records")
    records = emf_records()
    assert [record["Scoring"] for record in records] == ["native:nimble", "native:nimble"]  # the metrics' dimension
    assert [record["Decisions"] for record in records] == [[1, 1, 1], [1, 1, 1]]


def test_an_option_limit_of_the_head_is_a_clear_error_in_each_doors_shape(pair):
    client = pair[2]
    over = {"state": STATE, "questions": {"queue": {"type": "choice", "instructions": "Which queue?",
                                                    "criteria": many_options(53)}}}
    refused = client.post("/v1/systemone", json=over)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"][0]
    assert detail["type"] == "too_many_options" and "more than the 52" in detail["msg"]
    assert detail["loc"][:4] == ["body", "questions", "queue", "criteria"]
    openai = client.post("/v1/decisions", json={"model": "jev-latest", "input": STATE, "questions": [
        {"type": "choice", "instructions": "Which queue?", "choices": [{"value": f"queue {i}"} for i in range(53)]}]})
    assert openai.status_code == 400, openai.text
    error = openai.json()["error"]
    assert error["code"] == "too_many_options" and "more than the 52" in error["message"]
    assert error["param"] == "questions[0].choices[52]"
    assert client.post("/v1/systemone", json={"state": STATE, "questions": QUESTIONS}).status_code == 200


# the watchdog on a head that reads the embeddings, on the embedded model: the tiny one answers within the 0.5 s
@pytest.mark.parametrize("head", [("kev", "embedded")], indirect=True)
def test_a_native_server_killed_mid_request_is_a_503_then_it_is_restarted(pair):
    adapter, _, client = pair
    slow = {"state": STATE, "questions": {name: {"type": "choice", "instructions": "Which queue?",
                                                 "criteria": many_options(20)} for name in ("a", "b", "c", "d")}}
    with ThreadPoolExecutor(max_workers=1) as pool:
        in_flight = pool.submit(client.post, "/v1/systemone", json=slow)
        time.sleep(0.5)
        os.kill(native_log(adapter)["pid"], signal.SIGKILL)
        answered = in_flight.result()
    assert answered.status_code == 503, answered.text
    assert answered.json()["detail"]["error_type"] == "service_unavailable"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and adapter.logs().count('"native decision server ready"') < 2:
        time.sleep(0.2)
    assert '"native decision server exited with -9; restarting"' in adapter.logs()
    while time.monotonic() < deadline and client.get("/ping").status_code != 200:
        time.sleep(0.1)
    again = client.post("/v1/systemone", json={"state": STATE, "questions": QUESTIONS})
    assert again.status_code == 200, again.text


@pytest.mark.one_thread  # one decode thread, and mostly a wait: it runs beside the model tests (tests/conftest.py)
def test_a_hung_native_server_is_a_503_then_it_is_killed_and_restarted():
    """On clef, a joint head: llama-server stopped (SIGSTOP: its socket stays open, nothing answers): the request in
    flight gets the door's 503 once the watchdog has missed HEALTH_FAILURES_TO_RESTART answers to /health (about
    20 s, never the 60 s call timeout), the hung process is killed and reaped, not left behind, and a new one
    serves."""
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(decision_model("clef", tiny=True)),
                              "SM_LLAMA_CPP_THREADS": "1"})
    try:
        adapter.wait_ready()
        hung = native_log(adapter)["pid"]
        os.kill(hung, signal.SIGSTOP)
        with httpx.Client(base_url=adapter.url, timeout=CALL_TIMEOUT_SECONDS + 30) as client:
            answered = client.post("/v1/systemone", json={"state": STATE, "questions": QUESTIONS})
            assert answered.status_code == 503, answered.text
            assert answered.json()["detail"]["error_type"] == "service_unavailable"
            assert '"native decision server stopped answering /health; restarting"' in adapter.logs()

            def serves() -> bool:
                return client.get("/ping").status_code == 200 and client.post(
                    "/v1/systemone", json={"state": STATE, "questions": QUESTIONS}).status_code == 200

            wait_until(serves, timeout_s=START_TIMEOUT, what="a new native server answering")
        assert adapter.logs().count('"native decision server ready"') == 2
        with pytest.raises(ProcessLookupError):
            os.kill(hung, 0)  # SIGKILLed and reaped before the new one was started (a zombie would still be found)
    finally:
        adapter.stop()


def test_a_slow_native_start_keeps_ping_at_503_until_it_answers(openjev, tmp_path):
    slow = tmp_path / "slow-llama-server"
    # the llama-server the adapter itself finds: AdapterProcess puts this venv's bin first on its PATH
    real = Path(sys.executable).parent / "llama-server"
    slow.write_text(f"#!/bin/sh\nsleep 4\nexec {real} \"$@\"\n")
    slow.chmod(0o755)
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(openjev), "SEMIF_LLAMA_SERVER": str(slow)})
    try:
        with httpx.Client(base_url=adapter.url, timeout=30) as client:
            seen = set()
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                try:
                    status = client.get("/ping").status_code
                except httpx.TransportError:
                    time.sleep(0.1)
                    continue
                seen.add(status)
                if status == 200:
                    break
                busy = client.post("/v1/systemone", json={"state": STATE, "questions": QUESTIONS})
                assert busy.status_code == 503 and busy.json()["detail"]["error_type"] == "service_unavailable"
                time.sleep(0.2)
            assert seen == {503, 200}
    finally:
        adapter.stop()


def test_a_native_server_answering_500_is_a_503_in_each_doors_shape_and_the_endpoint_serves_on(openjev, tmp_path):
    """The peer's failure, injected: a stand-in llama-server whose /v1/systemone answers 500 (llama-server's answer
    when a head returns NaN) after a healthy warm-up."""
    stand_in = tmp_path / "failing-llama-server"
    stand_in.write_text(FAILING_SERVER.format(python=sys.executable))
    stand_in.chmod(0o755)
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(openjev), "SEMIF_LLAMA_SERVER": str(stand_in)})
    try:
        adapter.wait_ready()
        with httpx.Client(base_url=adapter.url, timeout=30) as client:
            for _ in range(2):
                systemone = client.post("/v1/systemone", json={"state": STATE, "questions": QUESTIONS})
                assert systemone.status_code == 503, systemone.text
                assert systemone.json()["detail"]["error_type"] == "service_unavailable"
                assert systemone.headers["retry-after"] == "5"
                semif = client.post("/invocations", json={"decision": {
                    "id": "x", "state": STATE, "question": "Which team?",
                    "options": [{"id": "a", "description": "billing"}, {"id": "b", "description": "shipping"}]}})
                assert semif.status_code == 503 and semif.json()["error"]["code"] == "engine_unavailable"
                openai = client.post("/v1/decisions", json={"model": "jev-latest", "input": STATE, "questions": [
                    {"type": "predicate", "instructions": "Is the customer angry?"}]})
                assert openai.status_code == 503 and openai.json()["error"]["code"] == "engine_unavailable"
            assert client.get("/ping").status_code == 200
    finally:
        adapter.stop()


FAILING_SERVER = """#!{python}
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[sys.argv.index("--port") + 1])
asked = []

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, document):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(200, {{"status": "ok"}})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        asked.append(1)
        if len(asked) == 1:  # the adapter's warm-up
            self.answer(200, {{"answers": {{"ready": {{"type": "noul", "noul": 0.5}}}},
                              "usage": {{"input_tokens": 1}}}})
        else:
            self.answer(500, {{"error": {{"code": 500, "message": "the model could not evaluate the decision",
                                          "type": "server_error"}}}})

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def test_nothing_is_left_running_after_sigterm(openjev):
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(openjev)})
    try:
        adapter.wait_ready()
        pid = native_log(adapter)["pid"]
        adapter.proc.send_signal(signal.SIGTERM)
        assert adapter.wait_exit() == 0
        with pytest.raises(ProcessLookupError):
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.05)
    finally:
        adapter.stop()


@pytest.mark.without_model  # refused before llama-server starts
@pytest.mark.parametrize(("declared", "message"), [
    ("foo", "llama.decision.type = 'foo' is not a decision type llama.cpp b11434 serves (supported: openjev, lev, "
            "kev, nimble, laya, clef)"),
])
def test_a_type_not_served_is_refused_at_start_naming_it(declared, message, tmp_path):
    """A type llama.cpp does not know would fail llama-server's model load: refused before llama-server starts."""
    model = write_decision_model(embedded_model_path(), tmp_path / f"{declared}.gguf", declared)
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(model)})
    try:
        assert adapter.wait_exit(START_TIMEOUT) == 1
        assert message in adapter.logs(), adapter.logs()
        assert "native decision server" not in adapter.logs()
    finally:
        adapter.stop()


def test_jevcompat_passes_on_the_native_path_but_for_the_heads_own_option_limit(openjev, tmp_path):
    """The public conformance suite, unmodified, with a key: every MUST and SHOULD passes but `choice.options`
    (2 to 255 options), which OpenJev's 52 letters cannot meet: its 64-option case gets our 422 naming the limit."""
    keys = tmp_path / "keys.txt"
    keys.write_text(f"native {HASH_PREFIX}{digest(KEY).hex()}\n")
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(openjev), "SEMIF_API_KEYS_FILE": str(keys)})
    try:
        adapter.wait_ready()
        report = jevcompat(adapter.url, tmp_path / "native.json", "--key", KEY)
    finally:
        adapter.stop()
    results = {result["id"]: result for result in report["results"]}
    not_passed = {rid: r["status"] for rid, r in results.items() if r["status"] != "pass"}
    assert not_passed == {"choice.options": "fail", "auth.ignored-when-off": "skip"}  # the latter: runs without a key
    findings = results["choice.options"]["findings"]
    assert [f["case"] for f in findings] == ["choice-options:64"]
    assert "got 422" in findings[0]["message"] and "more than the 52 a 'openjev' decision model" in \
        findings[0]["message"]


def test_json_lines_are_answered_line_by_line_as_llama_server_answers_each(pair):
    """JSON Lines (what `semif batch` and Batch Transform send): one native request per line, in order, each
    answered as a fresh llama-server answers it."""
    _, arguments, client = pair
    lines = [{"state": f"{STATE} ({n})", "questions": QUESTIONS} for n in range(2)]
    body = "\n".join(json.dumps({"model": "jev-latest", **line}) for line in lines) + "\n"
    answered = client.post("/invocations", content=body, headers={"content-type": "application/jsonlines"})
    assert answered.status_code == 200, answered.text
    ours = [json.loads(line) for line in answered.text.splitlines()]
    for mine, line in zip(ours, lines, strict=True):
        reference = fresh_answer(arguments, line).json()
        for name in QUESTIONS:
            same_answer(mine["answers"][name], reference["answers"][name])


def test_the_queue_bound_holds_on_the_native_path():
    """SEMIF_QUEUE_SIZE counts questions as on our own engine: past it, 529 on /v1/systemone, 503 on /invocations.
    The probes go out once the slow request is surely admitted (`wait_admitted`), and it holds its two places for
    seconds (two 52-option questions on the embedded model's copy: the tiny one answers them in milliseconds)."""
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(decision_model("openjev")), "SEMIF_QUEUE_SIZE": "2"})
    queue = {"type": "choice", "instructions": "Which queue?", "criteria": many_options(52)}
    try:
        adapter.wait_ready()
        slow = send(adapter.url, json.dumps({"state": STATE, "questions": {"queue": queue, "again": queue}}).encode(),
                    "/v1/systemone")
        wait_admitted(adapter.url)
        with httpx.Client(base_url=adapter.url, timeout=60) as client:
            refused = {route: client.post(route, json={"state": STATE, "questions": QUESTIONS})
                       for route in ("/v1/systemone", "/invocations")}
        assert refused["/v1/systemone"].status_code == 529, refused["/v1/systemone"].text
        assert refused["/v1/systemone"].json()["detail"]["error_type"] == "overloaded_error"
        assert refused["/invocations"].status_code == 503, refused["/invocations"].text  # SageMaker's own busy
        assert all(answer.headers["retry-after"] for answer in refused.values())
        admitted = read_response(slow, START_TIMEOUT)
        assert admitted is not None and admitted.status == 200
    finally:
        adapter.stop()


def test_llama_servers_own_refusal_is_the_callers_error_in_each_doors_shape(openjev):
    """A prompt longer than the native server's context: its 400 (exceed_context_size_error) becomes System One's 413
    context_length_exceeded and OpenAI's 400, with the counts; the endpoint serves on."""
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(openjev), "SM_LLAMA_CPP_CTX_SIZE": "256"})
    try:
        adapter.wait_ready()
        with httpx.Client(base_url=adapter.url, timeout=60) as client:
            systemone = client.post("/v1/systemone", json={"state": "word " * 400, "questions": {
                "angry": QUESTIONS["angry"]}})
            assert systemone.status_code == 413, systemone.text
            assert systemone.json()["detail"]["error_type"] == "context_length_exceeded"
            assert "but the context holds 256" in systemone.json()["detail"]["message"]
            openai = client.post("/v1/decisions", json={"model": "jev-latest", "input": "word " * 400, "questions": [
                {"type": "predicate", "instructions": "Is the customer angry?"}]})
            assert openai.status_code == 400 and openai.json()["error"]["code"] == "context_length_exceeded"
            assert openai.json()["error"]["param"] == "input"
            assert client.post("/v1/systemone", json={"state": STATE, "questions": {
                "angry": QUESTIONS["angry"]}}).status_code == 200
    finally:
        adapter.stop()
