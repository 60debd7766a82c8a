"""Failures a caller is told about: each carries its own HTTP status and stable code.

The contracts (SemIf, System One) render these in their own shapes; nothing maps exception types to statuses in a
ladder. Anything that is not a `ServiceError` is a fault of ours: a 500 with the request id, logged.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A failure with a status and a code a caller can branch on; `field` names the offending part, if one."""

    status = 500
    code = "internal_error"
    retry_after: int | None = None  # seconds, for the Retry-After header of a retryable refusal

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class RequestError(ServiceError, ValueError):
    """A client mistake: a 4xx JSON error naming the field."""

    def __init__(self, code: str, message: str, field: str | None = None, status: int = 400) -> None:
        super().__init__(message, field)
        self.code, self.status = code, status


class PromptTooLongError(ServiceError, ValueError):
    """The prompt does not fit the context; never truncated silently. `field` names the culprit."""

    status, code = 413, "prompt_too_long"

    def __init__(self, needed: int, context: int, detail: str, field: str = "decision", *,
                 exact: bool = True) -> None:
        at_least = "" if exact else "at least "
        super().__init__(f"prompt needs {at_least}{needed} tokens of context ({detail}) but the context holds "
                         f"{context}", field)
        self.needed, self.context = needed, context


class QueueFullError(ServiceError):
    """The bounded queue is full: retry soon, here or elsewhere."""

    status, code, retry_after = 503, "queue_full", 1


class NotReadyError(ServiceError):
    """The model is not loaded and warmed up yet."""

    status, code, retry_after = 503, "not_ready", 5

    def __init__(self, message: str = "the model is loading or warming up") -> None:
        super().__init__(message)


class ShuttingDownError(ServiceError):
    """SIGTERM arrived: no new work, and queued work that cannot finish in time is handed back."""

    status, code, retry_after = 503, "shutting_down", 1

    def __init__(self, message: str = "this instance is stopping; retry on another") -> None:
        super().__init__(message)
