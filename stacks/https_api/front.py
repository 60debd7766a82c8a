"""Your own System One API in front of the decision endpoint: `base_url` + a key, for tools outside AWS.

An API Gateway REST API (regional) with `POST /v1/systemone` (System One), `POST /v1/decisions` (OpenAI's Decisions
API) and `GET /v1/models` (both), every route behind the same keys, usage plan, access log and alarms:
- a TOKEN Lambda authorizer on `Authorization` (handlers/key_authorizer.py) checks `Bearer <key>`
  against the hashed keys under the stack's SSM path and names the caller's usage-plan key (`apiKeySource:
  AUTHORIZER`), so the usage plan throttles (and optionally caps) every key on its own;
- a forwarding Lambda (handlers/endpoint_forwarder.py) calls InvokeEndpoint (with the inference component on
  a shared endpoint) and answers what the container answers; both run `semif_decision_client.api_front`,
  the code the local gateway serves too;
- API Gateway's own refusals (no key, a wrong key, throttling, an unknown route, the authorizer failing, a timeout)
  are gateway responses with the statuses the SDKs retry only when a retry can help. Their templates cannot tell the
  route (no VTL, only variable substitution), so each body carries both shapes: System One's `detail` and OpenAI's
  `error` (`api_front.gateway_error`, which the local gateway's front answers too).

Operations (access log with the key's id, alarms, dashboard, WAF) are in operations.py; the settings and their
rules in stacks/config/https_api.py and https_api_rules.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as route53_targets
from constructs import Construct

import semif_adapter
import semif_decision_client
from semif_decision_client.api_front import (
    DENIED_MESSAGE,
    UNAUTHORIZED_MESSAGE,
    gateway_error,
    keys_path,
    read_timeout_s,
)

from ..config.deployment import Deployment
from ..config.https_api import HttpsApi
from ..config.https_api_rules import body_limit
from ..custom_resources.function import RUNTIME
from ..endpoints.common import INVOKE_ACTIONS
from ..endpoints.llama_endpoint import LlamaEndpoint
from ..operations.logs import LogSettings
from ..operations.notifications import AlarmTopic
from ..security.nag import NIST, accept_redundant_depends_on, acknowledge
from .bundle import bundled_code, module_files
from .operations import ApiOperations

HANDLERS_DIR = Path(__file__).resolve().parent / "handlers"
STAGE = "api"
MEMORY_MB = 256  # boto3, a 4 MiB body as sent and 6 MiB decoded fit with room; duration is billed per MB
AUTHORIZER_TIMEOUT_S = 10
BUNDLE = {
    **module_files(Path(semif_decision_client.__file__).parent, "semif_decision_client",
                   ("client", "invoke_wire", "api_front")),
    **module_files(Path(semif_adapter.__file__).parent, "semif_adapter",
                   ("doors/api_keys", "errors", "doors/strict_json")),
    "key_authorizer.py": HANDLERS_DIR / "key_authorizer.py",
    "endpoint_forwarder.py": HANDLERS_DIR / "endpoint_forwarder.py",
}
_SYNC = ("invoked synchronously by API Gateway, which answers the caller with the result or an error; a dead-letter "
         "queue only receives failed asynchronous invocations")
_CONCURRENCY = ("API Gateway's usage plan throttles every key, and the decision endpoint's queue sheds load with a "
                "retryable 503; reserved concurrency would take capacity from the account's pool (a new account's "
                "10 cannot spare any)")
_VPC = ("calls only AWS APIs (SageMaker runtime, SSM) and reaches no private resource; a VPC would add NAT or "
        "interface endpoints, not isolation")
_ENVIRONMENT = ("the environment holds an endpoint name, an SSM path and limits, no secret; Lambda encrypts it at "
                "rest with its AWS managed key")
API_FUNCTION = {
    f"{NIST}LambdaDLQ": _SYNC, "CKV_AWS_116": _SYNC,
    f"{NIST}LambdaConcurrency": _CONCURRENCY, "CKV_AWS_115": _CONCURRENCY,
    f"{NIST}LambdaInsideVPC": _VPC, "CKV_AWS_117": _VPC,
    "CKV_AWS_173": _ENVIRONMENT,
}
# API Gateway's own answers: (status, System One's error_type, message or None for API Gateway's own message,
# Retry-After). A retry helps against throttling, a failing authorizer and (maybe) a timeout, never against a refused
# key, a used-up quota or an unknown route.
ROUTES = (("systemone", "POST"), ("decisions", "POST"), ("models", "GET"))  # under /v1
NO_ROUTE = "no such route: this API serves POST /v1/systemone, POST /v1/decisions and GET /v1/models"
GATEWAY_RESPONSES: dict[str, tuple[int | None, str, str | None, int | None]] = {
    "UNAUTHORIZED": (401, "authentication_error", UNAUTHORIZED_MESSAGE, None),
    "ACCESS_DENIED": (403, "authentication_error", DENIED_MESSAGE, None),
    "MISSING_AUTHENTICATION_TOKEN": (404, "not_found_error", NO_ROUTE, None),
    "THROTTLED": (429, "rate_limit_error", "this key is over its request rate; retry after a moment", 1),
    "QUOTA_EXCEEDED": (403, "quota_exceeded_error", "this key's request quota for the period is used up; it renews "
                                                    "when the next period starts (UTC)", None),
    "AUTHORIZER_FAILURE": (503, "service_unavailable", "the API's keys could not be read; retry", 1),
    "AUTHORIZER_CONFIGURATION_ERROR": (503, "service_unavailable", "the API's keys could not be read; retry", 1),
    "INTEGRATION_TIMEOUT": (504, "timeout_error", "the decision endpoint did not answer within the API's "
                                                  "integration timeout; ask fewer or shorter questions per request",
                            None),
    "REQUEST_TOO_LARGE": (413, "request_too_large", None, None),
    "WAF_FILTERED": (403, "permission_error", "the request was blocked by the API's web application firewall", None),
    "INVALID_API_KEY": (403, "authentication_error", "this key is not enabled in the API's usage plan (revoked, or "
                                                     "made without `semif keys create`)", None),
    "DEFAULT_4_XX": (None, "invalid_request_error", None, None),
    "DEFAULT_5_XX": (None, "internal_error", None, None),
}


API_MESSAGE = "$context.error.messageString"  # API Gateway's own message, already a quoted JSON string


def gateway_template(status: int | None, error_type: str, message: str | None) -> str:
    """A gateway response body in both shapes (`api_front.gateway_error`, what the local front answers): a
    fixed message, or API Gateway's own."""
    body = gateway_error(status, message if message is not None else API_MESSAGE, error_type).decode()
    return body.replace(json.dumps(API_MESSAGE), API_MESSAGE)


class HttpsApiFront(Construct):
    """The API, its two functions, its usage plan; `url` is the SDK's `base_url`."""

    def __init__(self, scope: Construct, construct_id: str, *, deployment: Deployment, settings: HttpsApi,
                 decision: LlamaEndpoint, key: kms.IKey, log_settings: LogSettings, alarm_topic: AlarmTopic) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        stack = Stack.of(self)
        self.name = f"{deployment.stack_name}-systemone"
        self.keys_path = keys_path(deployment.stack_name)
        self.key = key
        code = bundled_code(HANDLERS_DIR, BUNDLE)
        self.authorizer_function = self._function(
            "Authorizer", code=code, handler="key_authorizer.handler",
            description="the System One API's key check", timeout_s=AUTHORIZER_TIMEOUT_S,
            environment={"SEMIF_KEYS_PATH": self.keys_path}, log_settings=log_settings)
        self._allow_key_reads(stack)
        timeout_s = settings.integration_timeout_s
        self.forwarder_function = self._function(
            "Forwarder", code=code, handler="endpoint_forwarder.handler",
            description=f"the System One API's calls to {decision.serving_name}", timeout_s=timeout_s,
            environment={"SEMIF_ENDPOINT_NAME": decision.endpoint_name,
                         "SEMIF_INFERENCE_COMPONENT_NAME": decision.component_name or "",
                         "SEMIF_MAX_BODY_BYTES": str(body_limit(deployment.settings, settings)),
                         "SEMIF_READ_TIMEOUT_S": str(read_timeout_s(timeout_s))}, log_settings=log_settings)
        self.forwarder_function.add_to_role_policy(iam.PolicyStatement(
            sid="InvokeTheDecisionModel", actions=INVOKE_ACTIONS, resources=decision.invoke_arns))

        self.ops = ApiOperations(self, "Operations", name=self.name, stack_name=deployment.stack_name,
                                 settings=settings, log_settings=log_settings, alarm_topic=alarm_topic)
        self.api = apigw.RestApi(
            self, "Api", rest_api_name=self.name,
            description=f"{deployment.stack_name}: System One API (Bearer keys) in front of {decision.serving_name}",
            endpoint_configuration=apigw.EndpointConfiguration(types=[apigw.EndpointType.REGIONAL]),
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,
            binary_media_types=["*/*"],  # every body arrives as sent (zstd, gzip) and base64-encoded for the Lambda
            cloud_watch_role=settings.account_logging_role,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE, access_log_destination=apigw.LogGroupLogDestination(self.ops.access_logs),
                access_log_format=self.ops.access_log_format, logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False, metrics_enabled=False, tracing_enabled=False))
        self.stage = self.api.deployment_stage
        self.ops.attach(self.api, self.stage, STAGE)
        self._routes(timeout_s)
        self._gateway_responses()
        self.usage_plan = self.api.add_usage_plan(
            "UsagePlan", name=self.name, description="per-key limits of the System One API",
            throttle=apigw.ThrottleSettings(rate_limit=settings.throttle.rate_per_s,
                                            burst_limit=settings.throttle.burst),
            quota=apigw.QuotaSettings(limit=settings.quota.requests, period=apigw.Period[settings.quota.period])
            if settings.quota else None,
            api_stages=[apigw.UsagePlanPerApiStage(api=self.api, stage=self.stage)])
        # The SDK's base_url: the stage's URL without a trailing slash (the SDK appends /v1/systemone).
        self.url = f"https://{self.api.rest_api_id}.execute-api.{stack.region}.{stack.url_suffix}/{STAGE}"
        self.api.node.try_remove_child("Endpoint")  # CDK's own output of the URL (with a slash): SystemOneApiUrl
        self.domain = self._domain() if settings.domain else None
        if self.domain is not None:
            self.url = f"https://{settings.domain.name}"  # type: ignore[union-attr]
        self._acknowledge()
        accept_redundant_depends_on(self)  # CDK's functions depend on their roles twice (cfn-lint W3005)

    # ---- the functions ---------------------------------------------------------------------------------------

    def _function(self, construct_id: str, *, code: lambda_.Code, handler: str, description: str, timeout_s: int,
                  environment: dict[str, str], log_settings: LogSettings) -> lambda_.Function:
        role = iam.Role(self, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"Runs {description}")
        log_group = log_settings.log_group(self, f"{construct_id}Logs")
        function = lambda_.Function(
            self, construct_id, runtime=RUNTIME, architecture=lambda_.Architecture.ARM_64, handler=handler, code=code,
            description=description, timeout=Duration.seconds(timeout_s), memory_size=MEMORY_MB, role=role,
            environment=environment, log_group=log_group, logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=lambda_.SystemLogLevel.WARN, application_log_level_v2=lambda_.ApplicationLogLevel.INFO)
        log_group.grant_write(role)
        acknowledge(function, API_FUNCTION)
        return function

    def _allow_key_reads(self, stack: Stack) -> None:
        """The authorizer reads the keys under this API's path, and decrypts them only through SSM, only there."""
        path = stack.format_arn(service="ssm", resource="parameter", resource_name=self.keys_path.lstrip("/"))
        self.authorizer_function.add_to_role_policy(iam.PolicyStatement(
            sid="ReadTheApiKeys", actions=["ssm:GetParametersByPath"], resources=[path, f"{path}/*"]))
        self.authorizer_function.add_to_role_policy(iam.PolicyStatement(
            sid="DecryptTheApiKeys", actions=["kms:Decrypt"], resources=[self.key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"ssm.{stack.region}.{stack.url_suffix}"},
                        "ArnLike": {"kms:EncryptionContext:PARAMETER_ARN": f"{path}/*"}}))
        account = stack.resolve(stack.account)
        shown = "<AWS::AccountId>" if isinstance(account, dict) else account  # as cdk-nag spells the account
        acknowledge(self.authorizer_function.role, {  # type: ignore[arg-type]
            f"AwsSolutions-IAM5[Resource::arn:{stack.resolve(stack.partition)}:ssm:{stack.resolve(stack.region)}:"
            f"{shown}:parameter{self.keys_path}/*]":
                "one SecureString per key, made after deployment by `semif keys create` under this API's own path; "
                "read only with GetParametersByPath, decrypted only through SSM"})

    # ---- routes and answers ----------------------------------------------------------------------------------

    def _routes(self, timeout_s: int) -> None:
        authorizer = apigw.TokenAuthorizer(
            self, "KeyCheck", handler=self.authorizer_function, authorizer_name=f"{self.name}-keys",
            results_cache_ttl=Duration.seconds(self.settings.authorizer_cache_s))
        integration = apigw.LambdaIntegration(self.forwarder_function, proxy=True, allow_test_invoke=False,
                                              timeout=Duration.seconds(timeout_s))
        v1 = self.api.root.add_resource("v1")
        for path, method in ROUTES:
            v1.add_resource(path).add_method(method, integration, authorizer=authorizer, api_key_required=True,
                                             authorization_type=apigw.AuthorizationType.CUSTOM)

    def _gateway_responses(self) -> None:
        for name, (status, error_type, message, retry_after) in GATEWAY_RESPONSES.items():
            self.api.add_gateway_response(
                f"{name.title().replace('_', '')}Response", type=getattr(apigw.ResponseType, name),
                status_code=str(status) if status is not None else None,
                response_headers={"Retry-After": f"'{retry_after}'"} if retry_after else None,
                templates={"application/json": gateway_template(status, error_type, message)})

    def _domain(self) -> apigw.DomainName:
        domain = self.settings.domain
        assert domain is not None and domain.certificate_arn is not None  # config: both or refused
        name = apigw.DomainName(
            self, "Domain", domain_name=domain.name, endpoint_type=apigw.EndpointType.REGIONAL,
            certificate=acm.Certificate.from_certificate_arn(self, "Certificate", domain.certificate_arn),
            security_policy=apigw.SecurityPolicy.TLS_1_2)
        name.add_base_path_mapping(self.api, stage=self.stage)
        if domain.hosted_zone_id is not None and domain.hosted_zone_name is not None:
            zone = route53.HostedZone.from_hosted_zone_attributes(
                self, "Zone", hosted_zone_id=domain.hosted_zone_id, zone_name=domain.hosted_zone_name)
            route53.ARecord(self, "Alias", zone=zone, record_name=domain.name,
                            target=route53.RecordTarget.from_alias(route53_targets.ApiGatewayDomain(name)))
        return name

    def _acknowledge(self) -> None:
        reasons = {
            "AwsSolutions-APIG2": "the decision container validates every body itself and answers in System One's "
                                  "shape (422 detail[]); API Gateway's validation would answer in another shape",
            "AwsSolutions-COG4": "System One's clients authenticate with Bearer API keys (the official SDK's "
                                 "contract), checked by the Lambda authorizer against hashed keys; Cognito user "
                                 "pools issue user tokens, which these clients cannot send",
            f"{NIST}APIGWCacheEnabledAndEncrypted": "every answer is one caller's decision about its own request; a "
                                                    "response cache could serve it to another caller",
            f"{NIST}APIGWSSLEnabled": "the integration is a Lambda function (AWS's API, over TLS), not an HTTP "
                                      "backend that a client certificate could authenticate to",
        }
        if self.settings.account_logging_role:
            reasons["AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AmazonAPIGatewayPushToCloudWatchLogs]"] = (
                "API Gateway's CloudWatch Logs role is one per account and region, used by every API there (AWS's "
                "documented setup with its managed policy); it is retained when the stack is deleted")
        acknowledge(self, reasons)
        acknowledge(self.stage, {
            "CKV_AWS_120": reasons[f"{NIST}APIGWCacheEnabledAndEncrypted"],
            "CKV_AWS_73": "X-Ray would add a paid trace per request; the access log (request id, key id, latency, "
                          "integration latency) and the decision endpoint's own metrics already locate a slow call"})
        waf = self.settings.waf
        if waf is None or not waf.enabled:
            without_waf = ("WAF is off in this environment (https_api.waf.enabled): every call still needs a "
                           "stored key (the Lambda authorizer) and each key is throttled by the usage plan; turn it "
                           "on for AWS's IP reputation rules and a rate limit per client IP")
            acknowledge(self.stage, {f"{NIST}APIGWAssociatedWithWAF": without_waf, "AwsSolutions-APIG3": without_waf,
                                     "CKV2_AWS_29": without_waf})
