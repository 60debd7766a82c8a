"""Where a JSON Lines request goes: a SageMaker runtime endpoint (AWS or the local gateway) or a container.

Each target sends one request body and returns the answer body, or raises ChunkFailure with the error code
every line of that request gets. A fatal failure (unknown endpoint, no credentials, nothing listening, a
container that does not take JSON Lines) would fail every request the same way, so it stops the run.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from semif_decision_client import DecisionRejectedError, rejection

from ..common.transport import RetryingTransport

MEDIA_TYPE = "application/jsonlines"
REQUEST_TIMEOUT_S = 70.0  # above SageMaker's 60 s invocation limit, as the decision client's
ATTEMPTS = 3  # tries per request, retries included (`semif batch --attempts`)
# Codes that every request would get again: stop rather than fail the whole file line by line.
FATAL_CODES = frozenset({"ValidationError", "AccessDeniedException", "UnrecognizedClientException",
                         "InvalidSignatureException", "ExpiredTokenException", "unsupported_media_type",
                         "not_found", "method_not_allowed", "body_too_large"})
HINTS = {"body_too_large": " (lower --max-request-bytes)",
         "unsupported_media_type": " (the adapter is older than JSON Lines support)"}


class ChunkFailure(Exception):  # noqa: N818 (an outcome for the lines of one request)
    def __init__(self, code: str, message: str, *, fatal: bool = False) -> None:
        super().__init__(f"{code}: {message}{HINTS.get(code, '') if fatal else ''}")
        self.code, self.message, self.fatal = code, message, fatal


def _failure(code: str, message: str) -> ChunkFailure:
    return ChunkFailure(code, message, fatal=code in FATAL_CODES)


class RuntimeTarget:
    """`InvokeEndpoint` with JSON Lines through a sagemaker-runtime client (thread-safe, as boto3 clients are).

    The client's retries (semif_decision_client.runtime_client) cover throttling and a busy container.
    """

    def __init__(self, client: Any, endpoint_name: str) -> None:
        self.client = client
        self.name = endpoint_name

    def invoke(self, body: bytes) -> bytes:
        try:
            response = self.client.invoke_endpoint(EndpointName=self.name, ContentType=MEDIA_TYPE,
                                                   Accept=MEDIA_TYPE, Body=body)
            return response["Body"].read()
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in FATAL_CODES:
                raise _failure(code, error.response["Error"].get("Message", str(error))) from error
            refused = rejection(error)
            if isinstance(refused, DecisionRejectedError):
                raise _failure(refused.code, refused.message) from error
            raise ChunkFailure("unavailable", str(refused)) from error
        except ReadTimeoutError as error:
            raise ChunkFailure("timeout", f"no answer within the read timeout: {error}") from error
        except BotoCoreError as error:  # no credentials or region, nothing listening
            raise ChunkFailure("unreachable", f"endpoint {self.name}: {error}", fatal=True) from error


def _error_of(response: httpx.Response) -> tuple[str, str]:
    try:
        error = json.loads(response.content)["error"]
        return str(error["code"]), str(error.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return "model_error", response.text[:300]


class ContainerTarget:
    """`POST URL/invocations` straight to a decision container; a busy one is asked again (common/transport.py)."""

    def __init__(self, url: str, *, attempts: int = 3, timeout_s: float = REQUEST_TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.url = url.rstrip("/")
        self.name = self.url
        self.attempts = attempts
        self.timeout = httpx.Timeout(timeout_s, connect=5.0)
        self.sleep = sleep
        self._local = threading.local()  # one client per worker thread

    def _client(self) -> httpx.Client:
        if not hasattr(self._local, "client"):
            self._local.client = httpx.Client(timeout=self.timeout,
                                              transport=RetryingTransport(self.attempts, sleep=self.sleep))
        return self._local.client

    def invoke(self, body: bytes) -> bytes:
        try:
            response = self._client().post(f"{self.url}/invocations", content=body,
                                           headers={"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE})
        except httpx.TimeoutException as error:
            raise ChunkFailure("timeout", f"{self.url}: {error!r}") from error
        except httpx.TransportError as error:
            raise ChunkFailure("unreachable", f"{self.url}: {error}", fatal=True) from error
        if response.status_code == 200:
            return response.content
        code, message = _error_of(response)
        if response.status_code in (404, 405):
            code = "not_found"
            message = f"{self.url}/invocations answered {response.status_code}: is this a decision container?"
        raise _failure(code, f"HTTP {response.status_code}: {message}")
