"""The SageMaker container contract, on real processes: ping states, serve arg, port, faults, SIGTERM."""

from __future__ import annotations

import contextlib
import json
import select
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from support.admission import DRAIN_TIMING, send, wait_admitted

from bench.reliability.rawhttp import RawResponse, read_response
from scripts.local.processes import wait_until
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.settings import SAGEMAKER_STOP_SECONDS, load_settings

START_S = 180.0  # as conftest's START_TIMEOUT: a bound on a start that failed
INVOCATION_S = 60.0  # SageMaker's real-time invocation timeout
SHIPPED_DRAIN_S = load_settings({}).drain_seconds
SHORT_DRAIN_S = 6  # the hand-back test's drain: a one-sentence decision on one thread ends well within it
SENTENCE = "the shipment was delayed. "  # 5 tokens
LONG_SENTENCES = 700  # about 3,500 tokens: what the tests' 4,096-token context holds


def test_ping_is_503_until_warm_then_200_with_empty_body(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path())})
    seen_not_ready = seen_refused_invocation = False
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            invocation = httpx.post(process.url + "/invocations", json=make_decision(), timeout=INVOCATION_S)
            ping = httpx.get(process.url + "/ping", timeout=2)
        except httpx.TransportError:
            time.sleep(0.005)
            continue
        if ping.status_code == 200:
            assert ping.content == b""
            break
        assert ping.status_code == 503 and ping.json()["error"]["code"] == "not_ready"
        assert ping.headers["retry-after"] == "5"
        seen_not_ready = True
        # ping was still 503 after the invocation, so the invocation came before readiness
        assert invocation.status_code == 503 and invocation.json()["error"]["code"] == "not_ready"
        seen_refused_invocation = True
        time.sleep(0.05)  # poll, do not spin: a busy loop here slows the loading it watches (2 cores) 3-4 fold
    else:
        pytest.fail("adapter never became ready")
    assert seen_not_ready and seen_refused_invocation, "the loading window was never observed"
    ready_line = next(json.loads(line) for line in process.logs().splitlines() if '"event": "ready"' in line)
    assert ready_line["warmup_prompt_tokens"] > 0  # /ping said 200 only after a warm-up decision
    # the split-decode probe runs after /ping said 200, as one worker's first job; decisions are answered meanwhile
    assert httpx.post(process.url + "/invocations", json=make_decision(), timeout=INVOCATION_S).status_code == 200
    process.wait_settled()
    reuse_line = next(json.loads(line) for line in process.logs().splitlines() if '"event": "partial reuse"' in line)
    assert reuse_line["enabled"] is True and reuse_line["why_off"] == [] and reuse_line["probe_ms"] > 0


def test_model_dir_discovery_port_variable_and_cli_flags(start_adapter, tmp_path):
    model_dir = tmp_path / "model" / "sub"
    model_dir.mkdir(parents=True)
    (model_dir / "smol.gguf").symlink_to(embedded_model_path())
    process = start_adapter({"SM_MODEL_DIR": str(tmp_path / "model")})
    process.wait_settled()  # SAGEMAKER_BIND_TO_PORT chose the port this URL uses; the next loads beside it idle
    assert "smol.gguf" in process.logs()
    overridden = start_adapter({"SM_MODEL_DIR": "/nonexistent"}, ("serve", "--model", str(embedded_model_path())))
    overridden.wait_ready()


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_unknown_command_is_refused(start_adapter):
    process = start_adapter({}, ("train",))
    assert process.wait_exit(30) == 2


def startup_failure(start_adapter, env: dict[str, str]) -> str:
    process = start_adapter(env)
    pings_ok = 0
    deadline = time.monotonic() + 60
    while process.proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            pings_ok += httpx.get(process.url + "/ping", timeout=2).status_code == 200
        time.sleep(0.02)
    assert process.wait_exit(30) == 1
    assert pings_ok == 0, "/ping said healthy for a model that cannot serve"
    failures = [line for line in process.logs().splitlines() if "startup failed" in line]
    assert len(failures) == 1
    return json.loads(failures[0])["event"]


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_startup_fails_clearly_without_a_model(start_adapter, tmp_path):
    assert "no model .gguf file" in startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_startup_fails_clearly_with_two_models(start_adapter, tmp_path):
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).symlink_to(embedded_model_path())
    assert "2 models found" in startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_startup_fails_clearly_with_wrong_magic(start_adapter, tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"\x00" * 1024)
    assert "GGUF magic" in startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_startup_fails_clearly_with_a_truncated_model(start_adapter, tmp_path):
    truncated = tmp_path / "model.gguf"
    with embedded_model_path().open("rb") as source:
        truncated.write_bytes(source.read(4 * 1024 * 1024))  # header intact, tensor data cut off
    message = startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})
    assert "truncated" in message and "bytes missing" not in message and "missing)" in message


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_startup_refuses_a_model_that_is_not_the_pinned_one(start_adapter):
    env = {"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_MODEL_SHA256": "0" * 64}
    message = startup_failure(start_adapter, env)
    assert "does not match SEMIF_MODEL_SHA256" in message and "hashed in" in message


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_startup_fails_clearly_with_an_unreadable_model(start_adapter, tmp_path):
    missing = tmp_path / "gone.gguf"
    assert "does not exist" in startup_failure(start_adapter, {"SM_LLAMA_CPP_MODEL": str(missing)})


@pytest.mark.without_model  # refused before llama.cpp loads anything
def test_bad_setting_is_named_at_startup(start_adapter):
    env = {"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_QUEUE_SIZE": "lots"}
    assert "SEMIF_QUEUE_SIZE" in startup_failure(start_adapter, env)


def test_custom_attributes_are_echoed(client, make_decision):
    response = client.post("/invocations", json=make_decision(),
                           headers={"X-Amzn-SageMaker-Custom-Attributes": "trace_id=abc-123"})
    assert response.status_code == 200
    assert response.headers["x-amzn-sagemaker-custom-attributes"] == "trace_id=abc-123"
    assert "x-amzn-sagemaker-custom-attributes" not in client.post("/invocations", json=make_decision()).headers


def test_one_json_log_line_per_request_without_the_body(adapter, client, make_decision):
    response = client.post("/invocations", json=make_decision(state="secret evidence 0451"))
    request_id = response.headers["x-request-id"]

    def request_lines() -> list[dict]:
        return [json.loads(line) for line in adapter.logs().splitlines() if request_id in line]

    # The line is written once the response is sent, so the client can read the answer a moment before it.
    wait_until(lambda: bool(request_lines()), timeout_s=5, what="the request's log line")
    lines = request_lines()
    assert len(lines) == 1
    assert lines[0]["status"] == 200 and lines[0]["prompt_tokens"] > 0 and lines[0]["ms"] > 0
    assert "secret evidence 0451" not in adapter.logs()


@dataclass(frozen=True)
class Drained:
    """What the clients of a SIGTERMed adapter saw: each answer (None: the socket was cut) and how many seconds after
    the signal it had arrived by; the process's exit status and how many seconds after the signal it had exited by."""

    responses: list[RawResponse | None]
    answered_s: list[float]
    code: int
    exit_s: float

    @property
    def statuses(self) -> list[int | None]:
        return [response.status if response else None for response in self.responses]


def sigterm_under_load(start_adapter, make_decision, sizes: list[int], drain_s: int | None = None
                       ) -> tuple[Drained, int]:
    """Admit one decision per size (sentences of state), in this order, then SIGTERM while they run; returns what the
    clients saw and the adapter's drain seconds (the shipped default unless `drain_s` is given).

    The adapter runs DRAIN_TIMING. The worker is free when the first decision arrives (the partial-reuse probe, its
    first job, has logged its line), so that one is decoding from the moment it is admitted, and `wait_admitted`
    makes sure every one was admitted before the signal, whatever the machine's speed.
    """
    drain = {"SEMIF_DRAIN_SECONDS": str(drain_s)} if drain_s else {}
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), **DRAIN_TIMING, **drain})
    drain_s = load_settings(process.env).drain_seconds
    process.wait_settled()
    sockets = [send(process.url, json.dumps(make_decision(state=f"Evidence {index}: " + SENTENCE * size)).encode())
               for index, size in enumerate(sizes)]
    wait_admitted(process.url)
    started = time.monotonic()
    process.proc.send_signal(signal.SIGTERM)

    def refused() -> bool:
        try:
            httpx.get(process.url + "/ping", timeout=2)
        except httpx.TransportError:
            return True
        return False

    # new connections are refused while draining (from uvicorn's next tick on), so before the drain deadline
    wait_until(refused, timeout_s=drain_s, what="new connections refused")
    responses, answered_s = [], []
    for sock in sockets:  # every answer is due before SageMaker's SIGKILL
        responses.append(read_response(sock, SAGEMAKER_STOP_SECONDS))
        answered_s.append(time.monotonic() - started)
        sock.close()
    code = process.wait_exit(SAGEMAKER_STOP_SECONDS)
    return Drained(responses, answered_s, code, time.monotonic() - started), drain_s


def test_sigterm_lets_admitted_requests_finish_then_exits_0(start_adapter, make_decision):
    drained, _ = sigterm_under_load(start_adapter, make_decision, [8, 8, 8])
    assert drained.code == 0 and drained.exit_s < SAGEMAKER_STOP_SECONDS
    assert drained.statuses == [200, 200, 200], drained


def test_sigterm_hands_back_work_that_cannot_finish_in_time(start_adapter, make_decision):
    """One sentence of state, decoding at the signal, then far more work than a core decodes within the drain
    (7 states of about 3,500 tokens; one took 30 s on one thread of this machine, busy): the sentence is answered,
    the rest is handed back at the drain deadline, not before, and the process exits in the time SageMaker leaves
    after the shipped drain before its SIGKILL. The drain is shortened (`SHORT_DRAIN_S`): the hand-back is the same
    at any length, and what must fit SageMaker's window is what comes after the deadline (one ubatch, the exit).
    Were the unfinished work not handed back, its sockets would be cut (None) or the exit would come too late."""
    drained, drain_s = sigterm_under_load(start_adapter, make_decision, [1] + [LONG_SENTENCES] * 7, SHORT_DRAIN_S)
    assert drain_s == SHORT_DRAIN_S < SHIPPED_DRAIN_S
    assert drained.code == 0 and drained.exit_s - drain_s < SAGEMAKER_STOP_SECONDS - SHIPPED_DRAIN_S
    statuses = drained.statuses  # None: no answer, the socket was cut
    assert statuses[0] == 200 and 503 in statuses and set(statuses) == {200, 503}, drained
    for refused, seconds in zip(drained.responses, drained.answered_s, strict=True):
        if refused and refused.status == 503:
            assert refused.error_code() == "shutting_down" and refused.headers["retry-after"] == "1"
            assert seconds >= drain_s, f"handed back {seconds:.1f} s after SIGTERM, before the {drain_s} s drain"


def test_stays_up_after_every_error(client, make_decision):
    assert client.post("/invocations", content=b"{", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/invocations", json=make_decision()).status_code == 200


def start_busy(start_adapter, make_decision, repeats: int, count: int = 1) -> tuple[Any, list[socket.socket]]:
    """A fresh adapter given `count` long decisions (seconds each) on raw sockets, admitted (`wait_admitted`) on
    return: the first is in progress then (the workers' first job, the partial-reuse probe, may hold the other one);
    with two, neither worker is free until one of them, or the probe, is done."""
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path())})
    process.wait_ready()
    states = [f"Busy {index}: " + "a long account of events. " * repeats for index in range(count)]
    busy = [send(process.url, json.dumps(make_decision(state=state)).encode()) for state in states]
    wait_admitted(process.url)
    return process, busy


def test_queued_work_of_a_client_that_left_is_never_run(start_adapter, make_decision):
    process, busy = start_busy(start_adapter, make_decision, repeats=80, count=2)
    leaver_body = json.dumps(make_decision(state="The client of this one hangs up while it waits.")).encode()
    leaver = send(process.url, leaver_body)
    wait_admitted(process.url)
    leaver.close()  # while it waits behind the busy decisions
    first, second = (read_response(sock, INVOCATION_S) for sock in busy)
    for sock in busy:
        sock.close()
    assert first is not None and first.status == 200 and second is not None and second.status == 200

    def gone_lines() -> list[dict]:
        lines = [json.loads(line) for line in process.logs().splitlines() if '"event": "request"' in line]
        return [line for line in lines if line.get("client_disconnected")]

    wait_until(lambda: bool(gone_lines()), timeout_s=10, what="the leaver's log line")
    gone = gone_lines()
    assert len(gone) == 1 and "prompt_tokens" not in gone[0]  # answered nothing
    # had the leaver's decision run (a started one runs to its end), its answer would be in the result cache now
    later = httpx.post(process.url + "/invocations", content=leaver_body,
                       headers={"content-type": "application/json"}, timeout=INVOCATION_S)
    assert later.status_code == 200
    assert later.json()["timing"]["evaluated_tokens"] > 0, later.json()["timing"]


def test_ping_answers_fast_while_a_decision_is_decoding(start_adapter, make_decision):
    process, (busy,) = start_busy(start_adapter, make_decision, repeats=120)
    for _ in range(5):
        assert httpx.get(process.url + "/ping", timeout=2).status_code == 200  # SageMaker's ping timeout
    assert not select.select([busy], [], [], 0)[0], "answered before the pings: they did not overlap its decision"
    answer = read_response(busy, INVOCATION_S)
    busy.close()
    assert answer is not None and answer.status == 200
