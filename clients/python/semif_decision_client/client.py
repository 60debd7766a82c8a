"""A typed client for the decision endpoint, for downstream services (needs boto3 only).

    client = DecisionClient("semif-prod-decision")
    decision = client.decide(DecisionRequest.build(
        id="ticket-42", state="Customer says the parcel arrived broken.",
        question="What should support do next?",
        options={"refund": "Refund the order", "replace": "Send a replacement", "escalate": "Ask a human"}))
    action = decision.choose(Policy(threshold=0.6, fallback="escalate", on_warning="fallback"))

Callers branch on the stable option ids they defined, never on model prose: the
endpoint scores exactly the options given and returns one probability per id.
Retries are botocore's (`Config(retries=...)`, standard or adaptive mode, which
covers throttling, SageMaker's own 5xx and connection errors); a container that
answers 503/429 (busy or loading) reaches the caller as a `ModelError`, which
botocore does not retry, so a small `needs-retry` hook asks botocore's loop to
retry those too, with capped, jittered exponential backoff. The same hook waits out
an inference component scaled to zero: SageMaker answers `ValidationError` (no
capacity) until a copy is up again (minutes), so that error is retried too, for up
to `capacity_attempts` attempts (about ten minutes by default), as AWS's
scale-to-zero guide asks of clients.
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
NO_CAPACITY = "no capacity"  # in SageMaker's ValidationError for an inference component scaled to zero
CAPACITY_ATTEMPTS = 35  # backoff capped at BACKOFF_MAX_S: about ten minutes, an instance start and a model load
PROBABILITY_TOLERANCE = 1e-3
# What the adapter's schema accepts (container/semif_adapter/doors/request_schema.py and calibration.py), written out so
# that the client needs boto3 alone; tests/packaging/test_client_contract.py keeps both sides equal. These are
# quick local checks (a typo fails before a round trip): the endpoint validates every request itself.
REQUEST_FIELDS = frozenset({"decision", "scoring", "temperature", "debias"})
DECISION_FIELDS = frozenset({"id", "state", "question", "options"})
OPTION_FIELDS = frozenset({"id", "description"})
SCORING_METHODS = ("letters", "likelihood", "pmi")
DEBIAS_MODES = ("none", "permute")
# Warning codes that make `Policy(on_warning="fallback")` take the fallback unless told otherwise: the scores
# are not worth acting on (letters: little probability on the option letters; the top two nearly tied).
DEFAULT_FALLBACK_WARNINGS = frozenset({"low_option_mass", "near_tie"})
POLICY_WARNING_MODES = ("ignore", "fallback")


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


def _refuse_unknown(given: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; the endpoint accepts {sorted(allowed)}")


@dataclass(frozen=True)
class DecisionRequest:
    """One decision to make: evidence (`state`), a criterion (`question`) and the options to score.

    `scoring`, `temperature` and `debias` are sent when set; None leaves the endpoint's default
    (`SEMIF_SCORING`, 1, "none").
    """

    id: str
    state: Any  # text or any JSON value: the evidence the model reads
    question: str
    options: tuple[Option, ...]
    scoring: str | None = None  # "letters", "likelihood" or "pmi"
    temperature: float | None = None  # > 0: probabilities = softmax(scores / temperature)
    debias: str | None = None  # "none" or "permute"

    def __post_init__(self) -> None:
        ids = [option.id for option in self.options]
        if len(set(ids)) != len(ids):
            raise ValueError(f"decision {self.id!r}: option ids must be unique, got {ids}")
        if self.scoring is not None and self.scoring not in SCORING_METHODS:
            raise ValueError(f"decision {self.id!r}: scoring must be one of {list(SCORING_METHODS)}, "
                             f"got {self.scoring!r}")
        if self.debias is not None and self.debias not in DEBIAS_MODES:
            raise ValueError(f"decision {self.id!r}: debias must be one of {list(DEBIAS_MODES)}, got {self.debias!r}")
        temperature = self.temperature
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, int | float)
                                        or not math.isfinite(temperature) or temperature <= 0):
            raise ValueError(f"decision {self.id!r}: temperature must be a finite number > 0, got {temperature!r}")

    @classmethod
    def build(cls, id: str, state: Any, question: str, options: Mapping[str, str], *, scoring: str | None = None,
              temperature: float | None = None, debias: str | None = None) -> DecisionRequest:
        """From `{option_id: description}` (in the order the options should be shown)."""
        return cls(id, state, question, tuple(Option(k, v) for k, v in options.items()),
                   scoring=scoring, temperature=temperature, debias=debias)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> DecisionRequest:
        """From the endpoint's request JSON (`{"decision": {...}, ...}` or the inner object).

        Unknown fields are refused, as the endpoint refuses them: a typo such as `debais` is an error here,
        not a knob that silently does nothing.
        """
        outer: Mapping[str, Any] = payload if "decision" in payload else {"decision": payload}
        _refuse_unknown(outer, REQUEST_FIELDS, "decision request")
        inner = outer["decision"]
        try:
            _refuse_unknown(inner, DECISION_FIELDS, "decision")
            for index, option in enumerate(inner["options"]):
                _refuse_unknown(option, OPTION_FIELDS, f"decision.options[{index}]")
            options = tuple(Option(str(o["id"]), str(o["description"])) for o in inner["options"])
            return cls(str(inner["id"]), inner["state"], str(inner["question"]), options,
                       scoring=outer.get("scoring"), temperature=outer.get("temperature"),
                       debias=outer.get("debias"))
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a decision request: missing or malformed {error}") from error

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"decision": {
            "id": self.id, "state": self.state, "question": self.question,
            "options": [{"id": o.id, "description": o.description} for o in self.options],
        }}
        knobs = {"scoring": self.scoring, "temperature": self.temperature, "debias": self.debias}
        payload.update({key: value for key, value in knobs.items() if value is not None})
        return payload

    @property
    def option_ids(self) -> tuple[str, ...]:
        return tuple(option.id for option in self.options)


@dataclass(frozen=True)
class Policy:
    """Act on the best option only when it is clear enough; otherwise take `fallback`.

    With `on_warning="fallback"`, an answer carrying any of `warning_codes` (default: `low_option_mass`,
    `near_tie`) also takes the fallback, whatever its probabilities: the endpoint itself says the scores are
    weak. `on_warning="ignore"` (the default) decides on probabilities alone.
    """

    threshold: float  # minimum probability of the best option
    fallback: str  # the option id (or any stable id of the caller's) to use otherwise
    min_margin: float = 0.0  # minimum lead of the best option over the runner-up
    on_warning: str = "ignore"  # or "fallback"
    warning_codes: frozenset[str] = DEFAULT_FALLBACK_WARNINGS  # the codes that trigger the fallback

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0 or not 0.0 <= self.min_margin <= 1.0:
            raise ValueError("threshold and min_margin must lie in [0, 1]")
        if self.on_warning not in POLICY_WARNING_MODES:
            raise ValueError(f"on_warning must be one of {list(POLICY_WARNING_MODES)}, got {self.on_warning!r}")
        if isinstance(self.warning_codes, str):
            raise ValueError("warning_codes must be a collection of codes, not one string")
        object.__setattr__(self, "warning_codes", frozenset(self.warning_codes))

    def apply(self, decision: Decision) -> str:
        if self.on_warning == "fallback" and self.warning_codes & set(decision.warnings):
            return self.fallback
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
    scoring: str | None = None  # the method that produced the scores (None: an endpoint that does not say)
    warnings: tuple[str, ...] = ()  # stable codes, e.g. "low_option_mass", "near_tie"
    calibration: Mapping[str, Any] | None = None  # {"method", "parameters", "sha256"} when the endpoint applies one
    raw: Mapping[str, Any] = field(default_factory=dict)  # the whole answer, for audits and refits

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
    scoring, warnings, calibration = _quality_fields(request, data)
    mass = data.get("allowed_token_mass")
    return Decision(
        decision_id=request.id, option_ids=ids,
        probabilities=MappingProxyType(dict(zip(ids, probabilities, strict=True))),
        logits=MappingProxyType(dict(zip(ids, logits, strict=True))),
        allowed_token_mass=float(mass) if mass is not None else None,
        details=MappingProxyType({k: data[k] for k in ("timing", "model", "prompt") if k in data}),
        scoring=scoring, warnings=warnings, calibration=calibration, raw=MappingProxyType(dict(data)),
    )


def _quality_fields(request: DecisionRequest,
                    data: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...], Mapping[str, Any] | None]:
    """`scoring`, `warnings` and `calibration` of an answer, checked: a method other than the one asked is refused."""
    scoring = data.get("scoring")
    if scoring is not None and not isinstance(scoring, str):
        raise InvalidDecisionError(f"scoring is not a string: {scoring!r}")
    if request.scoring is not None and scoring is not None and scoring != request.scoring:
        raise InvalidDecisionError(f"asked for scoring {request.scoring!r}, the endpoint answered with {scoring!r}")
    warnings = data.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(code, str) for code in warnings):
        raise InvalidDecisionError(f"warnings is not a list of codes: {warnings!r}")
    calibration = data.get("calibration")
    if calibration is not None and not isinstance(calibration, Mapping):
        raise InvalidDecisionError(f"calibration is not an object: {calibration!r}")
    return scoring, tuple(warnings), MappingProxyType(dict(calibration)) if calibration is not None else None


def no_capacity(parsed: Mapping[str, Any]) -> bool:
    """SageMaker's answer to a request for an inference component with no copy (scaled to zero)."""
    error = parsed.get("Error", {})
    return error.get("Code") == "ValidationError" and NO_CAPACITY in str(error.get("Message", "")).lower()


def _model_busy_retry(max_attempts: int, capacity_attempts: int = CAPACITY_ATTEMPTS) -> Callable[..., float | None]:
    """A `needs-retry` handler: a delay for a container's 503/429 ModelError, or for a component scaled to zero
    (its own, larger budget of attempts), else None (botocore decides)."""

    def handler(response: Any = None, attempts: int = 1, **_: Any) -> float | None:
        if response is None:
            return None
        _, parsed = response
        backoff = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempts - 1))
        if no_capacity(parsed):
            return random.uniform(backoff / 2, backoff) if attempts < capacity_attempts else None
        if attempts >= max_attempts or parsed.get("Error", {}).get("Code") != "ModelError":
            return None
        if parsed.get("OriginalStatusCode") not in RETRYABLE_MODEL_STATUS:
            return None
        return random.uniform(0.0, backoff)

    return handler


def as_boto3_session(session: Any = None) -> Any:
    """What to build clients from: the default chain (None), a boto3 Session (or anything with its `client`), or
    the sagemaker SDK's session (`sagemaker.core.helper.session_helper.Session`), whose credentials and region
    are its `.boto_session`.

    sagemaker-core's resources (`Endpoint.get(name, session=...)`) take a boto3 Session themselves, so code that
    uses the SDK passes the same session here and both sign alike.
    """
    if session is None:
        return boto3.Session()
    boto_session = getattr(session, "boto_session", session)
    if not callable(getattr(boto_session, "client", None)):
        raise TypeError(f"session must be a boto3.Session or a sagemaker Session, got {type(session).__name__}")
    return boto_session


def runtime_client(*, session: Any = None, region_name: str | None = None,
                   endpoint_url: str | None = None, max_attempts: int = 5, retry_mode: str = "standard",
                   read_timeout_s: float = 70.0, capacity_attempts: int = CAPACITY_ATTEMPTS) -> Any:
    """A sagemaker-runtime client with botocore's retries (and the busy-container and scaled-to-zero hook).

    `session`: see `as_boto3_session`. The read timeout is above SageMaker's 60 s invocation limit, as AWS advises.
    """
    config = Config(retries={"mode": retry_mode, "total_max_attempts": max_attempts},
                    connect_timeout=5, read_timeout=read_timeout_s)
    client = as_boto3_session(session).client("sagemaker-runtime", region_name=region_name,
                                              endpoint_url=endpoint_url, config=config)
    client.meta.events.register("needs-retry.sagemaker-runtime.InvokeEndpoint",
                                _model_busy_retry(max_attempts, capacity_attempts))
    return client


def rejection(error: ClientError) -> DecisionError:
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
            raise rejection(error) from error
        except BotoCoreError as error:
            raise DecisionUnavailableError(f"{self.endpoint_name}: {error}") from error
        return parse_decision(request, response["Body"].read())
