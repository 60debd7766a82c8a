"""The System One front: an HTTPS API with Bearer keys in front of a decision endpoint, as the CDK app deploys it
(API Gateway, a Lambda authorizer and a forwarding Lambda: `stacks/https_api.py`) and as the local gateway serves
it (`semif local --api-keys FILE`). It serves System One (`POST /v1/systemone`) and OpenAI's Decisions API
(`POST /v1/decisions`), with `GET /v1/models` for both; what it answers itself speaks the shape of the route called.

Pure logic, no AWS globals, so that both run the same code and it is tested here:
- `admit`: who may call. A request without `Authorization` is 401, one whose header is not `Bearer <key>` 403, a key
  that is not stored 401 (API Gateway's own order: no identity source, an authorizer's Deny, its "Unauthorized"),
  all `authentication_error`. The keys are checked by the caller's checker
  (`semif_adapter.doors.api_keys.ApiKeys`: hashed, compared in constant time, never logged). On AWS these refusals
  are API Gateway's, whose templates cannot tell the route, so they carry both shapes (`gateway_error`).
- `forward`: the call through `InvokeEndpoint` (`invoke_wire`), answering exactly what the container answers on
  its own route (status and body) and SageMaker's own errors in the route's shape with a status the SDKs retry only
  when a retry can help. Limits are enforced before SageMaker sees anything: the body as sent, the body
  decoded, and the answer the front can carry back (`Limits`; on AWS, what a Lambda invocation holds).
- `as_systemone`: SageMaker routes only `/invocations`, where the container reads a body as System One when it is a
  JSON object with `questions` (and neither of SemIf's `decision`/`decisions`). A body it would not read so (not JSON,
  not an object, no `questions`, another Content-Type) is answered here as the container's `/v1/systemone` answers
  it (415, or 422 with `detail[]`, parsed by the container's own strict parser, passed in as `parse`), and SemIf's keys
  are dropped, as System One ignores unknown fields (and `input` beside a list of `questions`, which is OpenAI's).
- `as_openai`: the same for `/v1/decisions`, whose bodies `/invocations` reads as OpenAI's when they are a JSON object
  with `input` and a list of `questions`; the others get the 400 the container's `/v1/decisions` gives them.
- `KeyRecord`: how `semif keys` stores a key (its hash, never the key) and the authorizer reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Protocol

from botocore.exceptions import (
    BotoCoreError,
    ConnectTimeoutError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from .invoke_wire import (
    CONTENT_TYPE,
    DECISIONS_PATH,
    REQUEST_IDS,
    SYSTEMONE_PATH,
    Answer,
    Call,
    RefusedError,
    Target,
    decoded,
    error_document,
    invoke,
    openai_error,
)

MIB = 2**20
# Lambda's synchronous invocation carries at most 6 MiB of event (and of answer): a body as sent arrives base64-
# encoded in the event (4/3 of its size, beside the headers), and the answer leaves as a JSON string (escaped), so
# 4 MiB each way leaves room for both.
MAX_SENT_BYTES = 4 * MIB
MAX_ANSWER_BYTES = 4 * MIB
RETRY_AFTER_S = 1
DEFAULT_TIMEOUT_S = 29  # API Gateway's integration timeout unless its quota is raised (then up to SageMaker's 60)
SAGEMAKER_REQUEST_ID = "x-amzn-sagemaker-request-id"
UNAUTHORIZED_MESSAGE = "the API key is missing or not valid: send Authorization: Bearer <key>"
DENIED_MESSAGE = "the Authorization header holds no Bearer key: send Authorization: Bearer <key>"
# The access log's fields, the same locally and in API Gateway's access log (stacks/https_api.py): the key's id,
# never the key.
ACCESS_LOG_FIELDS = ("requestId", "keyId", "ip", "method", "path", "status", "latencyMs", "error")
SEMIF_KEYS = frozenset({"decision", "decisions"})  # what makes /invocations answer in SemIf's contract
REQUIRED = ("state", "questions")  # System One's required fields, in the order its schema reports them missing
# OpenAI's required fields in the order the container checks them: the types it takes, pydantic's word for another
OPENAI_FIELDS: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("model", str, "Input should be a valid string"), ("input", (str, list), "Input should be a valid string"),
    ("questions", list, "Input should be a valid list"))
# The container's OpenAI codes for a body it cannot read (`semif_adapter.doors.openai_schema`, `request_body`)
UNREADABLE_CODES = {413: "body_too_large", 415: "unsupported_encoding"}
Parse = Callable[[bytes], Any]  # the container's strict JSON parser (`semif_adapter.doors.strict_json.load_json`)


class Verdict(Protocol):
    """A key checker's answer (`semif_adapter.doors.api_keys.Verdict`, a frozen dataclass: read-only here too)."""

    @property
    def allowed(self) -> bool: ...

    @property
    def key_id(self) -> str | None: ...

    @property
    def missing(self) -> bool: ...


class Admission(Enum):
    ALLOWED = "allowed"
    NO_HEADER = "no_header"  # API Gateway: no identity source, 401 before the authorizer runs
    NOT_BEARER = "not_bearer"  # the authorizer's Deny: 403
    WRONG_KEY = "wrong_key"  # the authorizer's "Unauthorized": 401


REFUSALS = {Admission.NO_HEADER: (401, UNAUTHORIZED_MESSAGE), Admission.WRONG_KEY: (401, UNAUTHORIZED_MESSAGE),
            Admission.NOT_BEARER: (403, DENIED_MESSAGE)}


def admit(authorization: str | None, check: Callable[[str | None], Verdict]) -> tuple[Admission, str | None]:
    """Whether a request may pass, and the id of its key."""
    if authorization is None:
        return Admission.NO_HEADER, None
    verdict = check(authorization)
    if verdict.allowed:
        return Admission.ALLOWED, verdict.key_id
    return (Admission.NOT_BEARER if verdict.missing else Admission.WRONG_KEY), None


def gateway_error(status: int | None, message: str, error_type: str) -> bytes:
    """API Gateway's own answer: its templates substitute variables and cannot tell the route, so the document
    carries both shapes, System One's `detail` and OpenAI's `error` (each SDK reads its own)."""
    return json.dumps({"detail": {"error_type": error_type, "message": message},
                       **openai_error(message, error_type, status)}).encode()


def refusal(admission: Admission) -> Answer:
    """A refused key, as API Gateway answers it (both shapes)."""
    status, message = REFUSALS[admission]
    return status, {"content-type": CONTENT_TYPE}, gateway_error(status, message, "authentication_error")


def read_timeout_s(integration_timeout_s: float) -> float:
    """The runtime client's read timeout under an integration timeout: a second less, so that a slow decision is the
    front's own System One 504 rather than API Gateway's."""
    return max(0.5, float(integration_timeout_s) - 1)


@dataclass(frozen=True)
class Limits:
    """What the front accepts and returns: the body as sent, the body once decoded (the container's own
    SEMIF_MAX_BODY_BYTES: a larger one would only be refused there), the answer it can carry back."""

    max_decoded_bytes: int
    max_sent_bytes: int = MAX_SENT_BYTES
    max_answer_bytes: int = MAX_ANSWER_BYTES


def _error(status: int, message: str, error_type: str | None = None, retry_after: int | None = None,
           path: str = SYSTEMONE_PATH) -> Answer:
    headers = {"content-type": CONTENT_TYPE}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    return status, headers, error_document(status, message, error_type, path)


def _openai(status: int, message: str, param: str | None, code: str) -> Answer:
    """The container's own OpenAI error, as its `/v1/decisions` words it."""
    document = openai_error(message, "invalid_request_error", status, param, code)
    return status, {"content-type": CONTENT_TYPE}, json.dumps(document, ensure_ascii=False).encode()


def _invalid(*details: tuple[list[Any], str, str]) -> Answer:
    """The container's 422: `{"detail": [{"loc": ["body", ...], "msg", "type"}]}`."""
    document = {"detail": [{"loc": ["body", *loc], "msg": msg, "type": kind} for loc, msg, kind in details]}
    return 422, {"content-type": CONTENT_TYPE}, json.dumps(document, ensure_ascii=False).encode()


@dataclass(frozen=True)
class Unreadable:
    """Why a body cannot be sent on as it is: the container's status, message, field and code for it."""

    status: int
    message: str
    field: str | None = None
    code: str = "invalid_request"


def _document(call: Call, parse: Parse, max_decoded: int) -> tuple[bytes, Any] | Unreadable:
    """The body decoded and parsed (with the container's strict parser), or why not."""
    media_type = call.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != CONTENT_TYPE:
        return Unreadable(415, f"Content-Type must be {CONTENT_TYPE}, not {media_type or 'missing'!r}",
                          "Content-Type", "unsupported_media_type")
    try:
        body = decoded(call.body, call.headers.get("content-encoding"), max_decoded)
    except RefusedError as refused:
        return Unreadable(refused.status, str(refused), None, UNREADABLE_CODES.get(refused.status, "invalid_request"))
    try:
        return body, parse(body)
    except ValueError as error:  # the parser's RequestError: its code, message and field, as the container says them
        return Unreadable(400, getattr(error, "message", str(error)), getattr(error, "field", None),
                          getattr(error, "code", "invalid_json"))


def _sent_on(call: Call, body: bytes) -> Call:
    return Call(call.method, call.path, {k: v for k, v in call.headers.items() if k != "content-encoding"}, body)


def as_systemone(call: Call, parse: Parse, max_decoded: int) -> Call | Answer:
    """A `POST /v1/systemone` call as `/invocations` reads it as System One (decoded), or the container's answer to
    a body it would not read so."""
    read = _document(call, parse, max_decoded)
    if isinstance(read, Unreadable):
        if read.status != 400:
            return _error(read.status, read.message)
        return _invalid(([read.field] if read.field else [], read.message, read.code))
    body, document = read
    if not isinstance(document, dict):
        return _invalid(([], "Input should be a valid dictionary", "dict_type"))
    missing = [name for name in REQUIRED if name not in document]
    if missing:
        return _invalid(*(([name], "Field required", "missing") for name in missing))
    dropped = SEMIF_KEYS | ({"input"} if isinstance(document["questions"], list) else set())
    if dropped & document.keys():
        body = json.dumps({k: v for k, v in document.items() if k not in dropped}, ensure_ascii=False).encode()
    return _sent_on(call, body)


def _openai_problem(document: dict[str, Any]) -> tuple[str, str, str]:
    """The problem the container's `/v1/decisions` names in a body `/invocations` would not read as OpenAI's (no
    `input`, or `questions` not a list), in its words: (param, message, code). It names the problem with the longest
    `param`, the first among equals (`openai_schema.validate`); of the top-level ones checked here, so a body that
    also has problems deeper inside may be told of another one than the container would name."""
    problems = [(name, "Field required", "missing_required_parameter") if name not in document
                else (name, message, "invalid_value") for name, types, message in OPENAI_FIELDS
                if name not in document or not isinstance(document[name], types)]
    return max(problems, key=lambda problem: len(problem[0]), default=("questions", "Input should be a valid list",
                                                                        "invalid_value"))


def as_openai(call: Call, parse: Parse, max_decoded: int) -> Call | Answer:
    """A `POST /v1/decisions` call as `/invocations` reads it as OpenAI's (decoded), or the container's answer to a
    body it would not read so (a JSON object with `input` and a list of `questions` is read so)."""
    read = _document(call, parse, max_decoded)
    if isinstance(read, Unreadable):
        return _openai(read.status, read.message, read.field, read.code)
    body, document = read
    if not isinstance(document, dict):
        return _openai(400, "the request body must be a JSON object", None, "invalid_type")
    if "input" in document and isinstance(document.get("questions"), list):
        return _sent_on(call, body)
    param, message, code = _openai_problem(document)
    return _openai(400, f"{param}: {message}", param, code)


def _sagemaker_call(client: Any, target: Target, call: Call, limits: Limits, timeout_s: float) -> Answer:
    """`invoke`, with botocore's own failures as answers: none of them is the caller's mistake, so none is a 4xx."""
    try:
        return invoke(client, target, call, max_decoded=limits.max_decoded_bytes)
    except ReadTimeoutError:
        return _error(504, f"the decision endpoint did not answer within the front's {timeout_s:g} s; ask fewer or "
                           "shorter questions per request (docs/https-api-on-aws.md, Limits)", path=call.path)
    except (NoCredentialsError, PartialCredentialsError, ParamValidationError) as error:  # our configuration
        return _error(500, f"the front cannot call SageMaker: {type(error).__name__}", path=call.path)
    except (ConnectTimeoutError, BotoCoreError) as error:  # SageMaker unreachable for now: a retry can help
        return _error(503, f"SageMaker could not be reached ({type(error).__name__}); retry", retry_after=RETRY_AFTER_S,
                      path=call.path)


def forward(client: Any, target: Target, call: Call, *, request_id: str, limits: Limits, timeout_s: float,
            parse: Parse) -> Answer:
    """The decision endpoint's answer to one call of a door, or the front's refusal; `timeout_s` is the runtime
    client's read timeout (said in the 504 it causes); the answer carries `request_id` (the access log's)."""
    if len(call.body) > limits.max_sent_bytes:
        return _error(413, f"the body is {len(call.body)} bytes as sent, more than the {limits.max_sent_bytes} this "
                           "API accepts; compress it (zstd or gzip) or ask fewer questions per request", path=call.path)
    readers = {SYSTEMONE_PATH: as_systemone, DECISIONS_PATH: as_openai}
    reader = next((read for path, read in readers.items() if call.path.endswith(path)), None)
    if call.method.upper() == "POST" and reader is not None:
        readable = reader(call, parse, limits.max_decoded_bytes)
        if not isinstance(readable, Call):
            return _with_request_id(readable, request_id)
        call = readable
    return _with_request_id(_sagemaker_call(client, target, call, limits, timeout_s), request_id, limits, call.path)


def _with_request_id(answer: Answer, request_id: str, limits: Limits | None = None,
                     path: str = SYSTEMONE_PATH) -> Answer:
    """The answer as the front returns it: within its size limit, with the front's request id."""
    status, headers, body = answer
    if limits is not None and len(body) > limits.max_answer_bytes:
        status, headers, body = _error(413, f"the answer is {len(body)} bytes, more than the "
                                            f"{limits.max_answer_bytes} this API can return; ask fewer questions per "
                                            "request", path=path)
    if "x-amzn-requestid" in headers:  # SageMaker's id: kept under its own name, the front's is the request id
        headers[SAGEMAKER_REQUEST_ID] = headers.pop("x-amzn-requestid")
    headers.update(dict.fromkeys(REQUEST_IDS, request_id))
    return status, headers, body


# ---- the keys store (semif keys; the Lambda authorizer) ------------------------------------------------------

KEY_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")  # a parameter name's last part, a keys file's first column
HASH = re.compile(r"sha256:[0-9a-f]{64}")


def keys_path(stack_name: str) -> str:
    """The SSM parameter path holding one SecureString per key of a stack's API."""
    return f"/{stack_name}/systemone-api/keys"


@dataclass(frozen=True)
class KeyRecord:
    """One key as stored: its id, its hash (`sha256:HEX`, as the keys file holds it), the API Gateway key that
    counts its requests against the usage plan (an id the authorizer names, not a secret: the API reads no
    x-api-key header), and when it was made."""

    key_id: str
    hash: str
    usage_key: str
    api_key_id: str
    created: str

    def __post_init__(self) -> None:
        if not KEY_ID.fullmatch(self.key_id):
            raise ValueError(f"key id {self.key_id!r}: lower-case letters, digits, '.', '_' and '-', at most 63, "
                             "starting with a letter or digit")
        if not HASH.fullmatch(self.hash):
            raise ValueError(f"key {self.key_id}: the stored hash is not sha256:<64 hex digits>")

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if k != "key_id"}, sort_keys=True)

    @classmethod
    def from_json(cls, key_id: str, text: str) -> KeyRecord:
        fields = json.loads(text)
        return cls(key_id=key_id, hash=fields["hash"], usage_key=fields["usage_key"],
                   api_key_id=fields["api_key_id"], created=fields["created"])

    @property
    def keys_line(self) -> str:
        """The record as a line of a keys file (`KEY_ID sha256:HEX`), what `ApiKeys` reads."""
        return f"{self.key_id} {self.hash}"
