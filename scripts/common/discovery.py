"""Which endpoint a tool talks to: the local gateway, a deployed stack's outputs, or one named outright.

The local gateway (`semif local`) serves `PREFIX-chat` and `PREFIX-decision` (shared hosting: the inference
components of `PREFIX-models`) on 127.0.0.1 with any credentials. On AWS, the stack (`APP-ENV`, as stacks/ names
it; the app name and the environment's region come from cdk.json) says in its outputs which endpoint serves a
role, on which endpoint config, and (shared hosting) through which inference component; `wait_in_service`
checks that the endpoint runs that config before anyone trusts an answer from it: a failed update that SageMaker
rolled back leaves the endpoint InService on the old config. A container reached by URL needs none of this.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from .polling import Poller

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"  # the checkout's; installed, the one in the cwd
APP = "semif"  # when cdk.json cannot say
LOOPBACK = "127.0.0.1"
LOCAL_PORT = 8080
LOCAL_PREFIX = "local"
LOCAL_REGION = "us-east-1"
LOCAL_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}  # never checked locally
# CloudFormation output keys of the stack (stacks/), by endpoint role: endpoint, its config, and (shared hosting
# only) the inference component that serves the role.
OUTPUT_KEYS = {
    "chat": ("ChatEndpointName", "ChatEndpointConfigName", "ChatInferenceComponentName"),
    "decision": ("DecisionEndpointName", "DecisionEndpointConfigName", "DecisionInferenceComponentName"),
}
ENDPOINT_WAITING = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
COMPONENT_WAITING = frozenset({"Creating", "Updating"})


class DiscoveryError(Exception):
    """The stack or endpoint cannot be used as it is; the message is the one line shown to the operator."""


@dataclass(frozen=True)
class Target:
    """An endpoint, the endpoint config it must be running, and the inference component to invoke (shared)."""

    endpoint: str
    expected_config: str | None = None
    component: str | None = None

    @property
    def label(self) -> str:
        return f"{self.endpoint}/{self.component}" if self.component else self.endpoint

    @property
    def invoke_args(self) -> dict[str, str]:
        return {"InferenceComponentName": self.component} if self.component else {}


# ---- the local gateway -------------------------------------------------------------------------------------

def gateway_url(port: int = LOCAL_PORT) -> str:
    return f"http://{LOOPBACK}:{port}"


def local_session(region: str | None = None) -> Any:
    """A boto3 session for the gateway: its region and placeholder credentials (the gateway checks none)."""
    return boto3.Session(region_name=region or LOCAL_REGION, **LOCAL_CREDENTIALS)


def local_target(role: str, prefix: str = LOCAL_PREFIX, *, shared: bool = False) -> Target:
    """`PREFIX-ROLE` on the gateway; shared, the component `PREFIX-ROLE` of the endpoint `PREFIX-models`."""
    component = f"{prefix}-{role}"
    return Target(f"{prefix}-models", component=component) if shared else Target(component)


# ---- a deployed stack --------------------------------------------------------------------------------------

def cdk_json_path() -> Path:
    """The checkout's cdk.json; installed (no checkout around us), the one of the project in the cwd."""
    return CDK_JSON if CDK_JSON.is_file() else Path.cwd() / "cdk.json"


def _semif_context(cdk_json: Path) -> dict[str, Any]:
    return json.loads(cdk_json.read_text())["context"]["semif"]


def deployment_defaults(env_name: str, cdk_json: Path | None = None) -> tuple[str, str | None]:
    """App name and region of an environment, from the cdk.json the stack was deployed from.

    Read as plain JSON: importing the CDK app (and its Node runtime) to learn two strings is not worth it.
    """
    try:
        context = _semif_context(cdk_json or cdk_json_path())
        region = context.get("environments", {}).get(env_name, {}).get("region")
        return str(context.get("app_name") or APP), region
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return APP, None


def environment_region(env_name: str, cdk_json: Path | None = None) -> str | None:
    """The region of `--env NAME` from cdk.json; None (boto3's configured region) without a readable cdk.json.

    An environment cdk.json does not define is refused here, naming it and the ones it does define: otherwise
    boto3 would only say "You must specify a region." about a stack that cannot exist.
    """
    path = cdk_json or cdk_json_path()
    try:
        environments = _semif_context(path)["environments"]
        known = sorted(environments)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if env_name not in environments:
        raise DiscoveryError(f"environment {env_name!r} is not defined in {path} (environments: {', '.join(known)}); "
                             "pick one with --env, or name the endpoint with --endpoint and --region")
    return deployment_defaults(env_name, path)[1]


def stack_name(env_name: str, *, stack: str | None = None, app: str | None = None) -> str:
    """`--stack`, else `APP-ENV` as stacks/ names it (the app name from cdk.json unless `--app`)."""
    return stack or f"{app or deployment_defaults(env_name)[0]}-{env_name}"


def aws_session(region: str | None = None, env_name: str | None = None) -> Any:
    """A boto3 session in `region`, else the environment's region from cdk.json, else boto3's configured one."""
    return boto3.Session(region_name=region or (environment_region(env_name) if env_name else None))


def stack_outputs(cloudformation: Any, stack: str, poller: Poller) -> dict[str, str]:
    """The stack's outputs once no update is in progress (outputs change when it completes)."""
    found: dict[str, Any] = {}

    def settled() -> tuple[bool, str]:
        try:
            found["stack"] = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
        except ClientError as error:
            raise DiscoveryError(f"stack {stack}: {error.response['Error'].get('Message', error)}") from error
        status = found["stack"]["StackStatus"]
        return not status.endswith("_IN_PROGRESS"), status

    poller.run(f"stack {stack}", settled)
    status = found["stack"]["StackStatus"]
    if status.endswith("_FAILED") or status in {"ROLLBACK_COMPLETE", "DELETE_COMPLETE"}:
        raise DiscoveryError(f"stack {stack} is {status}: deploy it again before smoke-testing")
    if "ROLLBACK" in status:
        poller.progress(f"warning: stack {stack} is {status}: the last deployment failed and was "
                        "rolled back; testing the previous version")
    return {o["OutputKey"]: o["OutputValue"] for o in found["stack"].get("Outputs", [])}


def target_from_outputs(outputs: Mapping[str, str], role: str, stack: str) -> Target:
    name_key, config_key, component_key = OUTPUT_KEYS[role]
    if name_key not in outputs:
        raise DiscoveryError(f"stack {stack} has no output {name_key} (outputs: {', '.join(sorted(outputs))})")
    return Target(outputs[name_key], outputs.get(config_key), outputs.get(component_key))


def wait_in_service(sagemaker: Any, target: Target, poller: Poller) -> dict[str, Any]:
    """Wait until the endpoint is InService; then check it runs the expected endpoint config."""
    found: dict[str, Any] = {}

    def in_service() -> tuple[bool, str]:
        try:
            found["endpoint"] = sagemaker.describe_endpoint(EndpointName=target.endpoint)
        except ClientError as error:
            message = error.response["Error"].get("Message", error)
            raise DiscoveryError(f"endpoint {target.endpoint}: {message}") from error
        status = found["endpoint"]["EndpointStatus"]
        if status != "InService" and status not in ENDPOINT_WAITING:
            reason = found["endpoint"].get("FailureReason", "no failure reason given")
            raise DiscoveryError(f"endpoint {target.endpoint} is {status}: {reason}")
        return status == "InService", status

    poller.run(f"endpoint {target.endpoint}", in_service)
    running = found["endpoint"]["EndpointConfigName"]
    if target.expected_config and running != target.expected_config:
        raise DiscoveryError(
            f"endpoint {target.endpoint} is InService on endpoint config {running}, but the stack expects "
            f"{target.expected_config}: the last update did not take (SageMaker rolled it back); see the "
            "endpoint's events and the stack's")
    if target.component:
        wait_component_in_service(sagemaker, target, poller)
    return found["endpoint"]


def wait_component_in_service(sagemaker: Any, target: Target, poller: Poller) -> None:
    """Wait until the inference component is InService on the endpoint (it deploys after the endpoint does)."""

    def in_service() -> tuple[bool, str]:
        try:
            found = sagemaker.describe_inference_component(InferenceComponentName=target.component)
        except ClientError as error:
            message = error.response["Error"].get("Message", error)
            raise DiscoveryError(f"inference component {target.component}: {message}") from error
        status = found["InferenceComponentStatus"]
        if found.get("EndpointName") != target.endpoint:
            raise DiscoveryError(f"inference component {target.component} runs on endpoint "
                                 f"{found.get('EndpointName')}, not {target.endpoint}")
        if status != "InService" and status not in COMPONENT_WAITING:
            reason = found.get("FailureReason", "no failure reason given")
            raise DiscoveryError(f"inference component {target.component} is {status}: {reason}")
        return status == "InService", status

    poller.run(f"inference component {target.component}", in_service)


def deployed_target(session: Any, role: str, stack: str, poller: Poller) -> Target:
    """The endpoint the stack's outputs name for `role`, once it is InService on the config they expect."""
    target = target_from_outputs(stack_outputs(session.client("cloudformation"), stack, poller), role, stack)
    wait_in_service(session.client("sagemaker"), target, poller)
    return target
