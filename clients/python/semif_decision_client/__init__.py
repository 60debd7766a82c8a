"""The SemIf decision endpoint's client for downstream services: `pip install ./clients/python` (boto3 only).

    from semif_decision_client import DecisionClient, DecisionRequest, Policy

The SageMaker transport of the System One SDK and of the openai SDK's Decisions API (`SageMakerTransport`,
`AsyncSageMakerTransport`) needs httpx2, the optional extra `semif-decision-client[systemone]` or `[openai]`: it is
imported when first asked for, so boto3 alone still serves everything else.
"""

from typing import TYPE_CHECKING, Any

from .client import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    CONTENT_TYPE,
    DEBIAS_MODES,
    DEFAULT_FALLBACK_WARNINGS,
    RETRYABLE_MODEL_STATUS,
    SCORING_METHODS,
    Decision,
    DecisionClient,
    DecisionError,
    DecisionRejectedError,
    DecisionRequest,
    DecisionUnavailableError,
    InvalidDecisionError,
    Option,
    Policy,
    as_boto3_session,
    parse_decision,
    rejection,
    runtime_client,
)

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_MAX_S",
    "CONTENT_TYPE",
    "DEBIAS_MODES",
    "DEFAULT_FALLBACK_WARNINGS",
    "RETRYABLE_MODEL_STATUS",
    "SCORING_METHODS",
    "Decision",
    "DecisionClient",
    "DecisionError",
    "DecisionRejectedError",
    "DecisionRequest",
    "DecisionUnavailableError",
    "InvalidDecisionError",
    "Option",
    "Policy",
    "as_boto3_session",
    "parse_decision",
    "rejection",
    "runtime_client",
]

if TYPE_CHECKING:
    from .sdk_transport import AsyncSageMakerTransport as AsyncSageMakerTransport
    from .sdk_transport import SageMakerTransport as SageMakerTransport

TRANSPORT_NAMES = frozenset({"SageMakerTransport", "AsyncSageMakerTransport"})


def __getattr__(name: str) -> Any:
    """The transports, imported on first use (ImportError naming the extra when httpx2 is missing)."""
    if name in TRANSPORT_NAMES:
        from . import sdk_transport

        return getattr(sdk_transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
