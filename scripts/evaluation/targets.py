"""Where the evaluator sends decisions: a container over HTTP, the local gateway, or a SageMaker endpoint.

Every target answers with the decision client's checked `Decision` (option ids, probabilities summing to 1,
the scoring method that was asked), and the round-trip time the caller saw. Any failure is a TargetError with
one line that names the target.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
import httpx

from semif_decision_client import (
    Decision,
    DecisionClient,
    DecisionError,
    DecisionRequest,
    parse_decision,
    runtime_client,
)

from ..smoke import LOCAL_CREDENTIALS, LOCAL_PORT, LOCAL_PREFIX, LOCAL_REGION

HTTP_TIMEOUT_S = 120.0
BUSY_RETRIES = 10  # a container still loading (503 + Retry-After) gets this many more chances
MAX_RETRY_AFTER_S = 5.0
RUNTIME_ATTEMPTS = 3


class TargetError(Exception):
    """No usable answer from the target; the message is one line naming it."""


@dataclass(frozen=True)
class Answer:
    decision: Decision
    latency_ms: float  # round trip as the evaluator saw it


class Target(Protocol):
    description: str

    def decide(self, request: DecisionRequest) -> Answer: ...

    def close(self) -> None: ...


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        where = f" (field {error['field']})" if error.get("field") else ""
        return f"{error['code']}{where}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


class HttpTarget:
    """A decision container directly: POST URL/invocations (`container/serve serve`, a `docker run`)."""

    def __init__(self, url: str, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.description = self.url
        self._client = httpx.Client(timeout=timeout_s)

    def decide(self, request: DecisionRequest) -> Answer:
        for attempt in range(BUSY_RETRIES + 1):
            started = time.perf_counter()
            try:
                response = self._client.post(f"{self.url}/invocations", json=request.to_payload())
            except httpx.HTTPError as error:
                raise TargetError(f"cannot reach {self.url}: {error or type(error).__name__}") from None
            latency_ms = (time.perf_counter() - started) * 1000
            if response.status_code == 503 and attempt < BUSY_RETRIES:
                time.sleep(min(MAX_RETRY_AFTER_S, float(response.headers.get("retry-after", "1"))))
                continue
            if response.status_code != 200:
                raise TargetError(f"{self.url} refused decision {request.id!r}: HTTP {response.status_code} "
                                  f"{_error_text(response)}")
            try:
                return Answer(parse_decision(request, response.content), latency_ms)
            except DecisionError as error:
                raise TargetError(f"{self.url}: decision {request.id!r}: {error}") from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def close(self) -> None:
        self._client.close()


class RuntimeTarget:
    """A SageMaker endpoint through boto3's sagemaker-runtime (AWS, or the local gateway with endpoint_url)."""

    def __init__(self, endpoint: str, runtime: Any, description: str) -> None:
        self.description = description
        self._client = DecisionClient(endpoint, client=runtime)

    def decide(self, request: DecisionRequest) -> Answer:
        started = time.perf_counter()
        try:
            decision = self._client.decide(request)
        except DecisionError as error:
            raise TargetError(f"{self.description}: decision {request.id!r}: {error}") from None
        return Answer(decision, (time.perf_counter() - started) * 1000)

    def close(self) -> None:
        pass


def local_target(port: int = LOCAL_PORT, prefix: str = LOCAL_PREFIX) -> RuntimeTarget:
    """`{prefix}-decision` on the local gateway (scripts/local_endpoints.py), addressed as scripts/smoke.py does."""
    url = f"http://127.0.0.1:{port}"
    session = boto3.Session(region_name=LOCAL_REGION, **LOCAL_CREDENTIALS)
    runtime = runtime_client(session=session, endpoint_url=url, max_attempts=RUNTIME_ATTEMPTS)
    return RuntimeTarget(f"{prefix}-decision", runtime, f"{prefix}-decision at {url}")


def aws_target(endpoint: str, region: str | None = None) -> RuntimeTarget:
    """A deployed decision endpoint, with the credentials and region boto3 finds (or `region`)."""
    runtime = runtime_client(session=boto3.Session(region_name=region), max_attempts=RUNTIME_ATTEMPTS)
    return RuntimeTarget(endpoint, runtime, f"endpoint {endpoint}")
