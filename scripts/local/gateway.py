"""The SageMaker runtime API on loopback, routing endpoint names to local containers.

Unmodified boto3 works against it with `endpoint_url=`: `InvokeEndpoint`
(`POST /endpoints/{name}/invocations`) and `InvokeEndpointWithResponseStream`
(`POST /endpoints/{name}/invocations-response-stream`, answered in AWS
event-stream framing with one `PayloadPart` per chunk the container sends).
It forwards to the container's `/invocations` the way SageMaker does (body,
Content-Type, Accept, custom attributes) and answers with SageMaker's shapes:
unknown endpoint -> `ValidationError`, container error -> `ModelError` with
the original status and message, container unreachable -> `ServiceUnavailable`.
An endpoint can also host inference components (`{endpoint: {component: url}}`, as `shared` hosting deploys
them): then it routes by `InferenceComponentName` (the `X-Amzn-SageMaker-Inference-Component` header) and, as
SageMaker does, refuses a request without one or naming a component it does not host with `ValidationError`; with a
`scale_to_zero.ZeroScaler` a component idle long enough is at zero copies and answers SageMaker's no-capacity error
until its container is up again.
`GET /ping` (not part of the AWS API) is 200 once every container's is.
On the same port `POST /` with `X-Amz-Target: SageMaker.<Operation>` reaches the control-plane reads that SDKs make
before invoking (`DescribeEndpoint` and a few more: `control_plane`), so one endpoint URL serves both services.
`POST /v1/systemone` (System One), `POST /v1/decisions` (OpenAI's Decisions API) and `GET /v1/models` (both), not
part of the AWS API, reach the decision container's own routes (`decision_routes`), so the official System One SDK
works with `base_url=` the gateway and the openai SDK with `base_url=` its `/v1`; with a keys file (`api_keys`) they
are instead the API the CDK app deploys on AWS (`api_front`: Bearer keys, then InvokeEndpoint through this
gateway's own SageMaker API, the same code as the API's Lambda functions).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from semif_decision_client.invoke_wire import DECISIONS_PATH, MODELS_PATH, SYSTEMONE_PATH

from .api_front import DEFAULT_TIMEOUT_S, LocalFront
from .control_plane import ControlPlane
from .decision_routes import decision_door, forward
from .eventstream import payload_part, stream_exception
from .proxy import closing_client, open_stream
from .sagemaker_errors import (
    component_missing,
    component_not_found,
    endpoint_not_found,
    error_response,
    model_error,
    no_components,
    request_id,
)
from .scale_to_zero import NO_CAPACITY, ZeroScaler

CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
COMPONENT_HEADER = "x-amzn-sagemaker-inference-component"  # boto3's InferenceComponentName
VARIANT = "AllTraffic"
INVOCATION_TIMEOUT_S = 60.0  # SageMaker's limit for a container's answer (and between stream parts)
PING_TIMEOUT_S = 2.0
CONTAINER_TIMEOUT = httpx.Timeout(connect=5.0, read=INVOCATION_TIMEOUT_S, write=INVOCATION_TIMEOUT_S,
                                  pool=5.0)
STREAM_LIMIT_S = 480.0  # a local bound on a whole streamed answer (each gap is bounded by the 60 s above)
TIMED_OUT = "Your invocation timed out while waiting for a response from container primary."
STREAM_TIMED_OUT = "Your model primary did not complete sending the inference response in the allotted time."
EVENT_STREAM = "application/vnd.amazon.eventstream"
INVOKE, INVOKE_STREAM = "InvokeEndpoint", "InvokeEndpointWithResponseStream"
# Per operation: the request header carrying Accept, the response header carrying the content type.
ACCEPT_HEADER = {INVOKE: "accept", INVOKE_STREAM: "x-amzn-sagemaker-accept"}
CONTENT_TYPE_HEADER = {INVOKE: "Content-Type", INVOKE_STREAM: "X-Amzn-SageMaker-Content-Type"}


def _log(name: str, operation: str, outcome: str, started: float) -> None:
    print(f"gateway: {name} {operation} {outcome} {time.monotonic() - started:.2f} s", file=sys.stdout,
          flush=True)


def _container_headers(request: Request, operation: str) -> dict[str, str]:
    """What SageMaker passes to the container: content type, accept, custom attributes."""
    headers = {}
    for source, target in (("content-type", "Content-Type"), (ACCEPT_HEADER[operation], "Accept"),
                           (CUSTOM_ATTRIBUTES.lower(), CUSTOM_ATTRIBUTES)):
        if source in request.headers:
            headers[target] = request.headers[source]
    return headers


def _response_headers(container: httpx.Response, operation: str) -> dict[str, str]:
    headers = {"x-Amzn-Invoked-Production-Variant": VARIANT, "x-amzn-RequestId": request_id()}
    if "content-type" in container.headers:
        headers[CONTENT_TYPE_HEADER[operation]] = container.headers["content-type"]
    if CUSTOM_ATTRIBUTES in container.headers:  # echoed only when the container sets it, as on AWS
        headers[CUSTOM_ATTRIBUTES] = container.headers[CUSTOM_ATTRIBUTES]
    return headers


Routes = Mapping[str, str | Mapping[str, str]]  # endpoint -> container URL, or -> {component: container URL}


@dataclass(frozen=True)
class Target:
    """The container a call goes to: an endpoint's, or one of its inference components'."""

    endpoint: str
    component: str | None
    url: str

    @property
    def label(self) -> str:
        return f"{self.endpoint}/{self.component}" if self.component else self.endpoint

    def model_error(self, status: int | None, original: str) -> Response:
        return model_error(self.endpoint, status, original, component=self.component)


class Gateway:
    """Routes SageMaker runtime calls to container base URLs by endpoint name (and inference component)."""

    def __init__(self, containers: Routes, decision: str | None = None, api_keys: Path | None = None,
                 api_timeout_s: float = DEFAULT_TIMEOUT_S, scaler: ZeroScaler | None = None) -> None:
        self.scaler = scaler
        self.routes = {name: target if isinstance(target, str) else dict(target)
                       for name, target in containers.items()}
        self.client = httpx.AsyncClient(timeout=CONTAINER_TIMEOUT)
        self.control_plane = ControlPlane(self.routes)
        self.decision = decision_door(self.containers, decision)
        self.front = LocalFront(api_keys, self.decision, timeout_s=api_timeout_s) if api_keys is not None else None

    @property
    def containers(self) -> dict[str, str]:
        """Every container behind the gateway by endpoint (or endpoint/component)."""
        found: dict[str, str] = {}
        for name, target in self.routes.items():
            if isinstance(target, str):
                found[name] = target
            else:
                found.update({f"{name}/{component}": url for component, url in target.items()})
        return found

    def _route(self, request: Request) -> Target | Response:
        """Where a call goes, or SageMaker's ValidationError for it."""
        name = request.path_params["name"]
        target = self.routes.get(name)
        component = request.headers.get(COMPONENT_HEADER)
        if target is None:
            return endpoint_not_found(name)
        if isinstance(target, str):
            return no_components(name, component) if component else Target(name, None, target)
        if not component:
            return component_missing()
        if component not in target:
            return component_not_found(name, component)
        return Target(name, component, target[component])

    def app(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]
        return Starlette(
            routes=[
                Route("/endpoints/{name}/invocations", self.invoke, methods=["POST"]),
                Route("/endpoints/{name}/invocations-response-stream", self.invoke_stream, methods=["POST"]),
                Route("/ping", self.ping, methods=["GET"]),
                Route(SYSTEMONE_PATH, self.doors, methods=["POST"]),
                Route(DECISIONS_PATH, self.doors, methods=["POST"]),
                Route(MODELS_PATH, self.doors, methods=["GET"]),
                Route("/", self.root, methods=["POST"]),
                Route("/{path:path}", self.unknown, methods=methods),
            ],
            lifespan=closing_client(self.client),
        )

    async def _call(self, request: Request, operation: str) -> tuple[str, Target | None, httpx.Response | Response]:
        """Send the invocation to its container: (label, target, its streaming response), or our error response."""
        started = time.monotonic()
        target = self._route(request)
        if isinstance(target, Response):
            _log(request.path_params["name"], operation, "ValidationError", started)
            return request.path_params["name"], None, target
        name = target.label
        if target.component and self.scaler is not None and not self.scaler.has_capacity(target.component):
            _log(name, operation, "ValidationError (no capacity: scaled to zero)", started)
            return name, None, error_response("ValidationError", NO_CAPACITY)
        body = await request.body()
        try:
            answer = await open_stream(self.client, "POST", f"{target.url}/invocations", body,
                                       _container_headers(request, operation))
        except httpx.TimeoutException:
            _log(name, operation, "ModelError (timeout)", started)
            return name, target, target.model_error(None, TIMED_OUT)
        except httpx.TransportError:
            _log(name, operation, "ServiceUnavailable", started)
            return name, target, error_response(
                "ServiceUnavailable", f"Endpoint {name}: its container at {target.url} is not accepting "
                "connections (starting, or exited; see the local endpoints' log).")
        if not answer.is_success:
            text = (await answer.aread()).decode(errors="replace")
            await answer.aclose()
            _log(name, operation, f"ModelError ({answer.status_code})", started)
            return name, target, target.model_error(answer.status_code, text)
        return name, target, answer

    async def invoke(self, request: Request) -> Response:
        started = time.monotonic()
        name, target, answer = await self._call(request, INVOKE)
        if isinstance(answer, Response):
            return answer
        assert target is not None
        try:
            body = await answer.aread()
        except httpx.TimeoutException:
            _log(name, INVOKE, "ModelError (timeout)", started)
            return target.model_error(None, TIMED_OUT)
        except httpx.TransportError as error:
            _log(name, INVOKE, "ModelError (broken)", started)
            return target.model_error(None, f"The container closed the connection: {error}")
        finally:
            await answer.aclose()
            if self.scaler is not None and target.component:
                self.scaler.touch(target.component)
        _log(name, INVOKE, "200", started)
        return Response(body, status_code=200, headers=_response_headers(answer, INVOKE))

    async def invoke_stream(self, request: Request) -> Response:
        started = time.monotonic()
        name, _, answer = await self._call(request, INVOKE_STREAM)
        if isinstance(answer, Response):
            return answer
        return StreamingResponse(self._events(name, answer, started), status_code=200,
                                 media_type=EVENT_STREAM, headers=_response_headers(answer, INVOKE_STREAM))

    async def _events(self, name: str, answer: httpx.Response, started: float) -> AsyncIterator[bytes]:
        """One PayloadPart per chunk as it arrives; a ModelStreamError event if the container fails."""
        outcome = "200"
        deadline = started + STREAM_LIMIT_S
        try:
            async for chunk in answer.aiter_raw():
                if chunk:
                    yield payload_part(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(STREAM_TIMED_OUT)
        except httpx.TimeoutException:
            outcome = "ModelStreamError (ModelInvocationTimeExceeded)"
            yield stream_exception("ModelStreamError", STREAM_TIMED_OUT, "ModelInvocationTimeExceeded")
        except httpx.TransportError as error:
            outcome = "ModelStreamError (StreamBroken)"
            yield stream_exception("ModelStreamError", f"The container closed the stream: {error}",
                                   "StreamBroken")
        finally:
            await answer.aclose()
            _log(name, INVOKE_STREAM, outcome, started)

    async def ping(self, request: Request) -> Response:
        statuses: dict[str, int | None] = {}
        for name, base in self.containers.items():
            try:
                statuses[name] = (await self.client.get(f"{base}/ping", timeout=PING_TIMEOUT_S)).status_code
            except httpx.TransportError:
                statuses[name] = None
        healthy = all(status == 200 for status in statuses.values())
        return JSONResponse({"endpoints": statuses}, status_code=200 if healthy else 503)

    async def doors(self, request: Request) -> Response:
        """The decision container's routes: its own answer (`decision_routes.forward`), or the front's."""
        started = time.monotonic()
        if self.front is not None:
            response = await self.front.answer(request)
        else:
            response = await forward(self.client, self.decision, request)
        _log(self.decision.label or "-", f"{request.method} {request.url.path}", str(response.status_code), started)
        return response

    async def root(self, request: Request) -> Response:
        """`POST /`: the JSON protocol's address, where the `sagemaker` control-plane calls arrive."""
        if self.control_plane.is_control_plane(request):
            return await self.control_plane.answer(request)
        return await self.unknown(request)

    async def unknown(self, request: Request) -> Response:
        return error_response("UnknownOperationException",
                              f"{request.method} {request.url.path} is not a SageMaker runtime operation "
                              f"served locally ({INVOKE}, {INVOKE_STREAM}; control-plane calls come as POST / "
                              f"with X-Amz-Target: SageMaker.<Operation>; the decision container's POST "
                              f"/v1/systemone, POST /v1/decisions and GET /v1/models).")


def create_gateway(containers: Routes, decision: str | None = None, api_keys: Path | None = None,
                   api_timeout_s: float = DEFAULT_TIMEOUT_S, scaler: ZeroScaler | None = None) -> Starlette:
    """The gateway app; `containers` maps endpoint names to container base URLs, or to `{component: URL}` for an
    endpoint that hosts inference components. `decision` (an endpoint, or `endpoint/component`) answers System One
    and OpenAI's Decisions API;
    by default the one named for the decision role (`{prefix}-decision`, see `decision_routes.decision_door`).
    `api_keys` (a keys file) puts the API's front on those routes (`api_front`), with
    `api_timeout_s` as its integration timeout. `scaler` scales the components to zero when idle
    (`scale_to_zero`)."""
    return Gateway(containers, decision, api_keys, api_timeout_s, scaler).app()
