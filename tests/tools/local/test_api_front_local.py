"""The System One API as AWS serves it, on the local gateway (`semif local --api-keys FILE`): the same front code as
the API's Lambda functions, in front of the real decision container through the gateway's SageMaker API.

- End to end (slow): the public conformance suite (`jevcompat`, pinned, unmodified) with a key passes every MUST and
  SHOULD it can exercise against an API that always requires a key (all but `auth.ignored-when-off`, which concerns
  servers without auth: the container's own conformance test covers it), auth checks included. Every case runs but
  `choice-options` (2 to 255 options, a minute of CPU here): the container's two full runs prove it, and the front
  reads no option (it forwards any body within its byte limits, tests/client/test_api_front.py); `semif smoke
  systemone --local` passes; keys are never logged; the front's own answers to bodies SageMaker would not read as
  System One equal the container's own `/v1/systemone` answers.
- With a scripted container (fast): what reaches the container, its answers passed back, keys rotating without a
  restart.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from adapter.test_systemone_conformance import outcomes
from jevcompat import report as jevcompat_report
from jevcompat import runner as jevcompat_runner
from jevcompat.checks import CASES
from jevcompat.spec import REQUIREMENTS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from typesafe_sdk import RetryPolicy, TypeSafeClient, TypeSafeInternalServerError, TypeSafeUnprocessableEntityError

from scripts import smoke
from scripts.common.command import alias
from scripts.local.gateway import create_gateway
from scripts.local.processes import LOOPBACK, free_port
from semif_adapter.doors.api_keys import HASH_PREFIX, digest
from semif_adapter.settings import cpu_quota
from tools.local.test_systemone_gateway import LONG_STATE, QUESTIONS

Serve = Callable[[Any], AbstractContextManager[str]]
KEY = "sk-semif-front-conformance-key"
NO_RETRY = RetryPolicy(max_retries=0)
# The container's own runs (tests/adapter/test_systemone_conformance.py) are the ones that prove these cases.
CONTAINER_CASES = frozenset({"choice-options"})
# Bodies SageMaker's /invocations would not read as System One: the front answers them as the container's own
# /v1/systemone does (tests/client/test_api_front.py checks each shape; here, against the container).
UNREADABLE = [(b'{"model": "jev-latest", "state": "x", "questions": {', "application/json"),
              (b"[]", "application/json"), (b"{}", "application/json"), (b'{"state": "x"}', "application/json"),
              (b'{"state": "a", "state": "b", "questions": {}}', "application/json"),
              (b'{"state": "x", "questions": {}}', "text/plain")]


def jevcompat_through_the_front(url: str, report: Path, key: str) -> dict[str, Any]:
    """jevcompat's own runner (the CLI's, which has no case selection) on every case but CONTAINER_CASES; its JSON
    report as `jevcompat test --json` writes it."""
    cases = {case.name for case in CASES} - CONTAINER_CASES
    run = jevcompat_runner.run(url, key=key, timeout=300, only=cases)
    report.write_text(jevcompat_report.to_json(run) + "\n", encoding="utf-8")
    return json.loads(report.read_text())


def keys_file(path: Path, *entries: tuple[str, str]) -> Path:
    path.write_text("".join(f"{key_id} {HASH_PREFIX}{digest(key).hex()}\n" for key_id, key in entries))
    return path


@pytest.mark.slow
def test_the_local_api_is_conformant_with_a_key_and_smoke_tested(spawn_gateway: Any, local_endpoints: Any,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    keys = keys_file(tmp_path / "keys.txt", ("conformance", KEY))
    # As an environment with `integration_timeout_s: 60` and a 4096-token context (the shipped environments'). The
    # decision container gets every CPU, as the image on an instance of its own does (`semif local` halves them
    # between the two containers; the chat one stays idle here).
    front = spawn_gateway("--api-keys", str(keys), "--api-timeout", "60",
                          env={**os.environ, "SM_LLAMA_CPP_CTX_SIZE": "4096", "SM_LLAMA_CPP_THREADS": str(cpu_quota())})
    front.wait_ready()
    report = jevcompat_through_the_front(front.url, tmp_path / "front.json", KEY)
    assert report["summary"]["verdict"] == "conformant", report["summary"]
    assert not report["inconclusive"] and not report["case_errors"] and report["aborted"] is None
    statuses = outcomes(report)
    assert {req: status for req, status in statuses.items() if status != "pass"} == {"auth.ignored-when-off": "skip"}
    assert set(statuses) == set(REQUIREMENTS)

    monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
    assert alias(smoke, ["systemone", "--local", str(front.port)]) == 0
    printed = capsys.readouterr().out
    assert "smoke systemone: OK" in printed and "a wrong key is refused with 401" in printed

    for content, content_type in UNREADABLE:
        headers = {"content-type": content_type}
        container = httpx.post(f"{local_endpoints.url}/v1/systemone", content=content, headers=headers, timeout=120)
        ours = httpx.post(f"{front.url}/v1/systemone", content=content,
                          headers={**headers, "authorization": f"Bearer {KEY}"}, timeout=120)
        assert (ours.status_code, ours.json()) == (container.status_code, container.json()), content

    log = front.log()
    assert KEY not in log  # keys are never logged; the caller's key id is, in the access log
    access = [json.loads(line.split("gateway: access ", 1)[1]) for line in log.splitlines()
              if "gateway: access " in line]
    assert {entry["keyId"] for entry in access if entry["status"] < 400} == {"conformance"}
    assert {entry["status"] for entry in access if entry["keyId"] == "-"} <= {401, 403}


class ScriptedInvocations:
    """A decision container's `/invocations`: the next scripted answer, and what each request carried."""

    def __init__(self) -> None:
        self.script: list[Response] = []
        self.received: list[tuple[dict[str, str], bytes]] = []

    def app(self) -> Starlette:
        async def invocations(request: Request) -> Response:
            self.received.append((dict(request.headers), await request.body()))
            return self.script.pop(0)

        async def ping(_: Request) -> Response:
            return Response(status_code=200)

        return Starlette(routes=[Route("/invocations", invocations, methods=["POST"]),
                                 Route("/ping", ping, methods=["GET"])])


@pytest.fixture
def scripted_front(threaded_server: Serve, tmp_path: Path) -> Iterator[tuple[ScriptedInvocations, str, Path]]:
    container = ScriptedInvocations()
    keys = keys_file(tmp_path / "keys.txt", ("tester", KEY))
    with threaded_server(container.app()) as url, threaded_server(create_gateway(
            {"t-chat": f"http://{LOOPBACK}:{free_port()}", "t-decision": url}, api_keys=keys)) as gateway:
        yield container, gateway, keys


def test_what_reaches_the_container_and_what_comes_back(scripted_front: tuple[ScriptedInvocations, str, Path]) -> None:
    container, gateway, _ = scripted_front
    busy = {"detail": {"error_type": "service_unavailable", "message": "all slots busy"}}
    refused = {"detail": [{"loc": ["body", "state"], "msg": "state must not be empty", "type": "value_error"}]}
    container.script += [JSONResponse(busy, status_code=503, headers={"Retry-After": "1"}),
                         JSONResponse(refused, status_code=422)]
    with TypeSafeClient(api_key=KEY, base_url=gateway, retry=NO_RETRY) as client:
        with pytest.raises(TypeSafeInternalServerError) as overloaded:
            client.system_one(state=LONG_STATE, questions=QUESTIONS)  # over 1 KiB: the SDK sends it zstd-compressed
        with pytest.raises(TypeSafeUnprocessableEntityError) as invalid:
            client.system_one(state=LONG_STATE, questions=QUESTIONS)
    assert (overloaded.value.status, overloaded.value.body) == (503, busy)  # the SDK retries it, by default
    assert (invalid.value.status, invalid.value.body) == (422, refused)
    headers, content = container.received[0]
    assert json.loads(content)["state"] == LONG_STATE  # decoded: SageMaker would drop Content-Encoding
    assert "authorization" not in headers and "content-encoding" not in headers
    assert headers["content-type"] == "application/json"


def test_keys_rotate_without_a_restart(scripted_front: tuple[ScriptedInvocations, str, Path]) -> None:
    container, gateway, keys = scripted_front
    listing = {"models": [{"name": "m", "description": "d", "release_date": "2026-12-01"}]}
    container.script += [JSONResponse(listing), JSONResponse(listing)]
    newer = "sk-semif-the-next-key"

    def models(key: str) -> int:
        # A generous timeout: the gateway's first call makes its SageMaker client, seconds on a loaded CI machine.
        return httpx.get(f"{gateway}/v1/models", headers={"authorization": f"Bearer {key}"}, timeout=120).status_code

    assert (models(KEY), models(newer)) == (200, 401)
    keys_file(keys, ("laptop-2", newer))  # the old key revoked, a new one made: the same file, rewritten
    assert (models(KEY), models(newer)) == (401, 200)
    headers, _ = container.received[0]
    assert headers["x-amzn-sagemaker-custom-attributes"] == "route=/v1/models"
