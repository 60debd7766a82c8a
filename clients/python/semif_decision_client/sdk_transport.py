"""The decision endpoint's SDKs on SageMaker, signed with boto3: the official System One SDK (`typesafe-sdk`) and
the openai SDK's Decisions API (`openai`, 3.51.0 and later), both on httpx2.

    from typesafe_sdk import TypeSafeClient
    from semif_decision_client import SageMakerTransport

    client = TypeSafeClient(api_key="iam", base_url="https://sagemaker.invalid",
                            transport=SageMakerTransport("semif-prod-decision", region="eu-west-1"))

    import httpx2
    from openai import AsyncOpenAI, OpenAI
    from semif_decision_client import AsyncSageMakerTransport, SageMakerTransport

    client = OpenAI(base_url="https://sagemaker.invalid/v1", api_key="iam",
                    http_client=httpx2.Client(transport=SageMakerTransport("semif-prod-decision", region="eu-west-1")))
    client.decisions.create(model="jev-latest", input="...", questions=[{"type": "predicate", "instructions": "..."}])
    async_client = AsyncOpenAI(base_url="https://sagemaker.invalid/v1", api_key="iam", http_client=httpx2.AsyncClient(
        transport=AsyncSageMakerTransport("semif-prod-decision", region="eu-west-1")))

SageMaker has no Bearer keys and routes only `/invocations`: this httpx2 transport turns the SDKs' HTTP calls into
`InvokeEndpoint` calls of a boto3 `sagemaker-runtime` client (so credentials, region, `endpoint_url` and signing are
boto3's, as everywhere else). `POST /v1/systemone` and `POST /v1/decisions` go as the body (the container tells the
two apart by it); `GET /v1/models` goes with the custom attributes `route=/v1/models` and answers both SDKs' lists.
Each SDK calls the transport once per attempt, so each retry is a new, freshly signed call; the runtime client makes
one attempt (the SDK's retries are the one retry loop). Bodies go uncompressed (SageMaker drops `Content-Encoding`).

SageMaker's own errors become the HTTP answers the SDKs know how to handle (both retry 408, 429 and 5xx only, so a
client's mistake stays a 4xx), in the shape of the door called (OpenAI's `{"error": {...}}` on `/v1/decisions`, System
One's `{"detail": {...}}` elsewhere): a container's answer wrapped in `ModelError` comes back as the container gave it
(status and body); throttling is 429; `ServiceUnavailable` and `ModelNotReadyException` 503; an invocation timeout
504; an unknown endpoint 404; every other AWS error keeps its own status. The SDK's `api_key` is never sent. That
mapping, the routes and the body decoding are `invoke_wire`'s, shared with the front (the HTTPS API in front of
the endpoint), so a call means the same through either.

Needs httpx2 (`pip install 'semif-decision-client[systemone]'` or `[openai]`); the rest of the package needs boto3.
"""

from __future__ import annotations

from typing import Any

try:
    import anyio.to_thread
    import httpx2
except ImportError as missing:  # the package's core is boto3-only; this module is the optional extra
    raise ImportError("SageMakerTransport needs httpx2 (the System One and openai SDKs' HTTP library): "
                      "pip install 'semif-decision-client[systemone]' or 'semif-decision-client[openai]'") from missing

from botocore.exceptions import (
    BotoCoreError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from .client import CONTENT_TYPE, runtime_client
from .invoke_wire import Answer, Call, Target, error_document, invoke


class _EndpointInvoker:
    """One endpoint's InvokeEndpoint, answering an SDK's requests as HTTP responses (blocking, as boto3 is)."""

    def __init__(self, endpoint_name: str, *, region: str | None = None, inference_component: str | None = None,
                 session: Any = None, endpoint_url: str | None = None, client: Any = None,
                 read_timeout_s: float = 70.0) -> None:
        """`session`: a boto3 Session or a sagemaker Session (default: boto3's chain); `endpoint_url`: another
        runtime API (the local gateway); `client`: your own `sagemaker-runtime` client instead (its retries add to
        the SDK's); `inference_component`: the component to invoke on a shared endpoint. The runtime client's read
        timeout (`read_timeout_s`, above SageMaker's 60 s invocation limit) bounds each call, not the SDK's
        `timeout`."""
        self.endpoint_name, self.inference_component = endpoint_name, inference_component
        self._target = Target(endpoint_name, inference_component)
        self._owns_client = client is None
        self._client = client if client is not None else runtime_client(
            session=session, region_name=region, endpoint_url=endpoint_url, max_attempts=1,
            read_timeout_s=read_timeout_s)

    def _answer(self, request: httpx2.Request, body: bytes) -> httpx2.Response:
        status, headers, content = self._invoke(request, body)
        return httpx2.Response(status, headers=headers, content=content, request=request)

    def _invoke(self, request: httpx2.Request, body: bytes) -> Answer:
        call = Call(request.method, request.url.path, {k.lower(): v for k, v in request.headers.items()}, body)
        try:
            return invoke(self._client, self._target, call)
        except ReadTimeoutError as error:
            raise httpx2.ReadTimeout(str(error), request=request) from None
        except ConnectTimeoutError as error:
            raise httpx2.ConnectTimeout(str(error), request=request) from None
        except (EndpointConnectionError, ConnectionClosedError) as error:
            raise httpx2.ConnectError(str(error), request=request) from None
        except (NoCredentialsError, PartialCredentialsError) as error:
            return _refusal(401, f"no AWS credentials to sign with: {error}", call.path)
        except ParamValidationError as error:
            return _refusal(400, str(error), call.path)
        except BotoCoreError as error:  # anything else on the way: a connection problem as far as the SDK knows
            raise httpx2.TransportError(f"{type(error).__name__}: {error}", request=request) from None

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


def _refusal(status: int, message: str, path: str) -> Answer:
    return status, {"content-type": CONTENT_TYPE}, error_document(status, message, path=path)


class SageMakerTransport(_EndpointInvoker, httpx2.BaseTransport):
    """`TypeSafeClient(..., transport=SageMakerTransport(endpoint_name, region=...))`, or the openai SDK's
    `OpenAI(..., http_client=httpx2.Client(transport=SageMakerTransport(endpoint_name, region=...)))`."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self._answer(request, request.read())


class AsyncSageMakerTransport(_EndpointInvoker, httpx2.AsyncBaseTransport):
    """The same for `AsyncTypeSafeClient` and `AsyncOpenAI` (through `httpx2.AsyncClient(transport=...)`): each call
    runs boto3 in a worker thread, the event loop keeps going."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        return await anyio.to_thread.run_sync(self._answer, request, body)

    async def aclose(self) -> None:
        self.close()
