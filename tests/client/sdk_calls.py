"""SDK code as a user writes it, run by .venv-sagemaker's python against the local gateway; prints what it saw.

The gateway comes from botocore's standard variables (AWS_ENDPOINT_URL_SAGEMAKER and
AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME), so nothing here names a local URL: the same code runs against AWS.
Argument: the directory of the request payloads. The test (test_sagemaker_sdk.py) judges the report.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError
from sagemaker.core.helper.session_helper import Session
from sagemaker.core.resources import Endpoint
from sagemaker.core.utils.utils import SageMakerClient

from scripts import smoke
from scripts.common.command import parse
from scripts.smoke.answers import stream_text
from scripts.smoke.endpoints import smoke as smoke_test
from semif_decision_client import DecisionClient, DecisionRequest


def invoke_both(payloads: Path, boto_session: boto3.Session) -> dict[str, Any]:
    """`Endpoint.get(name).invoke(...)` on the chat and the decision endpoint."""
    chat = Endpoint.get("local-chat", session=boto_session)
    answer = chat.invoke(body=(payloads / "chat.json").read_text(), content_type="application/json",
                         session=boto_session)
    decision = Endpoint.get("local-decision", session=boto_session)
    scored = decision.invoke(body=(payloads / "decision.json").read_text(), content_type="application/json",
                             accept="application/json", session=boto_session)
    return {"chat_status": chat.endpoint_status, "chat_arn": chat.endpoint_arn,
            "chat_answer": json.loads(answer.body.read()), "chat_variant": answer.invoked_production_variant,
            "decision": json.loads(scored.body.read())}


def unknown_endpoint(boto_session: boto3.Session) -> dict[str, Any]:
    try:
        Endpoint.get("local-nope", session=boto_session)
    except ClientError as error:
        return {"code": error.response["Error"]["Code"], "message": error.response["Error"]["Message"]}
    return {"code": None}


def sdk_stream(payloads: Path, boto_session: boto3.Session) -> dict[str, Any]:
    """The SDK's own `invoke_with_response_stream` (crashes in sagemaker-core 2.27), then the workaround: the
    same runtime client the SDK uses, called directly."""
    body = {**json.loads((payloads / "chat.json").read_text()), "stream": True}
    endpoint = Endpoint.get("local-chat", session=boto_session)
    try:
        endpoint.invoke_with_response_stream(body=json.dumps(body), content_type="application/json",
                                             session=boto_session)
        crash = None
    except Exception as error:  # what the SDK raises is the observation
        crash = {"type": type(error).__name__, "message": str(error),
                 "where": traceback.extract_tb(error.__traceback__)[-1].filename}
    runtime = SageMakerClient(session=boto_session).get_client("sagemaker-runtime")
    response = runtime.invoke_endpoint_with_response_stream(
        EndpointName=endpoint.endpoint_name, ContentType="application/json", Body=json.dumps(body))
    parts = [event["PayloadPart"]["Bytes"] for event in response["Body"] if "PayloadPart" in event]
    sse = stream_text(parts)
    return {"crash": crash, "parts": len(parts), "text": sse.text, "done": sse.done,
            "finish_reason": sse.finish_reason}


def with_sdk_session(payloads: Path, boto_session: boto3.Session) -> dict[str, Any]:
    """Our decision client and smoke script given the SDK's Session object; smoke takes its AWS path (a named
    endpoint: DescribeEndpoint until InService, then a streamed invocation)."""
    sdk_session = Session(boto_session=boto_session)
    request = DecisionRequest.from_payload(json.loads((payloads / "decision.json").read_text()))
    decision = DecisionClient("local-decision", session=sdk_session).decide(request)
    report = smoke_test(parse(smoke, ["chat", "--stream", "--endpoint", "local-chat"]), session=sdk_session)
    return {"client_best": decision.best, "client_ids": list(decision.option_ids),
            "client_total": sum(decision.probabilities.values()), "smoke_report": report}


def main() -> None:
    payloads = Path(sys.argv[1])
    boto_session = boto3.Session(region_name="eu-west-1", aws_access_key_id="local", aws_secret_access_key="local")
    report = {"invoke": invoke_both(payloads, boto_session), "unknown": unknown_endpoint(boto_session),
              "stream": sdk_stream(payloads, boto_session), "session": with_sdk_session(payloads, boto_session)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
