"""The System One API in front of the decision endpoint (issue 29), in every hosting mode: the shipped `api`
environment (dedicated, WAF, a quota), `shared` (the decision model's inference component) and `serverless` (a
custom domain, no account logging role, WAF off), as `cdk synth` makes them with cdk-nag on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_apigateway as apigw
from cdk_support import CERTIFICATE_ARN, Synth, acknowledgements, acknowledgements_in_effect, as_list

from scripts.keys.store import OUTPUTS as KEYS_OUTPUTS
from scripts.smoke.systemone import URL_OUTPUT
from semif_decision_client.api_front import (
    ACCESS_LOG_FIELDS,
    DENIED_MESSAGE,
    UNAUTHORIZED_MESSAGE,
    Admission,
    refusal,
)
from semif_decision_client.invoke_wire import OPENAI_CODES, OPENAI_TYPES
from stacks.https_api.front import BUNDLE, GATEWAY_RESPONSES, STAGE

MODES = ("api", "api_shared", "api_serverless")
DECISION = {"api": ("semif-api-decision", None),
            "api_shared": ("semif-shared-models", "semif-shared-decision"),
            "api_serverless": ("semif-serverless-decision-serverless", None)}
CONTAINER_LIMIT = {"api": 6 * 2**20, "api_shared": 6 * 2**20, "api_serverless": 2**20}  # the last one configured


@pytest.fixture(params=MODES)
def each_api(request: pytest.FixtureRequest) -> tuple[str, Synth]:
    return request.param, request.getfixturevalue(request.param)


def settings(synth: Synth) -> Any:
    return synth.stack.deployment.settings.https_api


def only(synth: Synth, resource_type: str) -> tuple[str, dict[str, Any]]:
    found = list(synth.resources(resource_type).items())
    assert len(found) == 1, [k for k, _ in found]
    return found[0]


def function(synth: Synth, name: str) -> dict[str, Any]:
    return synth.one("AWS::Lambda::Function", f"/SystemOneApi/{name}/Resource")[1]["Properties"]


def statements(synth: Synth, name: str) -> list[dict[str, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", f"/SystemOneApi/{name}Role/DefaultPolicy")
    return policy["Properties"]["PolicyDocument"]["Statement"]


def paths(synth: Synth) -> dict[str, str]:
    """Logical id of each API resource -> its path."""
    api_id, _ = only(synth, "AWS::ApiGateway::RestApi")
    resources = synth.resources("AWS::ApiGateway::Resource")
    found: dict[str, str] = {}

    def path_of(logical_id: str) -> str:
        parent = resources[logical_id]["Properties"]["ParentId"]
        prefix = "" if parent == {"Fn::GetAtt": [api_id, "RootResourceId"]} else path_of(parent["Ref"])
        return f"{prefix}/{resources[logical_id]['Properties']['PathPart']}"

    for logical_id in resources:
        found[logical_id] = path_of(logical_id)
    return found


def test_three_routes_each_behind_the_key_check_and_the_usage_plan(each_api: tuple[str, Synth]) -> None:
    """System One's route, OpenAI's Decisions API and the models list both read: the same authorizer, usage plan
    (throttle and quota are per stage), forwarder and integration timeout."""
    _, synth = each_api
    _, api = only(synth, "AWS::ApiGateway::RestApi")
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"  # the authorizer names each caller's usage key
    assert api["Properties"]["BinaryMediaTypes"] == ["*/*"]  # bodies reach the forwarder as sent (zstd, gzip)
    assert api["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    authorizer_id, authorizer = only(synth, "AWS::ApiGateway::Authorizer")
    assert authorizer["Properties"]["Type"] == "TOKEN"
    assert authorizer["Properties"]["IdentitySource"] == "method.request.header.Authorization"
    assert authorizer["Properties"]["AuthorizerResultTtlInSeconds"] == settings(synth).authorizer_cache_s
    forwarder_id, _ = synth.one("AWS::Lambda::Function", "/SystemOneApi/Forwarder/Resource")
    routes = paths(synth)
    methods = {(m["Properties"]["HttpMethod"], routes[m["Properties"]["ResourceId"]["Ref"]]): m["Properties"]
               for m in synth.resources("AWS::ApiGateway::Method").values()}
    assert set(methods) == {("POST", "/v1/systemone"), ("POST", "/v1/decisions"), ("GET", "/v1/models")}
    for method in methods.values():
        assert method["AuthorizationType"] == "CUSTOM" and method["AuthorizerId"] == {"Ref": authorizer_id}
        assert method["ApiKeyRequired"] is True
        integration = method["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        assert integration["TimeoutInMillis"] == settings(synth).integration_timeout_s * 1000
        assert {"Fn::GetAtt": [forwarder_id, "Arn"]} in integration["Uri"]["Fn::Join"][1]


def test_the_forwarder_invokes_only_the_decision_model_of_its_mode(each_api: tuple[str, Synth]) -> None:
    name, synth = each_api
    endpoint, component = DECISION[name]
    props = function(synth, "Forwarder")
    timeout_s = settings(synth).integration_timeout_s
    assert props["Environment"]["Variables"] == {
        "SEMIF_ENDPOINT_NAME": endpoint, "SEMIF_INFERENCE_COMPONENT_NAME": component or "",
        "SEMIF_MAX_BODY_BYTES": str(CONTAINER_LIMIT[name]), "SEMIF_READ_TIMEOUT_S": str(float(timeout_s - 1))}
    assert props["Timeout"] == timeout_s and props["Runtime"] == "python3.14" and props["Architectures"] == ["arm64"]
    invoke = [s for s in statements(synth, "Forwarder") if s.get("Sid") == "InvokeTheDecisionModel"]
    assert len(invoke) == 1 and invoke[0]["Action"] == "sagemaker:InvokeEndpoint"
    arns = [resource["Fn::Join"][1][-1] for resource in as_list(invoke[0]["Resource"])]
    assert arns == [f":endpoint/{endpoint}", *([f":inference-component/{component}"] if component else [])]
    actions = {a for s in statements(synth, "Forwarder") for a in as_list(s["Action"])}
    assert actions == {"sagemaker:InvokeEndpoint", "logs:CreateLogStream", "logs:PutLogEvents"}


def test_the_authorizer_reads_only_this_apis_keys_and_decrypts_them_only_through_ssm(
        each_api: tuple[str, Synth]) -> None:
    _, synth = each_api
    stack = synth.stack.deployment.stack_name
    path = f"/{stack}/systemone-api/keys"
    assert function(synth, "Authorizer")["Environment"]["Variables"] == {"SEMIF_KEYS_PATH": path}
    assert synth.json["Outputs"]["SystemOneApiKeysPath"]["Value"] == path
    found = {s.get("Sid"): s for s in statements(synth, "Authorizer")}
    reads = [r["Fn::Join"][1][-1] for r in found["ReadTheApiKeys"]["Resource"]]
    assert found["ReadTheApiKeys"]["Action"] == "ssm:GetParametersByPath"
    assert reads == [f":parameter{path}", f":parameter{path}/*"]
    decrypt = found["DecryptTheApiKeys"]
    key_id, _ = synth.one("AWS::KMS::Key", "/DataKey")
    assert decrypt["Action"] == "kms:Decrypt" and decrypt["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert decrypt["Condition"]["StringEquals"]["kms:ViaService"]["Fn::Join"][1][0] == "ssm.us-east-1."
    assert decrypt["Condition"]["ArnLike"]["kms:EncryptionContext:PARAMETER_ARN"]["Fn::Join"][1][-1] == \
        f":parameter{path}/*"
    assert synth.json["Outputs"]["SystemOneApiKeysKeyArn"]["Value"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_the_lambda_bundle_holds_exactly_the_front_and_imports_nothing_else_of_ours(api: Synth) -> None:
    """Both functions' code: the handlers, the client's front and the container's key checker and parser; imported
    from the bundle alone (boto3 is the Lambda runtime's), with no dependency the runtime lacks."""
    code = function(api, "Forwarder")["Code"]
    assert code == function(api, "Authorizer")["Code"]
    bundle = Path(api.app.outdir) / f"asset.{code['S3Key'].removesuffix('.zip')}"
    files = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
    assert files == set(BUNDLE)
    probe = ("import sys, json; sys.path.insert(0, '.')\n"
             "import key_authorizer, endpoint_forwarder\n"
             "ours = {n: m.__file__ for n, m in sys.modules.items() if n.split('.')[0] in "
             "('semif_adapter', 'semif_decision_client', 'key_authorizer', 'endpoint_forwarder')}\n"
             "others = sorted({n.split('.')[0] for n in sys.modules} & {'pydantic', 'httpx', 'httpx2', 'starlette', "
             "'anyio', 'numpy', 'llama_cpp', 'aws_cdk', 'typesafe_sdk'})\n"
             "print(json.dumps({'ours': ours, 'others': others}))")
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", probe], cwd=bundle, env=environment, capture_output=True,
                            text=True, timeout=60, check=True)
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert loaded["others"] == []
    assert {Path(path).resolve().is_relative_to(bundle.resolve()) for path in loaded["ours"].values()} == {True}


def test_api_gateways_own_answers_are_system_one_and_openai_errors_at_once(api: Synth) -> None:
    """A gateway response cannot tell the route (its template substitutes variables, no more), so its body is both
    System One's `detail` and OpenAI's `error`: each SDK reads its own."""
    by_type = {r["Properties"]["ResponseType"]: r["Properties"]
               for r in api.resources("AWS::ApiGateway::GatewayResponse").values()}
    found = {name: by_type[getattr(apigw.ResponseType, name).response_type] for name in GATEWAY_RESPONSES}
    assert len(by_type) == len(GATEWAY_RESPONSES)
    for response_type, (status, error_type, message, retry_after) in GATEWAY_RESPONSES.items():
        props = found[response_type]
        assert props.get("StatusCode") == (str(status) if status is not None else None)
        body = props["ResponseTemplates"]["application/json"].replace("$context.error.messageString",
                                                                      '"API Gateway\'s message"')
        document = json.loads(body)
        detail, error = document["detail"], document["error"]
        assert detail["error_type"] == error_type
        assert detail["message"] == error["message"] == (message if message is not None else "API Gateway's message")
        assert error["code"] == OPENAI_CODES[error_type] and error["param"] is None
        assert error["type"] == OPENAI_TYPES.get(status or 0, "server_error" if error_type == "internal_error"
                                                 else "invalid_request_error")
        assert props.get("ResponseParameters", {}).get("gatewayresponse.header.Retry-After") == \
            (f"'{retry_after}'" if retry_after else None)
    # The local gateway's front says the same (api_front's messages), in API Gateway's order of statuses.
    assert (found["UNAUTHORIZED"]["StatusCode"], found["ACCESS_DENIED"]["StatusCode"]) == ("401", "403")
    assert UNAUTHORIZED_MESSAGE in found["UNAUTHORIZED"]["ResponseTemplates"]["application/json"]
    assert DENIED_MESSAGE in found["ACCESS_DENIED"]["ResponseTemplates"]["application/json"]
    for response_type, admission in (("UNAUTHORIZED", Admission.WRONG_KEY), ("ACCESS_DENIED", Admission.NOT_BEARER)):
        assert json.loads(found[response_type]["ResponseTemplates"]["application/json"]) == \
            json.loads(refusal(admission)[2])  # the local front's refusal, byte for byte in meaning
    retried = {t for t, (status, *_rest) in GATEWAY_RESPONSES.items() if status in (429, 503, 504)}
    assert retried == {"THROTTLED", "AUTHORIZER_FAILURE", "AUTHORIZER_CONFIGURATION_ERROR", "INTEGRATION_TIMEOUT"}


def test_the_usage_plan_limits_each_key(each_api: tuple[str, Synth]) -> None:
    _, synth = each_api
    stage_id, _ = only(synth, "AWS::ApiGateway::Stage")
    plan_id, plan = only(synth, "AWS::ApiGateway::UsagePlan")
    props, config = plan["Properties"], settings(synth)
    assert props["Throttle"] == {"RateLimit": config.throttle.rate_per_s, "BurstLimit": config.throttle.burst}
    assert props.get("Quota") == ({"Limit": config.quota.requests, "Period": config.quota.period}
                                  if config.quota else None)
    assert [s["Stage"] for s in props["ApiStages"]] == [{"Ref": stage_id}]
    assert synth.json["Outputs"]["SystemOneApiUsagePlanId"]["Value"] == {"Ref": plan_id}


def test_the_access_log_names_the_key_id_never_the_key(each_api: tuple[str, Synth]) -> None:
    _, synth = each_api
    _, stage = only(synth, "AWS::ApiGateway::Stage")
    setting = stage["Properties"]["AccessLogSetting"]
    fields = json.loads(setting["Format"].replace("$context.status", "200").replace(
        "$context.error.messageString", '"-"'))
    assert set(ACCESS_LOG_FIELDS) <= set(fields)  # what the local gateway's front logs too
    assert fields["keyId"] == "$context.authorizer.keyId"
    assert not any(word in setting["Format"].lower() for word in ("apikey}", "identity.apikey\"", "authorization"))
    access_id, access = synth.one("AWS::Logs::LogGroup", "/SystemOneApi/Operations/AccessLogs")
    assert {"Ref": access_id} in setting["DestinationArn"]["Fn::Join"][1]
    assert stage["Properties"]["MethodSettings"] == [{"DataTraceEnabled": False, "HttpMethod": "*",
                                                      "LoggingLevel": "ERROR", "MetricsEnabled": False,
                                                      "ResourcePath": "/*"}]
    execution_id, execution = synth.one("AWS::Logs::LogGroup", "/SystemOneApi/Operations/ExecutionLogs")
    api_id, _ = only(synth, "AWS::ApiGateway::RestApi")
    assert execution["Properties"]["LogGroupName"] == {"Fn::Join": ["", [
        "API-Gateway-Execution-Logs_", {"Ref": api_id}, f"/{STAGE}"]]}
    assert execution_id in stage["DependsOn"]  # made first, so API Gateway does not make it unencrypted
    key_id, _ = synth.one("AWS::KMS::Key", "/DataKey")
    for group in (access, execution):
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert group["Properties"]["RetentionInDays"] == synth.stack.deployment.settings.log_retention_days


def test_alarms_on_error_rates_and_latency_notify_the_environments_topic(each_api: tuple[str, Synth]) -> None:
    _, synth = each_api
    stack = synth.stack.deployment.stack_name
    topic_id, _ = synth.one("AWS::SNS::Topic", "/Alarms/Topic")
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()
              if "systemone-api" in a["Properties"]["AlarmName"]}
    assert set(alarms) == {f"{stack}-systemone-api-{suffix}" for suffix in ("4xx-rate", "5xx-rate", "latency")}
    config = settings(synth).alarms
    for alarm in alarms.values():
        assert {"Ref": topic_id} in alarm["AlarmActions"]
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["EvaluationPeriods"] == config.evaluation_periods
    rate = alarms[f"{stack}-systemone-api-4xx-rate"]
    assert rate["Threshold"] == config.client_error_rate
    expressions = [m["Expression"] for m in rate["Metrics"] if "Expression" in m]
    assert expressions == [f"IF(requests >= {config.min_requests}, errors / requests, 0)"]
    dimensions = [{d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"]["Dimensions"]}
                  for m in rate["Metrics"] if "MetricStat" in m]
    assert dimensions == [{"ApiName": f"{stack}-systemone", "Stage": STAGE}] * 2
    latency = alarms[f"{stack}-systemone-api-latency"]
    expected = config.latency_p90_ms or settings(synth).integration_timeout_s * 1000 * 0.8
    assert (latency["Threshold"], latency["ExtendedStatistic"]) == (expected, "p90")


def test_requests_per_key_are_counted_and_on_the_dashboard(each_api: tuple[str, Synth]) -> None:
    _, synth = each_api
    _, metric_filter = only(synth, "AWS::Logs::MetricFilter")
    transformation = metric_filter["Properties"]["MetricTransformations"][0]
    assert transformation["MetricNamespace"] == "SemIf/SystemOneApi" and transformation["MetricName"] == "Requests"
    assert transformation["Dimensions"] == [{"Key": "ApiId", "Value": "$.apiId"}, {"Key": "KeyId", "Value": "$.keyId"}]
    assert metric_filter["Properties"]["FilterPattern"] == '{ $.keyId != "-" }'  # refused calls have no key id
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard", "/Operations/Dashboard")
    body = "".join(p if isinstance(p, str) else json.dumps(p)
                   for p in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1])
    assert "SEARCH('{SemIf/SystemOneApi,ApiId,KeyId} MetricName=\\\"Requests\\\"" in body
    assert "stats count(*) as requests by keyId, status" in body


def test_waf_where_enabled_with_keys_never_kept_in_its_logs_or_samples(api: Synth, api_shared: Synth,
                                                                       api_serverless: Synth) -> None:
    rules = {}
    for name, synth in (("api", api), ("api_shared", api_shared)):
        acl_id, acl = only(synth, "AWS::WAFv2::WebACL")
        stage_id, _ = only(synth, "AWS::ApiGateway::Stage")
        _, association = only(synth, "AWS::WAFv2::WebACLAssociation")
        assert association["Properties"]["WebACLArn"] == {"Fn::GetAtt": [acl_id, "Arn"]}
        assert stage_id in json.dumps(association["Properties"]["ResourceArn"])
        rules[name] = {r["Name"]: r for r in acl["Properties"]["Rules"]}
        visibility = [acl["Properties"]["VisibilityConfig"], *(r["VisibilityConfig"] for r in rules[name].values())]
        assert {v["SampledRequestsEnabled"] for v in visibility} == {False}  # a sample would show the header
        _, logging = only(synth, "AWS::WAFv2::LoggingConfiguration")
        assert logging["Properties"]["RedactedFields"] == [{"SingleHeader": {"Name": "authorization"}}]
        assert "aws-waf-logs-" in json.dumps(logging["Properties"]["LogDestinationConfigs"])
    managed = {"AWSManagedRulesAmazonIpReputationList", "AWSManagedRulesKnownBadInputsRuleSet"}
    assert set(rules["api"]) == {*managed, "RateLimitPerClientIp"}
    assert rules["api"]["RateLimitPerClientIp"]["Statement"]["RateBasedStatement"]["Limit"] == 1000
    assert set(rules["api_shared"]) == managed
    assert not api_serverless.resources("AWS::WAFv2::WebACL")
    stage = api_serverless.construct(only(api_serverless, "AWS::ApiGateway::Stage")[0])
    assert "WAF is off" in acknowledgements_in_effect(stage)["NIST.800.53.R5-APIGWAssociatedWithWAF"]


def test_a_custom_domain_with_its_alias_record_is_the_apis_url(api_serverless: Synth) -> None:
    _, domain = only(api_serverless, "AWS::ApiGateway::DomainName")
    assert domain["Properties"] == {"DomainName": "decisions.example.com", "EndpointConfiguration": {
        "Types": ["REGIONAL"]}, "RegionalCertificateArn": CERTIFICATE_ARN, "SecurityPolicy": "TLS_1_2"}
    stage_id, _ = only(api_serverless, "AWS::ApiGateway::Stage")
    _, mapping = only(api_serverless, "AWS::ApiGateway::BasePathMapping")
    assert mapping["Properties"]["Stage"] == {"Ref": stage_id}
    _, record = only(api_serverless, "AWS::Route53::RecordSet")
    assert (record["Properties"]["Name"], record["Properties"]["Type"]) == ("decisions.example.com.", "A")
    assert record["Properties"]["HostedZoneId"] == "Z0123456789ABCDEFGHIJ"
    assert api_serverless.json["Outputs"][URL_OUTPUT]["Value"] == "https://decisions.example.com"
    assert not api_serverless.resources("AWS::ApiGateway::Account")  # account_logging_role: false


def test_the_outputs_the_tools_read_and_the_url_has_no_trailing_slash(each_api: tuple[str, Synth]) -> None:
    name, synth = each_api
    outputs = synth.json["Outputs"]
    assert {URL_OUTPUT, *KEYS_OUTPUTS} <= set(outputs)
    assert not [key for key in outputs if key.startswith("SystemOneApiApiEndpoint")], "CDK's own URL output"
    if name != "api_serverless":
        api_id, _ = only(synth, "AWS::ApiGateway::RestApi")
        assert outputs[URL_OUTPUT]["Value"] == {"Fn::Join": ["", [
            "https://", {"Ref": api_id}, ".execute-api.us-east-1.", {"Ref": "AWS::URLSuffix"}, f"/{STAGE}"]]}


def test_the_regions_logging_role_is_api_gateways_documented_one_and_retained(api: Synth) -> None:
    _, account = only(api, "AWS::ApiGateway::Account")
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = api.json["Resources"][role_id]
    assert (account["DeletionPolicy"], role["DeletionPolicy"]) == ("Retain", "Retain")
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [{"Action": "sts:AssumeRole", "Effect": "Allow",
                      "Principal": {"Service": "apigateway.amazonaws.com"}}]  # stacks/security/iam_hardening.UNCONFINED
    others = [r for k, r in api.resources("AWS::IAM::Role").items() if k != role_id]
    assert others and all("Condition" in r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
                          for r in others)


def test_every_finding_of_the_api_is_acknowledged_with_a_reason(each_api: tuple[str, Synth]) -> None:
    _, synth = each_api
    report = json.loads((Path(synth.app.outdir) / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []
    api_node = synth.stack.pair.https_api
    assert api_node is not None
    found = {finding: reason for node in api_node.node.find_all() for finding, reason in
             acknowledgements(node).items()}
    assert {"AwsSolutions-COG4", "AwsSolutions-APIG2", "NIST.800.53.R5-LambdaDLQ"} <= set(found)
    assert all(len(reason) >= 40 for reason in found.values())


def test_an_environment_without_the_api_has_none_of_it(dev: Synth) -> None:
    kinds = {r["Type"] for r in dev.json["Resources"].values()}
    assert not {k for k in kinds if k.startswith(("AWS::ApiGateway::", "AWS::WAFv2::"))}
    assert URL_OUTPUT not in dev.json["Outputs"] and dev.stack.pair.https_api is None
