"""SageMaker runtime error responses, shaped so boto3 raises the modeled exceptions.

sagemaker-runtime is a rest-json service: botocore takes the error code from the
`x-amzn-ErrorType` header (anything after `:` is dropped) and the message from
the JSON body's `Message`, then parses the modeled members of that error shape
from the same body (`OriginalStatusCode`, `OriginalMessage`, `LogStreamArn` for
`ModelError`). Status codes are the ones the service model declares.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from starlette.responses import Response

LOCAL_ACCOUNT = "000000000000"
LOCAL_REGION = "local"
STATUS = {
    "ValidationError": 400,
    "ModelError": 424,
    "InternalFailure": 500,
    "ServiceUnavailable": 503,
    "UnknownOperationException": 404,
}


def request_id() -> str:
    return str(uuid.uuid4())


def error_response(code: str, message: str, error_code: str | None = None, **members: Any) -> Response:
    """A rest-json error that botocore maps to `client.exceptions.<code>`.

    The code travels in `x-amzn-ErrorType` (what botocore reads) and, for any other client, in the
    body's `ErrorCode` as well.
    """
    body = {"ErrorCode": error_code or code, "Message": message,
            **{k: v for k, v in members.items() if v is not None}}
    return Response(
        json.dumps(body), status_code=STATUS[code], media_type="application/json",
        headers={"x-amzn-ErrorType": code, "x-amzn-RequestId": request_id()},
    )


def endpoint_not_found(name: str) -> Response:
    return error_response("ValidationError", f"Endpoint {name} of account {LOCAL_ACCOUNT} not found.")


# SageMaker's answer to a call without InferenceComponentName on an endpoint that hosts inference components
# (as users report it: botocore's ValidationError, HTTP 400, this error code and message).
COMPONENT_MISSING = ("Inference Component Name header is required for endpoints to which you plan to deploy "
                     "inference components. Please include Inference Component Name header or consider using "
                     "SageMaker models.")


def component_missing() -> Response:
    return error_response("ValidationError", COMPONENT_MISSING, error_code="INFERENCE_COMPONENT_NAME_MISSING")


def component_not_found(endpoint: str, component: str) -> Response:
    return error_response("ValidationError", f"Inference Component {component} of account {LOCAL_ACCOUNT} not found "
                                             f"on endpoint {endpoint}.")


def no_components(endpoint: str, component: str) -> Response:
    return error_response("ValidationError", f"Endpoint {endpoint} of account {LOCAL_ACCOUNT} hosts no inference "
                                             f"components; invoke it without InferenceComponentName ({component}).")


def log_stream_arn(endpoint: str, component: str | None = None) -> str:
    group = f"InferenceComponents/{component}" if component else f"Endpoints/{endpoint}"
    return f"arn:aws:logs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:log-group:/aws/sagemaker/{group}"


def model_error(endpoint: str, status: int | None, original: str, *, component: str | None = None) -> Response:
    """The container answered with an error (or not at all): SageMaker's 424 ModelError."""
    kind = "client" if status is not None and 400 <= status < 500 else "server"
    shown = status if status is not None else 0
    where = f"{endpoint}/{component}" if component else endpoint
    message = (f"Received {kind} error ({shown}) from primary with message \"{original}\". "
               f"See the local endpoints' log of {where} for more information.")
    return error_response("ModelError", message, error_code=f"{kind.upper()}_ERROR_FROM_MODEL",
                          OriginalStatusCode=status, OriginalMessage=original,
                          LogStreamArn=log_stream_arn(endpoint, component))
