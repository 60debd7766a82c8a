"""The chat container under load and hostile bodies: its front must add no failure of its own.

The front relays to llama-server as the DLC's nginx does, so a client's mistake
gets llama-server's own answer. Each hostile body is therefore sent twice, to the
front and straight to llama-server, and the statuses must match: a difference,
or a 502 from the front, is the front's fault. (llama-server answers malformed
JSON with 500 by itself; that is relayed, counted, and reported as upstream.)
A body that crashes llama-server must end with a JSON 502, the container's exit
and no orphan, never with a front that serves nothing.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from scripts.local.processes import LOOPBACK, descendants, wait_until

from . import rawhttp
from .bodies import REQUEST_TIMEOUT_S, error_code
from .load import latency_summary
from .servers import Server, start_chat

MAX_TOKENS = 8
LIMIT = 6 * 1024 * 1024
CRASH_DEPTH = 200_000  # nested arrays: llama-server b8xxx dies of SIGSEGV on these (a 400 KB body)


def chat_body(text: str, max_tokens: int = MAX_TOKENS) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def upstream_url(server: Server) -> str:
    """llama-server's own URL, read from its command line (`--port N`) under /proc."""
    for pid in descendants(server.pid):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv and argv[0].endswith(b"llama-server") and b"--port" in argv:
            return f"http://{LOOPBACK}:{int(argv[argv.index(b'--port') + 1])}"
    raise RuntimeError("no llama-server under the chat container")


def hostile_bodies() -> dict[str, bytes]:
    valid = json.dumps(chat_body("Say hi.")).encode()
    return {
        "invalid_json": valid[:-5], "empty": b"", "not_an_object": b"[1, 2]", "no_messages": b'{"max_tokens": 4}',
        "messages_not_a_list": b'{"messages": 5}',
        "content_not_text": b'{"messages": [{"role": "user", "content": 7}], "max_tokens": 4}',
        "nan": valid.replace(b'"max_tokens": 8', b'"max_tokens": 8, "temperature": NaN'),
        "non_utf8": valid.replace(b"Say hi.", b"\xff\xfe\xc0"),
        "duplicate_keys": valid.replace(b'{"messages"', b'{"messages": [], "messages"'),
        "unicode": json.dumps(chat_body("\U0001F680 \u202eRTL\u202c e\u0301\u0302 \u0000 NUL")).encode(),
        "nesting_100000_objects": valid.replace(b"{", b'{"x": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b", ",
                                                1),
        "max_tokens_negative": valid.replace(b'"max_tokens": 8', b'"max_tokens": -5'),
        "max_tokens_text": valid.replace(b'"max_tokens": 8', b'"max_tokens": "8"'),
        "huge_content_6_MB": json.dumps(chat_body("word " * ((LIMIT - 200) // 5))).encode(),
        "junk_6_MiB_plus_1": b"x" * (LIMIT + 1),
    }


def _post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=REQUEST_TIMEOUT_S)


def chat_load(server: Server, clients: int, duration_s: float) -> dict[str, Any]:
    """`clients` closed-loop clients asking for `MAX_TOKENS` tokens each, for `duration_s`."""
    outcomes: list[tuple[str, float]] = []
    deadline = time.monotonic() + duration_s

    def client(index: int) -> None:
        with httpx.Client(timeout=REQUEST_TIMEOUT_S) as session:
            number = 0
            while time.monotonic() < deadline:
                started = time.monotonic()
                text = f"Name a colour ({index}-{number})."
                try:
                    response = session.post(f"{server.url}/invocations", json=chat_body(text))
                    status = str(response.status_code)
                    if status == "200" and not response.json().get("choices"):
                        status = "200 without choices"
                except httpx.HTTPError as error:
                    status = f"no answer ({type(error).__name__})"
                outcomes.append((status, (time.monotonic() - started) * 1000))
                number += 1

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(duration_s + REQUEST_TIMEOUT_S)
    statuses = Counter(status for status, _ in outcomes)
    problems = [f"{count} x {status}" for status, count in statuses.items() if status != "200"]
    if not outcomes:
        problems.append("no chat request was sent")
    return {"clients": clients, "duration_s": duration_s, "max_tokens": MAX_TOKENS, "sent": len(outcomes),
            "by_status": dict(statuses), "latency_ms": latency_summary([ms for _, ms in outcomes]),
            "problems": problems}


def chat_hostile(server: Server) -> dict[str, Any]:
    """Each hostile body to the front and to llama-server directly; then framing abuse; then a normal chat."""
    upstream = upstream_url(server) + "/v1/chat/completions"
    cases, problems = [], []
    relayed_5xx = 0
    for name, body in hostile_bodies().items():
        front, direct = _post(f"{server.url}/invocations", body), _post(upstream, body)
        cases.append({"name": name, "front": front.status_code, "llama_server": direct.status_code})
        if front.status_code != direct.status_code:
            problems.append(f"{name}: the front said {front.status_code}, llama-server {direct.status_code}")
        elif front.status_code >= 500:
            relayed_5xx += 1
    data = json.dumps(chat_body("Tell me a long story about a lighthouse.", 256)).encode()
    rawhttp.send_and_close(server.url, rawhttp.request_head(server.url, "/invocations", len(data) + 100) + data,
                           linger_s=0.2)
    rawhttp.send_and_close(server.url, rawhttp.request_head(server.url, "/invocations", len(data)) + data,
                           linger_s=0.3)  # walks away mid-generation
    cases += [{"name": "length_larger_than_sent_then_close", "front": None, "llama_server": None},
              {"name": "walk_away_mid_generation", "front": None, "llama_server": None}]
    after = _post(f"{server.url}/invocations", json.dumps(chat_body("Say hi.")).encode())
    if after.status_code != 200:
        problems.append(f"the front stopped serving after the hostile bodies: {after.status_code}")
    return {"tried": len(cases), "cases": cases, "upstream_5xx_relayed": relayed_5xx, "problems": problems}


def chat_crash_probe(log_dir: Path) -> dict[str, Any]:
    """A body that crashes llama-server: a JSON 502, the container's exit, no orphan; or it survives."""
    server = start_chat(log_dir, name="chat-crash")
    body = json.dumps(chat_body("hi", 2)).encode().replace(b"{", b'{"x": ' + b"[" * CRASH_DEPTH
                                                            + b"]" * CRASH_DEPTH + b", ", 1)
    problems = []
    try:
        response = _post(f"{server.url}/invocations", body)
        status, code = response.status_code, error_code(response)
    except httpx.HTTPError as error:
        status, code = None, type(error).__name__
    crashed = status == 502
    if crashed:  # give the container its moment to notice and exit
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: not server.alive(), timeout_s=10, what="the chat container's exit")
    if crashed and code != "upstream_unavailable":
        problems.append(f"llama-server died but the front answered 502 without its JSON error ({code})")
    if crashed and server.alive():
        problems.append("llama-server died but the front kept its port open")
    if not crashed and (status is None or status >= 500):
        problems.append(f"the front answered {status} {code}")
    stopped = server.stop()
    if crashed and stopped.status == 0:
        problems.append("the container exited 0 although llama-server died")
    if stopped.survivors:
        problems.append(f"orphans left: {stopped.survivors}")
    return {"body_bytes": len(body), "nesting": CRASH_DEPTH, "status": status, "code": code,
            "llama_server_crashed": crashed, "container_exit_status": stopped.status,
            "exit_line": _exit_line(server.log_text()), "survivors": list(stopped.survivors),
            "problems": problems}


def _exit_line(log: str) -> str | None:
    """The container's own line about llama-server's exit (it names the signal or status)."""
    return next((line.strip() for line in reversed(log.splitlines()) if "exited with status" in line), None)
