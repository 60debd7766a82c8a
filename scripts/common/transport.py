"""The one retrying HTTP transport of the tools that call a decision container by URL (evaluate, batch).

A container that is loading or busy says so with 503 (SemIf's /invocations, with Retry-After), 429, or 529
(System One's /v1/systemone); such an answer is asked again after its Retry-After (capped), or else after a
jittered exponential backoff, as the decision client's botocore hook does for SageMaker's ModelError. Anything
else (a connection error, a timeout, any other status, or the last busy answer) goes back to the caller, who
decides. Built on tenacity: httpx's own `retries=` only repeats a failed connect. The transport notes when the
answering attempt started (`ATTEMPT_STARTED`), so a caller can time the round trip that answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt, wait_random_exponential

from semif_decision_client import BACKOFF_BASE_S, BACKOFF_MAX_S, RETRYABLE_MODEL_STATUS

BUSY_STATUSES = RETRYABLE_MODEL_STATUS | {529}  # 529: System One's "overloaded"
ATTEMPT_STARTED = "attempt_started"  # response.extensions key: time.perf_counter() when the answering try began


def _busy(response: httpx.Response) -> bool:
    return response.status_code in BUSY_STATUSES


def retry_after_s(response: httpx.Response) -> float | None:
    """The answer's Retry-After in seconds, when it gives one as a number (an HTTP date is not honoured)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class RetryingTransport(httpx.BaseTransport):
    """httpx's transport, asking a busy container again: `attempts` tries in all, each wait at most `max_wait_s`."""

    def __init__(self, attempts: int = 3, *, max_wait_s: float = BACKOFF_MAX_S,
                 sleep: Callable[[float], None] = time.sleep, inner: httpx.BaseTransport | None = None) -> None:
        self._inner = inner or httpx.HTTPTransport()
        self._backoff = wait_random_exponential(multiplier=BACKOFF_BASE_S, max=max_wait_s)
        self._max_wait_s = max_wait_s
        self._policy = Retrying(stop=stop_after_attempt(attempts), retry=retry_if_result(_busy), wait=self._wait,
                                sleep=sleep, before_sleep=self._discard, retry_error_callback=self._last_answer)

    def _wait(self, state: RetryCallState) -> float:
        assert state.outcome is not None
        after = retry_after_s(state.outcome.result())
        return min(self._max_wait_s, after) if after is not None else self._backoff(state)

    @staticmethod
    def _discard(state: RetryCallState) -> None:
        """The busy answer is not the caller's: release its connection before the next try."""
        assert state.outcome is not None
        state.outcome.result().close()

    @staticmethod
    def _last_answer(state: RetryCallState) -> httpx.Response:
        assert state.outcome is not None
        response: httpx.Response = state.outcome.result()
        return response

    def _attempt(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        response = self._inner.handle_request(request)
        response.extensions = {**response.extensions, ATTEMPT_STARTED: started}
        return response

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response: httpx.Response = self._policy(self._attempt, request)  # tenacity keeps each call's state apart
        return response

    def close(self) -> None:
        self._inner.close()
