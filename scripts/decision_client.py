"""A typed client for the decision endpoint, for downstream services.

    client = DecisionClient("semif-prod-decision")
    decision = client.decide(DecisionRequest.build(
        id="ticket-42", state="Customer says the parcel arrived broken.",
        question="What should support do next?",
        options={"refund": "Refund the order", "replace": "Send a replacement", "escalate": "Ask a human"}))
    action = decision.choose(Policy(threshold=0.6, fallback="escalate"))

Callers branch on the stable option ids they defined, never on model prose: the
endpoint scores exactly the options given and returns one probability per id.
Retries are botocore's (`Config(retries=...)`, standard or adaptive mode, which
covers throttling, SageMaker's own 5xx and connection errors); a container that
answers 503/429 (busy or loading) reaches the caller as a `ModelError`, which
botocore does not retry, so a small `needs-retry` hook asks botocore's loop to
retry those too, with capped, jittered exponential backoff.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

CONTENT_TYPE = "application/json"
RETRYABLE_MODEL_STATUS = frozenset({429, 503})  # the container's "busy or still loading, try again"
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 20.0
PROBABILITY_TOLERANCE = 1e-3


class DecisionError(Exception):
    """Base class: the call did not produce a usable decision."""


class DecisionRejectedError(DecisionError):
    """The request was refused: by the container (its JSON error's code and field) or by SageMaker."""

    def __init__(self, status: int | None, code: str, message: str, field: str | None = None) -> None:
        where = f" (field {field})" if field else ""
        super().__init__(f"{code}{where}: {message}" + (f" [HTTP {status}]" if status else ""))
        self.status, self.code, self.message, self.field = status, code, message, field


class DecisionUnavailableError(DecisionError):
    """No answer after botocore's retries: throttled, busy, unavailable or unreachable."""


class InvalidDecisionError(DecisionError):
    """The endpoint answered, but not with a decision about the options that were asked."""


@dataclass(frozen=True)
class Option:
    id: str
    description: str


@dataclass(frozen=True)
class DecisionRequest:
    """One decision to make: evidence (`state`), a criterion (`question`) and the options to score."""

    id: str
    state: Any  # text or any JSON value: the evidence the model reads
    question: str
    options: tuple[Option, ...]

    def __post_init__(self) -> None:
        ids = [option.id for option in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError(f"decision {self.id!r}: option ids must be unique, got {ids}")

    @classmethod
    def build(cls, id: str, state: Any, question: str, options: Mapping[str, str]) -> DecisionRequest:
        """From `{option_id: description}` (in the order the options should be shown)."""
        return cls(id, state, question, tuple(Option(k, v) for k, v in options.items()))

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> DecisionRequest:
        """From the endpoint's request JSON (`{"decision": {...}}` or the inner object)."""
        inner = payload.get("decision", payload)
        try:
            options = tuple(Option(str(o["id"]), str(o["description"])) for o in inner["options"])
            return cls(str(inner["id"]), inner["state"], str(inner["question"]), options)
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a decision request: missing or malformed {error}") from error

    def to_payload(self) -> dict[str, Any]:
        return {"decision": {
            "id": self.id, "state": self.state, "question": self.question,
            "options": [{"id": o.id, "description": o.description} for o in self.options],
        }}

    @property
    def option_ids(self) -> tuple[str, ...]:
        return tuple(option.id for option in self.options)


@dataclass(frozen=True)
class Policy:
    """Act on the best option only when it is clear enough; otherwise take `fallback`."""

    threshold: float  # minimum probability of the best option
    fallback: str  # the option id (or any stable id of the caller's) to use otherwise
    min_margin: float = 0.0  # minimum lead of the best option over the runner-up

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0 or not 0.0 <= self.min_margin <= 1.0:
            raise ValueError("threshold and min_margin must lie in [0, 1]")

    def apply(self, decision: Decision) -> str:
        confident = decision.probabilities[decision.best] >= self.threshold
        return decision.best if confident and decision.margin >= self.min_margin else self.fallback


@dataclass(frozen=True)
class Decision:
    """The endpoint's answer, keyed by the caller's option ids."""

    decision_id: str
    option_ids: tuple[str, ...]
    probabilities: Mapping[str, float]
    logits: Mapping[str, float]
    allowed_token_mass: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)  # timing, model, prompt: for logs

    @property
    def ranked(self) -> tuple[str, ...]:
        """Option ids, most probable first (ties keep the request's order)."""
        return tuple(sorted(self.option_ids, key=lambda i: -self.probabilities[i]))

    @property
    def best(self) -> str:
        return self.ranked[0]

    @property
    def margin(self) -> float:
        """Probability lead of the best option over the runner-up."""
        first, second = self.ranked[:2]
        return self.probabilities[first] - self.probabilities[second]

    def choose(self, policy: Policy) -> str:
        return policy.apply(self)


def parse_decision(request: DecisionRequest, body: bytes | str | Mapping[str, Any]) -> Decision:
    """Check the endpoint's answer against the request and type it; InvalidDecisionError says what's wrong."""
    try:
        data = json.loads(body) if isinstance(body, bytes | str) else body
    except ValueError as error:
        raise InvalidDecisionError(f"the response is not JSON: {error}") from error
    if not isinstance(data, Mapping):
        raise InvalidDecisionError(f"the response is not a JSON object: {str(data)[:200]}")
    try:
        ids = tuple(str(i) for i in data["option_ids"])
        probabilities = [float(p) for p in data["probabilities"]]
        logits = [float(x) for x in data.get("option_logits", [math.nan] * len(ids))]
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidDecisionError(f"the response lacks a well-formed {error}") from error
    if ids != request.option_ids:
        raise InvalidDecisionError(
            f"option ids {list(ids)} do not match the request's {list(request.option_ids)}")
    if not len(probabilities) == len(logits) == len(ids):
        raise InvalidDecisionError(
            f"{len(ids)} option ids but {len(probabilities)} probabilities and {len(logits)} logits")
    if any(not 0.0 <= p <= 1.0 for p in probabilities):
        raise InvalidDecisionError(f"probabilities outside [0, 1]: {probabilities}")
    total = sum(probabilities)
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        raise InvalidDecisionError(f"probabilities sum to {total:.6f}, not 1")
    if str(data.get("decision_id")) != request.id:
        raise InvalidDecisionError(
            f"decision_id {data.get('decision_id')!r} is not the request's {request.id!r}")
    mass = data.get("allowed_token_mass")
    return Decision(
        decision_id=request.id, option_ids=ids,
        probabilities=MappingProxyType(dict(zip(ids, probabilities, strict=True))),
        logits=MappingProxyType(dict(zip(ids, logits, strict=True))),
        allowed_token_mass=float(mass) if mass is not None else None,
        details=MappingProxyType({k: data[k] for k in ("timing", "model", "prompt") if k in data}),
    )


def _model_busy_retry(max_attempts: int) -> Callable[..., float | None]:
    """A `needs-retry` handler: a delay for a container's 503/429 ModelError, else None (botocore decides)."""

    def handler(response: Any = None, attempts: int = 1, **_: Any) -> float | None:
        if response is None or attempts >= max_attempts:
            return None
        _, parsed = response
        if parsed.get("Error", {}).get("Code") != "ModelError":
            return None
        if parsed.get("OriginalStatusCode") not in RETRYABLE_MODEL_STATUS:
            return None
        return random.uniform(0.0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempts - 1)))

    return handler


def runtime_client(*, session: boto3.Session | None = None, region_name: str | None = None,
                   endpoint_url: str | None = None, max_attempts: int = 5, retry_mode: str = "standard",
                   read_timeout_s: float = 70.0) -> Any:
    """A sagemaker-runtime client with botocore's retries (and the busy-container hook).

    The read timeout is above SageMaker's 60 s invocation limit, as AWS advises.
    """
    config = Config(retries={"mode": retry_mode, "total_max_attempts": max_attempts},
                    connect_timeout=5, read_timeout=read_timeout_s)
    client = (session or boto3.Session()).client("sagemaker-runtime", region_name=region_name,
                                                 endpoint_url=endpoint_url, config=config)
    client.meta.events.register("needs-retry.sagemaker-runtime.InvokeEndpoint",
                                _model_busy_retry(max_attempts))
    return client


def _rejection(error: ClientError) -> DecisionError:
    """Turn a ClientError into our errors, unwrapping the container's JSON error from a ModelError."""
    response: Mapping[str, Any] = error.response
    code = response.get("Error", {}).get("Code", "")
    message = response.get("Error", {}).get("Message", str(error))
    if code == "ValidationError":  # e.g. "Endpoint X of account Y not found."
        return DecisionRejectedError(400, code, message)
    if code != "ModelError":
        return DecisionUnavailableError(f"{code}: {message}")
    status = response.get("OriginalStatusCode")
    original = response.get("OriginalMessage", "")
    try:
        inner = json.loads(original)["error"]
        return DecisionRejectedError(status, str(inner.get("code", "error")),
                                     str(inner.get("message", original)), inner.get("field"))
    except (ValueError, KeyError, TypeError, AttributeError):
        if status in RETRYABLE_MODEL_STATUS:
            return DecisionUnavailableError(f"ModelError {status} after retries: {original or message}")
        return DecisionRejectedError(status, "model_error", original or message)


class DecisionClient:
    """`decide()` against one decision endpoint (or, in shared hosting, its inference component); thread-safe as
    boto3 clients are."""

    def __init__(self, endpoint_name: str, *, client: Any = None, inference_component_name: str | None = None,
                 **client_options: Any) -> None:
        self.endpoint_name = endpoint_name
        self.inference_component_name = inference_component_name
        self._client = client if client is not None else runtime_client(**client_options)

    def decide(self, decision: DecisionRequest | Mapping[str, Any], *,
               custom_attributes: str | None = None) -> Decision:
        request = decision if isinstance(decision, DecisionRequest) \
            else DecisionRequest.from_payload(decision)
        extra = {"CustomAttributes": custom_attributes} if custom_attributes else {}
        if self.inference_component_name:
            extra["InferenceComponentName"] = self.inference_component_name
        try:
            response = self._client.invoke_endpoint(
                EndpointName=self.endpoint_name, ContentType=CONTENT_TYPE, Accept=CONTENT_TYPE,
                Body=json.dumps(request.to_payload()).encode(), **extra)
        except ClientError as error:
            raise _rejection(error) from error
        except BotoCoreError as error:
            raise DecisionUnavailableError(f"{self.endpoint_name}: {error}") from error
        return parse_decision(request, response["Body"].read())
