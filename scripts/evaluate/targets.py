"""Where the evaluator sends decisions: a container over HTTP, the local gateway, or a SageMaker endpoint.

A SemIf decision (`decide`) is answered with the decision client's checked `Decision` (option ids, probabilities
summing to 1, the scoring method that was asked); a System One request (`ask`: POST URL/v1/systemone, or the same
body through SageMaker's /invocations) with the response document, checked by `systemone_collect`. Both come
with the round-trip time the caller saw. Any failure is a TargetError with one line that names the target.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from botocore.exceptions import BotoCoreError, ClientError

from semif_decision_client import (
    Decision,
    DecisionClient,
    DecisionError,
    DecisionRequest,
    parse_decision,
    runtime_client,
)

from ..common.discovery import LOCAL_PORT, LOCAL_PREFIX, aws_session, gateway_url, local_session
from ..common.transport import ATTEMPT_STARTED, RetryingTransport

HTTP_TIMEOUT_S = 120.0
BUSY_RETRIES = 10  # a container still loading or busy (503/429/529 + Retry-After) gets this many more chances
SYSTEMONE_PATH = "/v1/systemone"
MAX_RETRY_AFTER_S = 5.0
RUNTIME_ATTEMPTS = 3


class TargetError(Exception):
    """No usable answer from the target; the message is one line naming it."""


@dataclass(frozen=True)
class Answer:
    decision: Decision
    latency_ms: float  # round trip as the evaluator saw it


@dataclass(frozen=True)
class Reply:
    """A System One response document (not yet checked against its request), and the round trip."""

    document: Any
    latency_ms: float


class Target(Protocol):
    description: str

    def decide(self, request: DecisionRequest) -> Answer: ...

    def ask(self, body: dict[str, Any]) -> Reply: ...

    def close(self) -> None: ...


def error_text(body: str | bytes) -> str:
    """An error body in one line: SemIf's {"error": {code, field, message}}, System One's {"detail": ...}."""
    try:
        document = json.loads(body)
        if "detail" in document:
            detail = document["detail"]
            if isinstance(detail, list):  # validation: [{"loc": ["body", ...], "msg", "type"}]
                return "; ".join(f"{'.'.join(map(str, d['loc'][1:]))}: {d['msg']}" for d in detail)
            return f"{detail['error_type']}: {detail['message']}"
        error = document["error"]
        where = f" (field {error['field']})" if error.get("field") else ""
        return f"{error['code']}{where}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return text[:200]


class HttpTarget:
    """A decision container directly: POST URL/invocations (`container/serve serve`, a `docker run`)."""

    def __init__(self, url: str, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.description = self.url
        self._client = httpx.Client(timeout=timeout_s, transport=RetryingTransport(
            BUSY_RETRIES + 1, max_wait_s=MAX_RETRY_AFTER_S))

    def _post(self, path: str, payload: dict[str, Any], what: str) -> tuple[httpx.Response, float]:
        """The 200 response and the round trip of the try that got it (a busy container is given time by the
        transport); anything else raises."""
        started = time.perf_counter()
        try:
            response = self._client.post(f"{self.url}{path}", json=payload)
        except httpx.HTTPError as error:
            raise TargetError(f"cannot reach {self.url}: {error or type(error).__name__}") from None
        latency_ms = (time.perf_counter() - response.extensions.get(ATTEMPT_STARTED, started)) * 1000
        if response.status_code != 200:
            raise TargetError(f"{self.url}{path} refused {what}: HTTP {response.status_code} "
                              f"{error_text(response.content)}")
        return response, latency_ms

    def decide(self, request: DecisionRequest) -> Answer:
        response, latency_ms = self._post("/invocations", request.to_payload(), f"decision {request.id!r}")
        try:
            return Answer(parse_decision(request, response.content), latency_ms)
        except DecisionError as error:
            raise TargetError(f"{self.url}: decision {request.id!r}: {error}") from None

    def ask(self, body: dict[str, Any]) -> Reply:
        response, latency_ms = self._post(SYSTEMONE_PATH, body, "a System One request")
        try:
            return Reply(response.json(), latency_ms)
        except ValueError:
            raise TargetError(f"{self.url}{SYSTEMONE_PATH}: the answer is not JSON: {response.text[:200]}") from None

    def close(self) -> None:
        self._client.close()


class RuntimeTarget:
    """A SageMaker endpoint through boto3's sagemaker-runtime (AWS, or the local gateway with endpoint_url)."""

    def __init__(self, endpoint: str, runtime: Any, description: str) -> None:
        self.description = description
        self.endpoint = endpoint
        self._runtime = runtime
        self._client = DecisionClient(endpoint, client=runtime)

    def decide(self, request: DecisionRequest) -> Answer:
        started = time.perf_counter()
        try:
            decision = self._client.decide(request)
        except DecisionError as error:
            raise TargetError(f"{self.description}: decision {request.id!r}: {error}") from None
        return Answer(decision, (time.perf_counter() - started) * 1000)

    def ask(self, body: dict[str, Any]) -> Reply:
        """The System One body as it is, to /invocations (where a body with `questions` is a System One request)."""
        started = time.perf_counter()
        try:
            response = self._runtime.invoke_endpoint(EndpointName=self.endpoint, ContentType="application/json",
                                                     Accept="application/json", Body=json.dumps(body).encode())
            raw = response["Body"].read()
        except ClientError as error:
            found = error.response
            status = found.get("OriginalStatusCode")
            text = error_text(found["OriginalMessage"]) if "OriginalMessage" in found \
                else found.get("Error", {}).get("Message", str(error))
            raise TargetError(f"{self.description} refused a System One request: "
                              f"{f'HTTP {status} ' if status else ''}{text}") from None
        except BotoCoreError as error:
            raise TargetError(f"{self.description}: {error}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        try:
            return Reply(json.loads(raw), latency_ms)
        except ValueError:
            raise TargetError(f"{self.description}: the answer is not JSON: {raw[:200]!r}") from None

    def close(self) -> None:
        pass


def local_target(port: int = LOCAL_PORT, prefix: str = LOCAL_PREFIX) -> RuntimeTarget:
    """`{prefix}-decision` on the local gateway (`semif local`), addressed as every tool does (common/discovery.py)."""
    url = gateway_url(port)
    runtime = runtime_client(session=local_session(), endpoint_url=url, max_attempts=RUNTIME_ATTEMPTS)
    return RuntimeTarget(f"{prefix}-decision", runtime, f"{prefix}-decision at {url}")


def aws_target(endpoint: str, region: str | None = None) -> RuntimeTarget:
    """A deployed decision endpoint, with the credentials and region boto3 finds (or `region`)."""
    runtime = runtime_client(session=aws_session(region), max_attempts=RUNTIME_ATTEMPTS)
    return RuntimeTarget(endpoint, runtime, f"endpoint {endpoint}")
