"""The decision endpoint's HTTP doors over SageMaker's `InvokeEndpoint` (boto3 only): one HTTP call in, the
container's answer out.

Two things speak to a decision endpoint through SageMaker, and both do it through this module, so that a call means
the same on either side: the SDKs' transport (`SageMakerTransport`, the caller's side: the System One SDK and the
openai SDK) and the front (`api_front`, the HTTPS API the CDK app deploys and the local gateway serves).

- `POST /v1/systemone` (System One) and `POST /v1/decisions` (OpenAI's Decisions API) go as the body: on SageMaker's
  `/invocations` the container tells them apart by the body (`questions` an object or a list); `GET /v1/models` goes
  with the custom attributes `route=/v1/models`. SageMaker drops `Content-Encoding`, so gzip and zstd bodies are
  decoded here (with a cap on the decoded size where the caller sets one).
- SageMaker's own errors become the HTTP answers the SDKs know how to handle (both retry 408, 429 and 5xx, so a
  client's mistake stays a 4xx): a container's answer wrapped in `ModelError` comes back as the container gave it
  (status and body); throttling is 429; `ServiceUnavailable`, `ModelNotReadyException` and an inference component
  scaled to zero (a `ValidationError`, no capacity: a copy is coming) 503 with Retry-After; an invocation timeout
  504; an unknown endpoint 404; every other AWS error keeps its own status. What is answered here speaks the shape
  of the door called (`error_document`): OpenAI's `{"error": {...}}` on `/v1/decisions`, System One's
  `{"detail": {...}}` elsewhere.

botocore's other exceptions (timeouts, connections, credentials) are left to the caller: the transport turns them
into httpx2's errors (the SDKs retry those themselves), the front into statuses.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .client import no_capacity

CONTENT_TYPE = "application/json"
SYSTEMONE_PATH, DECISIONS_PATH, MODELS_PATH = "/v1/systemone", "/v1/decisions", "/v1/models"
POSTED_PATHS = (SYSTEMONE_PATH, DECISIONS_PATH)  # their bodies go to /invocations as sent
MODELS_ATTRIBUTES = "route=/v1/models"  # the adapter answers the models list on /invocations with these
DECISIONS_ATTRIBUTES = "route=/v1/decisions"  # and any body on /invocations as OpenAI's Decisions API
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"  # passed through both ways, as InvokeEndpoint does
REQUEST_ID = "x-typesafe-request-id"  # the SDK's response.request_id
CAPACITY_RETRY_AFTER_S = 10  # a component scaled to zero: its first copy takes minutes to come back
# System One's error_type for the statuses answered here (the adapter's own names).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "authentication_error",
               404: "not_found_error", 413: "request_too_large", 415: "invalid_request_error",
               429: "rate_limit_error", 500: "internal_error", 503: "service_unavailable", 504: "timeout_error"}
# SageMaker's errors whose status is not the one the SDK should see (others keep the status AWS gave them).
REMAPPED = {"ThrottlingException": 429, "ThrottledException": 429, "TooManyRequestsException": 429,
            "ServiceUnavailable": 503, "ModelNotReadyException": 503}
# OpenAI's error type for each status: the one the container's /v1/decisions gives it
# (`semif_adapter.doors.openai_contract.ERROR_TYPES`); and OpenAI's code for each of System One's error types, the
# one OpenAI's API uses where it has one.
OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
                404: "invalid_request_error", 405: "invalid_request_error", 408: "timeout",
                413: "invalid_request_error", 415: "invalid_request_error", 429: "rate_limit_error",
                500: "server_error", 503: "server_error", 504: "timeout"}
OPENAI_CODES = {"authentication_error": "invalid_api_key", "not_found_error": "not_found",
                "request_too_large": "body_too_large", "rate_limit_error": "rate_limit_exceeded",
                "quota_exceeded_error": "insufficient_quota", "permission_error": "forbidden",
                "service_unavailable": "service_unavailable", "timeout_error": "timeout",
                "internal_error": "internal_error", "invalid_request_error": None}
REQUEST_IDS = (REQUEST_ID, "x-request-id")  # the System One SDK's response.request_id, the openai SDK's
GZIP_WINDOW = 31  # zlib's wbits for a gzip header and trailer
Answer = tuple[int, dict[str, str], bytes]  # status, headers, body


class RefusedError(Exception):
    """Refused before AWS sees the call: becomes a 4xx answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _zstd_module() -> Any:
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd  # installed with typesafe-sdk[zstd], which compresses bodies
    return zstd


Decoded = tuple[bytes, bool]  # at most limit + 1 bytes, and whether the data's end was seen


def _gzip(data: bytes, limit: int | None) -> Decoded:
    inflater = zlib.decompressobj(GZIP_WINDOW)
    try:
        return inflater.decompress(data, 0 if limit is None else limit + 1), inflater.eof  # 0: no limit
    except zlib.error as error:
        raise ValueError(str(error)) from None


def _zstd(data: bytes, limit: int | None) -> Decoded:
    zstd = _zstd_module()
    decompressor = zstd.ZstdDecompressor()
    try:
        return decompressor.decompress(data, -1 if limit is None else limit + 1), decompressor.eof  # -1: no limit
    except (zstd.ZstdError, EOFError) as error:
        raise ValueError(str(error)) from None


DECODERS: dict[str, Callable[[bytes, int | None], Decoded]] = {"gzip": _gzip, "x-gzip": _gzip, "zstd": _zstd}


def decoded(body: bytes, encoding: str | None, limit: int | None = None) -> bytes:
    """The body as SageMaker must get it (SageMaker drops Content-Encoding, so the container could not decode it);
    more than `limit` decoded bytes (a decompression bomb) is refused with 413 having used at most that much memory."""
    for name in reversed([part.strip().lower() for part in (encoding or "").split(",") if part.strip()]):
        if name == "identity":
            continue
        if name not in DECODERS:
            raise RefusedError(415, f"Content-Encoding {name!r} cannot be sent through SageMaker "
                                    f"(decoded here: {sorted(DECODERS)}, or none)")
        try:
            out, finished = DECODERS[name](body, limit)
        except ImportError as missing:
            raise RefusedError(415, f"Content-Encoding {name!r} cannot be decoded here ({missing}); send the body "
                                    "uncompressed or gzip") from None
        except ValueError as error:
            raise RefusedError(415, f"the body is not valid {name}: {error}") from None
        if limit is not None and len(out) > limit:
            raise RefusedError(413, f"the {name}-decoded body exceeds the {limit}-byte limit")
        if not finished:
            raise RefusedError(415, f"the body is not complete {name} data")
        body = out
    return body


def speaks_openai(path: str) -> bool:
    """Whether a call's route is OpenAI's Decisions door (a base URL's path may come before it)."""
    return path.endswith(DECISIONS_PATH)


def error_kind(status: int, error_type: str | None = None) -> str:
    """System One's error type for a status answered here (the vocabulary both shapes are made from)."""
    return error_type or ERROR_TYPES.get(status, "internal_error" if status >= 500 else "invalid_request_error")


def openai_error(message: str, error_type: str, status: int | None = None, param: str | None = None,
                 code: str | None = None) -> dict[str, Any]:
    """OpenAI's error document, `{"error": {"message", "type", "param", "code"}}`, for a status (None: API Gateway's
    default 4xx or 5xx) and one of System One's error types (`code`, where given, instead of the type's own)."""
    fallback = "server_error" if error_type == "internal_error" or (status or 0) >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": OPENAI_TYPES.get(status or 0, fallback), "param": param,
                      "code": code or OPENAI_CODES.get(error_type, error_type)}}


def error_document(status: int, message: str, error_type: str | None = None, path: str = SYSTEMONE_PATH) -> bytes:
    """An error in the shape of the door `path` names: OpenAI's on `/v1/decisions`, else System One's
    non-validation shape `{"detail": {"error_type", "message"}}`."""
    kind = error_kind(status, error_type)
    if speaks_openai(path):
        return json.dumps(openai_error(message, kind, status)).encode()
    return json.dumps({"detail": {"error_type": kind, "message": message}}).encode()


def response_headers(metadata: Mapping[str, Any], content_type: str) -> dict[str, str]:
    """Answer headers: the content type, SageMaker's request id (as the SDKs' request id) and Retry-After."""
    headers = {"content-type": content_type}
    request_id = metadata.get("RequestId")
    if request_id:
        headers["x-amzn-requestid"] = request_id
        headers.update(dict.fromkeys(REQUEST_IDS, request_id))
    retry_after = metadata.get("HTTPHeaders", {}).get("retry-after")
    if retry_after:
        headers["retry-after"] = retry_after
    return headers


def error_answer(error: ClientError, path: str = SYSTEMONE_PATH) -> Answer:
    """SageMaker's error as (status, headers, body) for the SDK: the container's own answer inside a ModelError,
    otherwise an error in the shape of the door `path` names, with the status the SDK should act on."""
    response: Mapping[str, Any] = error.response
    code = response.get("Error", {}).get("Code", "")
    message = response.get("Error", {}).get("Message", "") or str(error)
    metadata = response.get("ResponseMetadata", {})
    original = response.get("OriginalStatusCode")
    if code == "ModelError" and isinstance(original, int) and original >= 400:
        body = str(response.get("OriginalMessage", "")).encode()
        try:
            json.loads(body)
            content_type = CONTENT_TYPE
        except ValueError:
            content_type = "text/plain; charset=utf-8"
        return original, response_headers(metadata, content_type), body
    if code == "ModelError":  # no status from the container: it did not answer in time (or at all)
        status = 504
    elif no_capacity(response):  # scaled to zero: a copy is on its way (minutes), so the SDKs' retry of 503 helps
        headers = {**response_headers(metadata, CONTENT_TYPE), "retry-after": str(CAPACITY_RETRY_AFTER_S)}
        return 503, headers, error_document(503, f"SageMaker {code}: {message}", path=path)
    elif code == "ValidationError":
        status = 404 if "not found" in message.lower() else 400
    else:
        aws_status = metadata.get("HTTPStatusCode")
        status = REMAPPED.get(code) or (aws_status if isinstance(aws_status, int) and aws_status >= 400 else 500)
    return status, response_headers(metadata, CONTENT_TYPE), error_document(status, f"SageMaker {code}: {message}",
                                                                            path=path)


@dataclass(frozen=True)
class Call:
    """One HTTP call to a door: its method, path (a base URL's path may come before the route), lower-case headers
    and body as sent."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Target:
    """The decision model to invoke: its endpoint, and its inference component on a shared endpoint."""

    endpoint_name: str
    inference_component: str | None = None


def _invocation(call: Call, max_decoded: int | None) -> dict[str, Any]:
    """InvokeEndpoint's arguments for a call (RefusedError for a route SageMaker cannot serve)."""
    method = call.method.upper()
    if method == "POST" and call.path.endswith(POSTED_PATHS):
        arguments = {"Body": decoded(call.body, call.headers.get("content-encoding"), max_decoded),
                     "ContentType": call.headers.get("content-type", CONTENT_TYPE)}
        if CUSTOM_ATTRIBUTES in call.headers:
            arguments["CustomAttributes"] = call.headers[CUSTOM_ATTRIBUTES]
        elif speaks_openai(call.path):  # the container then answers in OpenAI's shape whatever the body holds
            arguments["CustomAttributes"] = DECISIONS_ATTRIBUTES
        return arguments
    if method == "GET" and call.path.endswith(MODELS_PATH):
        return {"Body": b"{}", "ContentType": CONTENT_TYPE, "CustomAttributes": MODELS_ATTRIBUTES}
    raise RefusedError(404, f"{method} {call.path}: the decision endpoint serves POST {SYSTEMONE_PATH}, "
                            f"POST {DECISIONS_PATH} and GET {MODELS_PATH}")


def invoke(client: Any, target: Target, call: Call, *, max_decoded: int | None = None) -> Answer:
    """The call through InvokeEndpoint: the container's answer, SageMaker's error as an answer (`error_answer`), or
    a refusal made here (`RefusedError`'s status); botocore's other exceptions propagate."""
    try:
        arguments = _invocation(call, max_decoded)
    except RefusedError as refused:
        return refused.status, {"content-type": CONTENT_TYPE}, error_document(refused.status, str(refused),
                                                                             path=call.path)
    if target.inference_component:
        arguments["InferenceComponentName"] = target.inference_component
    try:
        result = client.invoke_endpoint(EndpointName=target.endpoint_name, Accept=CONTENT_TYPE, **arguments)
        content = result["Body"].read()
    except ClientError as error:
        return error_answer(error, call.path)
    headers = response_headers(result.get("ResponseMetadata", {}), result.get("ContentType", CONTENT_TYPE))
    if result.get("CustomAttributes"):
        headers[CUSTOM_ATTRIBUTES] = result["CustomAttributes"]
    return 200, headers, content
