"""The SageMaker control-plane reads a client makes before it invokes, answered for the local endpoints.

SDK code looks an endpoint up before invoking it: sagemaker-core's `Endpoint.get(name)` calls
`DescribeEndpoint`, and operators' scripts wait on `EndpointStatus`. So the gateway answers, on its own port,
the read-only calls that describe what it serves: `DescribeEndpoint`, `DescribeEndpointConfig`, `ListEndpoints`
and `DescribeInferenceComponent` (shared hosting). The `sagemaker` service speaks botocore's JSON 1.1
protocol: `POST /` with `X-Amz-Target: SageMaker.<Operation>` and the request as a JSON body; errors are
`{"__type": code, "Message": ...}` with HTTP 400, as SageMaker answers a name it does not know
(`ValidationException`, "Could not find endpoint ..."). Locally an endpoint's config carries the endpoint's
name (the stack names them apart; nothing local depends on it), everything is `InService` (the gateway stops
when a container exits), and ARNs use the region the client signed for and SageMaker's lowercase names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .sagemaker_errors import LOCAL_ACCOUNT, LOCAL_REGION, request_id

TARGET_HEADER = "x-amz-target"
TARGET_PREFIX = "SageMaker."
JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
VARIANT = "AllTraffic"
IN_SERVICE = "InService"
# The region in a SigV4 Authorization header: Credential=KEY/DATE/REGION/SERVICE/aws4_request.
SIGNED_REGION = re.compile(r"Credential=[^/,]+/\d{8}/([^/,]+)/")

Routes = Mapping[str, str | Mapping[str, str]]  # as the gateway's: endpoint -> URL, or -> {component: URL}
Answer = dict[str, Any]


class ControlPlaneError(Exception):
    """A call refused as SageMaker refuses it: the JSON protocol's error code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def json_error(code: str, message: str) -> Response:
    """The JSON 1.1 error shape botocore parses into `client.exceptions.<code>` (code from `__type`)."""
    return Response(json.dumps({"__type": code, "Message": message}), status_code=400,
                    media_type=JSON_CONTENT_TYPE, headers={"x-amzn-RequestId": request_id()})


def signed_region(authorization: str | None) -> str:
    """The region the client signed its request for (so ARNs match its configuration), else `local`."""
    found = SIGNED_REGION.search(authorization or "")
    return found.group(1) if found else LOCAL_REGION


def _required(body: Mapping[str, Any], member: str) -> str:
    value = body.get(member)
    if not isinstance(value, str) or not value:
        raise ControlPlaneError("ValidationException", f"1 validation error detected: Value null at "
                                                       f"'{member[0].lower()}{member[1:]}' failed to satisfy "
                                                       "constraint: Member must not be null")
    return value


class ControlPlane:
    """Describes the gateway's endpoints (and their inference components) in the sagemaker service's shapes."""

    def __init__(self, routes: Routes, created: datetime | None = None) -> None:
        self.routes = routes
        self.created = (created or datetime.now(UTC)).timestamp()  # JSON protocol timestamps: epoch seconds
        self.operations: dict[str, Callable[[Mapping[str, Any], str], Answer]] = {
            "DescribeEndpoint": self.describe_endpoint,
            "DescribeEndpointConfig": self.describe_endpoint_config,
            "ListEndpoints": self.list_endpoints,
            "DescribeInferenceComponent": self.describe_inference_component,
        }

    @staticmethod
    def arn(region: str, kind: str, name: str) -> str:
        return f"arn:aws:sagemaker:{region}:{LOCAL_ACCOUNT}:{kind}/{name.lower()}"

    def _endpoint(self, name: str) -> str | Mapping[str, str]:
        if name not in self.routes:
            raise ControlPlaneError("ValidationException", f'Could not find endpoint "{name}".')
        return self.routes[name]

    def _summary(self, name: str, region: str) -> Answer:
        return {"EndpointName": name, "EndpointArn": self.arn(region, "endpoint", name),
                "CreationTime": self.created, "LastModifiedTime": self.created, "EndpointStatus": IN_SERVICE}

    def describe_endpoint(self, body: Mapping[str, Any], region: str) -> Answer:
        name = _required(body, "EndpointName")
        self._endpoint(name)
        variant = {"VariantName": VARIANT, "CurrentWeight": 1.0, "DesiredWeight": 1.0,
                   "CurrentInstanceCount": 1, "DesiredInstanceCount": 1}
        return {**self._summary(name, region), "EndpointConfigName": name, "ProductionVariants": [variant]}

    def describe_endpoint_config(self, body: Mapping[str, Any], region: str) -> Answer:
        name = _required(body, "EndpointConfigName")
        if name not in self.routes:
            raise ControlPlaneError("ValidationException", f'Could not find endpoint configuration "{name}".')
        variant: Answer = {"VariantName": VARIANT, "InitialInstanceCount": 1, "InitialVariantWeight": 1.0}
        if isinstance(self.routes[name], str):  # an endpoint of inference components names no model
            variant["ModelName"] = name
        return {"EndpointConfigName": name, "EndpointConfigArn": self.arn(region, "endpoint-config", name),
                "ProductionVariants": [variant], "CreationTime": self.created}

    def list_endpoints(self, body: Mapping[str, Any], region: str) -> Answer:
        contains = str(body.get("NameContains", ""))
        status = body.get("StatusEquals")
        names = sorted(name for name in self.routes if contains in name and status in (None, IN_SERVICE))
        return {"Endpoints": [self._summary(name, region) for name in names]}

    def describe_inference_component(self, body: Mapping[str, Any], region: str) -> Answer:
        component = _required(body, "InferenceComponentName")
        for endpoint, target in self.routes.items():
            if not isinstance(target, str) and component in target:
                return {"InferenceComponentName": component,
                        "InferenceComponentArn": self.arn(region, "inference-component", component),
                        "EndpointName": endpoint, "EndpointArn": self.arn(region, "endpoint", endpoint),
                        "VariantName": VARIANT, "InferenceComponentStatus": IN_SERVICE,
                        "CreationTime": self.created, "LastModifiedTime": self.created,
                        "RuntimeConfig": {"DesiredCopyCount": 1, "CurrentCopyCount": 1}}
        raise ControlPlaneError("ValidationException", f'Could not find inference component "{component}".')

    def is_control_plane(self, request: Request) -> bool:
        return request.headers.get(TARGET_HEADER, "").startswith(TARGET_PREFIX)

    async def answer(self, request: Request) -> Response:
        """One JSON 1.1 call (`X-Amz-Target: SageMaker.<Operation>`), answered or refused in SageMaker's shape."""
        operation = request.headers.get(TARGET_HEADER, "").removeprefix(TARGET_PREFIX)
        handler = self.operations.get(operation)
        if handler is None:
            return json_error("UnknownOperationException",
                              f"{operation} is not a SageMaker operation served locally "
                              f"({', '.join(self.operations)}).")
        try:
            body = json.loads(await request.body() or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
        except ValueError as error:
            return json_error("SerializationException", f"{operation}: the request body is not JSON ({error}).")
        try:
            answer = handler(body, signed_region(request.headers.get("authorization")))
        except ControlPlaneError as error:
            return json_error(error.code, error.message)
        return JSONResponse(answer, media_type=JSON_CONTENT_TYPE, headers={"x-amzn-RequestId": request_id()})
