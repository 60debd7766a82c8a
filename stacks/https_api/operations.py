"""Operating the System One API: its logs, per-key request counts, alarms, dashboard widgets and optional WAF.

- The access log is JSON, one line per request, with the caller's key id (`keyId`, from the authorizer), never the
  key: `ACCESS_LOG` holds `api_front.ACCESS_LOG_FIELDS` (what the local gateway logs) plus API Gateway's
  extras. Execution logs (errors only, no bodies) go to the group API Gateway would make itself, made here first so
  that it has the retention and the data key.
- Requests per key: a metric filter on the access log (`SemIf/SystemOneApi` `Requests` by `ApiId` and `KeyId`).
- Alarms on API Gateway's metrics of the stage, notifying the environment's topic: the 4xx and 5xx rates (counted only
  in periods with enough requests) and Latency p90.
- WAF (optional): AWS's IP reputation and known-bad-inputs rule groups and a rate limit per client IP, its logs
  with the Authorization header redacted and no sampled requests kept (a sample would show the header).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from ..config.https_api import HttpsApi
from ..config.https_api_rules import latency_threshold_ms
from ..operations.logs import LogSettings
from ..operations.notifications import AlarmTopic

API_NAMESPACE = "AWS/ApiGateway"
PER_KEY_NAMESPACE = "SemIf/SystemOneApi"
# One JSON object per request; the authorizer's `keyId` is the caller's key id (never the key itself).
ACCESS_LOG = {
    "requestId": "$context.requestId", "apiId": "$context.apiId", "keyId": "$context.authorizer.keyId",
    "ip": "$context.identity.sourceIp", "method": "$context.httpMethod", "path": "$context.resourcePath",
    "status": "$context.status", "latencyMs": "$context.responseLatency",
    "integrationLatencyMs": "$context.integrationLatency", "responseLength": "$context.responseLength",
    "error": "$context.error.messageString", "wafStatus": "$context.waf.status",
}
UNQUOTED = frozenset({"status", "error"})  # a number, and a value API Gateway quotes itself
WIDTH, HEIGHT = 8, 6


def access_log_format() -> str:
    return "{" + ", ".join(f'"{name}": {value}' if name in UNQUOTED else f'"{name}": "{value}"'
                           for name, value in ACCESS_LOG.items()) + "}"


class ApiOperations(Construct):
    """Made before the API (its access log group is a stage setting), then `attach`ed to it."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str, stack_name: str, settings: HttpsApi,
                 log_settings: LogSettings, alarm_topic: AlarmTopic) -> None:
        super().__init__(scope, construct_id)
        self.name, self.stack_name, self.settings = name, stack_name, settings
        self.log_settings, self.alarm_topic = log_settings, alarm_topic
        self.access_logs = log_settings.log_group(self, "AccessLogs")
        self.access_log_format = apigw.AccessLogFormat.custom(access_log_format())
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.web_acl: wafv2.CfnWebACL | None = None

    def attach(self, api: apigw.RestApi, stage: apigw.Stage, stage_name: str) -> None:
        self.api, self.stage, self.stage_name = api, stage, stage_name
        execution_logs = self.log_settings.log_group(
            self, "ExecutionLogs", name=f"API-Gateway-Execution-Logs_{api.rest_api_id}/{stage_name}")
        stage.node.add_dependency(execution_logs)  # else API Gateway makes it first, unencrypted, kept forever
        logs.MetricFilter(self, "RequestsPerKey", log_group=self.access_logs, metric_namespace=PER_KEY_NAMESPACE,
                          metric_name="Requests", metric_value="1", unit=cloudwatch.Unit.COUNT,
                          filter_pattern=logs.FilterPattern.literal('{ $.keyId != "-" }'),
                          dimensions={"ApiId": "$.apiId", "KeyId": "$.keyId"})
        self._alarms()
        waf = self.settings.waf
        if waf is not None and waf.enabled:
            self._web_acl(waf.rate_limit_per_5min, waf.managed_rules is not False)

    # ---- metrics and alarms ----------------------------------------------------------------------------------

    def metric(self, name: str, statistic: str, label: str | None = None) -> cloudwatch.Metric:
        return cloudwatch.Metric(namespace=API_NAMESPACE, metric_name=name, statistic=statistic, label=label,
                                 dimensions_map={"ApiName": self.name, "Stage": self.stage_name},
                                 period=Duration.seconds(self.settings.alarms.period_s))

    def error_rate(self, metric_name: str) -> cloudwatch.MathExpression:
        """Errors / requests per period, 0 in a period with fewer than `min_requests` requests."""
        alarms = self.settings.alarms
        return cloudwatch.MathExpression(
            expression=f"IF(requests >= {alarms.min_requests}, errors / requests, 0)",
            label=f"{metric_name} / requests", period=Duration.seconds(alarms.period_s),
            using_metrics={"errors": self.metric(metric_name, "Sum"), "requests": self.metric("Count", "Sum")})

    def _alarms(self) -> None:
        alarms = self.settings.alarms
        above = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        latency_ms = latency_threshold_ms(self.settings)
        for key, alarm_id, suffix, description, metric, threshold in (
                ("4xx", "ClientErrorRateAlarm", "4xx-rate",
                 f"more than {alarms.client_error_rate:.0%} of requests answered 4xx (refused keys, throttling, bad "
                 "requests)", self.error_rate("4XXError"), alarms.client_error_rate),
                ("5xx", "ServerErrorRateAlarm", "5xx-rate", f"more than {alarms.server_error_rate:.0%} of requests "
                 "answered 5xx", self.error_rate("5XXError"), alarms.server_error_rate),
                ("latency", "LatencyAlarm", "latency", f"Latency p90 above {latency_ms:g} ms",
                 self.metric("Latency", "p90"), latency_ms)):
            self.alarms[key] = cloudwatch.Alarm(
                self, alarm_id, alarm_name=f"{self.stack_name}-systemone-api-{suffix}",
                alarm_description=f"{self.name}: {description}", metric=metric, threshold=threshold,
                comparison_operator=above, evaluation_periods=alarms.evaluation_periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
            self.alarm_topic.notify(self.alarms[key])

    def widgets(self) -> list[cloudwatch.IWidget]:
        """The API's row of the environment's dashboard: traffic, errors, latency, and requests per key."""
        per_key = cloudwatch.MathExpression(
            expression=(f"SEARCH('{{{PER_KEY_NAMESPACE},ApiId,KeyId}} MetricName=\"Requests\" "
                        f"ApiId=\"{self.api.rest_api_id}\"', 'Sum', 60)"),
            label="requests per key", period=Duration.minutes(1))
        return [
            cloudwatch.TextWidget(markdown=f"## System One API {self.name} (stage {self.stage_name})",
                                  width=24, height=1),
            cloudwatch.GraphWidget(title="API: requests and errors", width=WIDTH, height=HEIGHT, left=[
                self.metric("Count", "Sum", "requests"), self.metric("4XXError", "Sum", "4xx"),
                self.metric("5XXError", "Sum", "5xx")]),
            cloudwatch.GraphWidget(title="API: latency (ms)", width=WIDTH, height=HEIGHT, left=[
                *(self.metric("Latency", p, f"latency {p}") for p in ("p50", "p90", "p99")),
                self.metric("IntegrationLatency", "p90", "integration p90")]),
            cloudwatch.GraphWidget(title="API: requests per key (key id)", width=WIDTH, height=HEIGHT, left=[per_key]),
            cloudwatch.LogQueryWidget(
                title="API: requests per key and status (access log)", width=24, height=HEIGHT,
                log_group_names=[self.access_logs.log_group_name],
                query_lines=["fields keyId, status", "filter keyId != '-'",
                             "stats count(*) as requests by keyId, status", "sort requests desc"]),
        ]

    # ---- WAF -------------------------------------------------------------------------------------------------

    def _visibility(self, metric_name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
        # No sampled requests: a sample keeps the request's headers, the Authorization header (a key) among them.
        return wafv2.CfnWebACL.VisibilityConfigProperty(cloud_watch_metrics_enabled=True, metric_name=metric_name,
                                                        sampled_requests_enabled=False)

    def _web_acl(self, rate_limit: int | None, managed: bool) -> None:
        rules = []
        if managed:
            for priority, group in enumerate(("AWSManagedRulesAmazonIpReputationList",
                                              "AWSManagedRulesKnownBadInputsRuleSet")):
                rules.append(wafv2.CfnWebACL.RuleProperty(
                    name=group, priority=priority, override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                            vendor_name="AWS", name=group)),
                    visibility_config=self._visibility(f"{self.name}-{group}")))
        if rate_limit is not None:
            rules.append(wafv2.CfnWebACL.RuleProperty(
                name="RateLimitPerClientIp", priority=len(rules), action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                statement=wafv2.CfnWebACL.StatementProperty(
                    rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                        limit=rate_limit, aggregate_key_type="IP", evaluation_window_sec=300)),
                visibility_config=self._visibility(f"{self.name}-rate-limit")))
        self.web_acl = wafv2.CfnWebACL(
            self, "WebAcl", name=self.name, scope="REGIONAL", default_action=wafv2.CfnWebACL.DefaultActionProperty(
                allow={}), rules=rules, visibility_config=self._visibility(self.name))
        wafv2.CfnWebACLAssociation(self, "WebAclAssociation", resource_arn=self.stage.stage_arn,  # after the stage
                                   web_acl_arn=self.web_acl.attr_arn)
        waf_logs_name = f"aws-waf-logs-{self.name}"  # WAF logs only to groups named so
        waf_logs = self.log_settings.log_group(self, "WafLogs", name=waf_logs_name)
        logging = wafv2.CfnLoggingConfiguration(
            self, "WafLogging", resource_arn=self.web_acl.attr_arn,
            log_destination_configs=[Stack.of(self).format_arn(  # the group's ARN without CloudFormation's ":*"
                service="logs", resource="log-group", resource_name=waf_logs_name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME)],
            redacted_fields=[wafv2.CfnLoggingConfiguration.FieldToMatchProperty(
                single_header={"Name": "authorization"})])
        logging.node.add_dependency(waf_logs)

