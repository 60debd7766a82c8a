"""The SageMaker container contract, on real processes: ping states, serve arg, port, faults, SIGTERM."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
from typing import Any

import httpx
import pytest

from scripts.harness.reliability.rawhttp import RawResponse, connect, read_response, request_head
from scripts.local.processes import wait_until
from semif_adapter.engine.embedded_model import embedded_model_path


def test_ping_is_503_until_warm_then_200_with_empty_body(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path())})
    seen_not_ready = seen_refused_invocation = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            invocation = httpx.post(process.url + "/invocations", json=make_decision(), timeout=30)
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
    assert httpx.post(process.url + "/invocations", json=make_decision(), timeout=30).status_code == 200
    wait_until(lambda: '"event": "partial reuse"' in process.logs(), timeout_s=30, what="the partial reuse probe")
    reuse_line = next(json.loads(line) for line in process.logs().splitlines() if '"event": "partial reuse"' in line)
    assert reuse_line["enabled"] is True and reuse_line["why_off"] == [] and reuse_line["probe_ms"] > 0


def test_model_dir_discovery_port_variable_and_cli_flags(start_adapter, tmp_path):
    model_dir = tmp_path / "model" / "sub"
    model_dir.mkdir(parents=True)
    (model_dir / "smol.gguf").symlink_to(embedded_model_path())
    process = start_adapter({"SM_MODEL_DIR": str(tmp_path / "model")})
    process.wait_ready()  # SAGEMAKER_BIND_TO_PORT chose the port this URL uses
    assert "smol.gguf" in process.logs()
    overridden = start_adapter({"SM_MODEL_DIR": "/nonexistent"}, ("serve", "--model", str(embedded_model_path())))
    overridden.wait_ready()


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


def test_startup_fails_clearly_without_a_model(start_adapter, tmp_path):
    assert "no model .gguf file" in startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})


def test_startup_fails_clearly_with_two_models(start_adapter, tmp_path):
    for name in ("a.gguf", "b.gguf"):
        (tmp_path / name).symlink_to(embedded_model_path())
    assert "2 models found" in startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})


def test_startup_fails_clearly_with_wrong_magic(start_adapter, tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"\x00" * 1024)
    assert "GGUF magic" in startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})


def test_startup_fails_clearly_with_a_truncated_model(start_adapter, tmp_path):
    truncated = tmp_path / "model.gguf"
    with embedded_model_path().open("rb") as source:
        truncated.write_bytes(source.read(4 * 1024 * 1024))  # header intact, tensor data cut off
    message = startup_failure(start_adapter, {"SM_MODEL_DIR": str(tmp_path)})
    assert "truncated" in message and "bytes missing" not in message and "missing)" in message


def test_startup_refuses_a_model_that_is_not_the_pinned_one(start_adapter):
    env = {"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_MODEL_SHA256": "0" * 64}
    message = startup_failure(start_adapter, env)
    assert "does not match SEMIF_MODEL_SHA256" in message and "hashed in" in message


def test_startup_fails_clearly_with_an_unreadable_model(start_adapter, tmp_path):
    missing = tmp_path / "gone.gguf"
    assert "does not exist" in startup_failure(start_adapter, {"SM_LLAMA_CPP_MODEL": str(missing)})


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


def sigterm_under_load(start_adapter, make_decision, env: dict[str, str], sizes: list[int]
                       ) -> tuple[list[RawResponse | None], float, int]:
    """Admit one decision per size, SIGTERM while they run; returns responses, seconds to exit, exit code.

    Requests go out on raw sockets (fully sent before SIGTERM) and a /ping answer acts as a barrier, so
    "admitted before the signal" does not depend on thread scheduling on a loaded machine.
    """
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), **env})
    process.wait_ready()
    sockets = []
    for index, size in enumerate(sizes):
        body = json.dumps(make_decision(state=f"Evidence {index}: " + "the shipment was delayed. " * size)).encode()
        sock = connect(process.url, timeout_s=60)
        sock.sendall(request_head(process.url, "/invocations", len(body)) + body)
        sockets.append(sock)
    assert httpx.get(process.url + "/ping", timeout=10).status_code == 200  # the loop has read them all
    started = time.monotonic()
    process.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises(httpx.TransportError):
        httpx.get(process.url + "/ping", timeout=2)  # new connections are refused while draining
    responses = [read_response(sock, 60) for sock in sockets]
    for sock in sockets:
        sock.close()
    code = process.wait_exit(30)
    return responses, time.monotonic() - started, code


def test_sigterm_lets_admitted_requests_finish_then_exits_0(start_adapter, make_decision):
    responses, seconds, code = sigterm_under_load(start_adapter, make_decision, {}, [8, 8, 8])
    assert code == 0 and seconds < 30
    assert [r.status if r else None for r in responses] == [200, 200, 200]


def test_sigterm_hands_back_work_that_cannot_finish_in_time(start_adapter, make_decision):
    env = {"SEMIF_DRAIN_SECONDS": "4"}
    responses, seconds, code = sigterm_under_load(start_adapter, make_decision, env, [1] + [60] * 7)
    assert code == 0 and seconds < 4 + 5 + 5  # drain deadline + abort grace + exit
    statuses = [r.status if r else None for r in responses]  # None: no answer, the socket was cut
    assert statuses[0] == 200 and 503 in statuses and set(statuses) == {200, 503}
    for refused in (r for r in responses if r and r.status == 503):
        assert refused.error_code() == "shutting_down" and refused.headers["retry-after"] == "1"


def test_stays_up_after_every_error(client, make_decision):
    assert client.post("/invocations", content=b"{", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/invocations", json=make_decision()).status_code == 200


def start_busy(start_adapter, make_decision, repeats: int) -> tuple[Any, socket.socket, bytes]:
    """A fresh adapter busy decoding a long decision (seconds) sent on a raw socket."""
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path())})
    process.wait_ready()
    body = json.dumps(make_decision(state="Busy: " + "a long account of events. " * repeats)).encode()
    busy = connect(process.url, timeout_s=60)
    busy.sendall(request_head(process.url, "/invocations", len(body)) + body)
    return process, busy, body


def test_queued_work_of_a_client_that_left_is_never_run(start_adapter, make_decision):
    process, busy, long_body = start_busy(start_adapter, make_decision, repeats=80)
    leaver_body = json.dumps(make_decision(state="The client of this one hangs up while it waits.")).encode()
    leaver = connect(process.url, timeout_s=60)
    leaver.sendall(request_head(process.url, "/invocations", len(leaver_body)) + leaver_body)
    assert httpx.get(process.url + "/ping", timeout=10).status_code == 200  # both read by the server
    leaver.close()  # while the first decision is still decoding
    first = read_response(busy, 60)
    busy.close()
    assert first is not None and first.status == 200

    def gone_lines() -> list[dict]:
        lines = [json.loads(line) for line in process.logs().splitlines() if '"event": "request"' in line]
        return [line for line in lines if line.get("client_disconnected")]

    wait_until(lambda: bool(gone_lines()), timeout_s=10, what="the leaver's log line")
    gone = gone_lines()
    assert len(gone) == 1 and "prompt_tokens" not in gone[0]  # answered nothing, decoded nothing
    # had the leaver's decision run, its state would have replaced the busy one in the KV cache
    again = httpx.post(process.url + "/invocations", content=long_body,
                       headers={"content-type": "application/json"}, timeout=60)
    assert again.status_code == 200
    assert again.json()["timing"]["cached_tokens"] > first.json()["timing"]["cached_tokens"] + 100


def test_ping_answers_fast_while_a_decision_is_decoding(start_adapter, make_decision):
    process, busy, _ = start_busy(start_adapter, make_decision, repeats=120)
    time.sleep(0.3)  # the decision is decoding now (it takes seconds)
    seconds = []
    for _ in range(5):
        started = time.monotonic()
        assert httpx.get(process.url + "/ping", timeout=2).status_code == 200  # SageMaker's ping timeout
        seconds.append(time.monotonic() - started)
    answer = read_response(busy, 60)
    busy.close()
    assert answer is not None and answer.status == 200
    assert answer.json()["timing"]["forward_ms"] / 1000 > sum(seconds)  # the pings overlapped the decode
