"""The official System One SDK (`typesafe-sdk`) against a decision endpoint on SageMaker, signed with boto3.

    from typesafe_sdk import TypeSafeClient
    from semif_decision_client import SageMakerTransport

    client = TypeSafeClient(api_key="iam", base_url="https://sagemaker.invalid",
                            transport=SageMakerTransport("semif-prod-decision", region="eu-west-1"))

SageMaker has no Bearer keys and routes only `/invocations`: this httpx2 transport turns the SDK's HTTP calls into
`InvokeEndpoint` calls of a boto3 `sagemaker-runtime` client (so credentials, region, `endpoint_url` and signing are
boto3's, as everywhere else), where the adapter answers System One. `POST /v1/systemone` goes as the body (a body with
`questions` is System One there); `GET /v1/models` goes with the custom attributes `route=/v1/models`. The SDK calls
the transport once per attempt, so each retry is a new, freshly signed call; the runtime client makes one attempt
(the SDK's `RetryPolicy` is the one retry loop). Bodies go uncompressed (SageMaker drops `Content-Encoding`).

SageMaker's own errors become the HTTP answers the SDK knows how to handle (it retries 408, 429 and 5xx only, so a
client's mistake stays a 4xx): a container's answer wrapped in `ModelError` comes back as the container gave it
(status and body); throttling is 429; `ServiceUnavailable` and `ModelNotReadyException` 503; an invocation timeout
504; an unknown endpoint 404; every other AWS error keeps its own status. The SDK's `api_key` is never sent.

Needs httpx2 (`pip install 'semif-decision-client[systemone]'`); the rest of the package needs boto3 alone.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Mapping
from typing import Any

try:
    import anyio.to_thread
    import httpx2
except ImportError as missing:  # the package's core is boto3-only; this module is the optional extra
    raise ImportError("SageMakerTransport needs httpx2 (the System One SDK's HTTP library): "
                      "pip install 'semif-decision-client[systemone]' (or pip install typesafe-sdk)") from missing

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from .client import CONTENT_TYPE, runtime_client

SYSTEMONE_PATH, MODELS_PATH = "/v1/systemone", "/v1/models"
MODELS_ATTRIBUTES = "route=/v1/models"  # the adapter answers the models list on /invocations with these
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"  # passed through both ways, as InvokeEndpoint does
REQUEST_ID = "x-typesafe-request-id"  # the SDK's response.request_id: here SageMaker's request id
# System One's error_type for the statuses this transport answers (the adapter's own names).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "authentication_error",
               404: "not_found_error", 415: "invalid_request_error", 429: "rate_limit_error",
               500: "internal_error", 503: "service_unavailable", 504: "timeout_error"}
# SageMaker's errors whose status is not the one the SDK should see (others keep the status AWS gave them).
REMAPPED = {"ThrottlingException": 429, "ThrottledException": 429, "TooManyRequestsException": 429,
            "ServiceUnavailable": 503, "ModelNotReadyException": 503}


def _zstd_decompress(body: bytes) -> bytes:
    if sys.version_info >= (3, 14):
        from compression.zstd import decompress
    else:
        from backports.zstd import decompress  # installed with typesafe-sdk[zstd], which compressed the body
    return decompress(body)


DECODERS = {"gzip": gzip.decompress, "x-gzip": gzip.decompress, "zstd": _zstd_decompress,
            "identity": lambda body: body}


class _RefusedError(Exception):
    """Refused here, before AWS: becomes a 4xx answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _decoded(body: bytes, encoding: str | None) -> bytes:
    """The body as SageMaker must get it: SageMaker drops Content-Encoding, so the container could not decode it."""
    for name in reversed([part.strip().lower() for part in (encoding or "").split(",") if part.strip()]):
        if name not in DECODERS:
            raise _RefusedError(415, f"Content-Encoding {name!r} cannot be sent through SageMaker "
                                f"(this transport decodes {sorted(DECODERS)})")
        try:
            body = DECODERS[name](body)
        except (ImportError, OSError, ValueError, EOFError) as error:
            raise _RefusedError(415, f"the body is not valid {name}: {error}") from error
    return body


def _document(status: int, message: str) -> bytes:
    fallback = "internal_error" if status >= 500 else "invalid_request_error"
    return json.dumps({"detail": {"error_type": ERROR_TYPES.get(status, fallback),
                                  "message": message}}).encode()


def _headers(metadata: Mapping[str, Any], content_type: str) -> dict[str, str]:
    """Response headers: the content type, SageMaker's request id (as the SDK's request id) and Retry-After."""
    headers = {"content-type": content_type}
    request_id = metadata.get("RequestId")
    if request_id:
        headers[REQUEST_ID] = headers["x-amzn-requestid"] = request_id
    retry_after = metadata.get("HTTPHeaders", {}).get("retry-after")
    if retry_after:
        headers["retry-after"] = retry_after
    return headers


def error_answer(error: ClientError) -> tuple[int, dict[str, str], bytes]:
    """SageMaker's error as (status, headers, body) for the SDK: the container's own answer inside a ModelError,
    otherwise System One's `{"detail": {"error_type", "message"}}` with the status the SDK should act on."""
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
        return original, _headers(metadata, content_type), body
    if code == "ModelError":  # no status from the container: it did not answer in time (or at all)
        status = 504
    elif code == "ValidationError":
        status = 404 if "not found" in message.lower() else 400
    else:
        aws_status = metadata.get("HTTPStatusCode")
        status = REMAPPED.get(code) or (aws_status if isinstance(aws_status, int) and aws_status >= 400 else 500)
    return status, _headers(metadata, CONTENT_TYPE), _document(status, f"SageMaker {code}: {message}")


class _EndpointInvoker:
    """One endpoint's InvokeEndpoint, answering the SDK's requests as HTTP responses (blocking, as boto3 is)."""

    def __init__(self, endpoint_name: str, *, region: str | None = None, inference_component: str | None = None,
                 session: Any = None, endpoint_url: str | None = None, client: Any = None,
                 read_timeout_s: float = 70.0) -> None:
        """`session`: a boto3 Session or a sagemaker Session (default: boto3's chain); `endpoint_url`: another
        runtime API (the local gateway); `client`: your own `sagemaker-runtime` client instead (its retries add to
        the SDK's); `inference_component`: the component to invoke on a shared endpoint. The runtime client's read
        timeout (`read_timeout_s`, above SageMaker's 60 s invocation limit) bounds each call, not the SDK's
        `timeout`."""
        self.endpoint_name, self.inference_component = endpoint_name, inference_component
        self._owns_client = client is None
        self._client = client if client is not None else runtime_client(
            session=session, region_name=region, endpoint_url=endpoint_url, max_attempts=1,
            read_timeout_s=read_timeout_s)

    def _answer(self, request: httpx2.Request, body: bytes) -> httpx2.Response:
        try:
            status, headers, content = self._invoke(request, body)
        except _RefusedError as refused:
            status, headers = refused.status, {"content-type": CONTENT_TYPE}
            content = _document(refused.status, str(refused))
        except ClientError as error:
            status, headers, content = error_answer(error)
        return httpx2.Response(status, headers=headers, content=content, request=request)

    def _invoke(self, request: httpx2.Request, body: bytes) -> tuple[int, dict[str, str], bytes]:
        method, path = request.method.upper(), request.url.path
        extra: dict[str, str] = {}
        if method == "POST" and path.endswith(SYSTEMONE_PATH):
            body = _decoded(body, request.headers.get("content-encoding"))
            content_type = request.headers.get("content-type", CONTENT_TYPE)
            if CUSTOM_ATTRIBUTES in request.headers:
                extra["CustomAttributes"] = request.headers[CUSTOM_ATTRIBUTES]
        elif method == "GET" and path.endswith(MODELS_PATH):
            body, content_type, extra["CustomAttributes"] = b"{}", CONTENT_TYPE, MODELS_ATTRIBUTES
        else:
            raise _RefusedError(404, f"{method} {path}: SageMakerTransport serves POST {SYSTEMONE_PATH} and "
                                     f"GET {MODELS_PATH}")
        if self.inference_component:
            extra["InferenceComponentName"] = self.inference_component
        try:
            result = self._client.invoke_endpoint(EndpointName=self.endpoint_name, Body=body,
                                                  ContentType=content_type, Accept=CONTENT_TYPE, **extra)
            content = result["Body"].read()
        except ReadTimeoutError as error:
            raise httpx2.ReadTimeout(str(error), request=request) from None
        except ConnectTimeoutError as error:
            raise httpx2.ConnectTimeout(str(error), request=request) from None
        except (EndpointConnectionError, ConnectionClosedError) as error:
            raise httpx2.ConnectError(str(error), request=request) from None
        except (NoCredentialsError, PartialCredentialsError) as error:
            raise _RefusedError(401, f"no AWS credentials to sign with: {error}") from None
        except ParamValidationError as error:
            raise _RefusedError(400, str(error)) from None
        except BotoCoreError as error:  # anything else on the way: a connection problem as far as the SDK knows
            raise httpx2.TransportError(f"{type(error).__name__}: {error}", request=request) from None
        headers = _headers(result.get("ResponseMetadata", {}), result.get("ContentType", CONTENT_TYPE))
        if result.get("CustomAttributes"):
            headers[CUSTOM_ATTRIBUTES] = result["CustomAttributes"]
        return 200, headers, content

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


class SageMakerTransport(_EndpointInvoker, httpx2.BaseTransport):
    """`TypeSafeClient(api_key="iam", base_url=..., transport=SageMakerTransport(endpoint_name, region=...))`."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._answer(request, request.read())


class AsyncSageMakerTransport(_EndpointInvoker, httpx2.AsyncBaseTransport):
    """The same for `AsyncTypeSafeClient`: each call runs boto3 in a worker thread, the event loop keeps going."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        return await anyio.to_thread.run_sync(self._answer, request, body)

    async def aclose(self) -> None:
        self.close()
