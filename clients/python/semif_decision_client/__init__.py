"""The SemIf decision endpoint's client for downstream services: `pip install ./clients/python` (boto3 only).

    from semif_decision_client import DecisionClient, DecisionRequest, Policy
"""

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
