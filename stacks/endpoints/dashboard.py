"""What the endpoints are doing, on one CloudWatch dashboard per environment, and the decision warning-rate alarm.

Per model: invocations, ModelLatency p50/p90/p99, 4xx/5xx/model errors, utilisation (CPU, memory, GPU where there
is one) and how many instances (or copies) serve it. SageMaker publishes no instance count, so it is derived:
Invocations / InvocationsPerInstance (each invocation adds 1/instances to the latter), which has a point only
where there was traffic. For the decision endpoint, the adapter's own metrics (embedded metric format on stdout,
namespace `SemIf/Adapter`, dimension `EndpointName` = SEMIF_ENDPOINT_NAME, which the stack sets): decisions and
their warnings, latency split, evaluated vs cached tokens, confidence, and the adapter's 4xx/5xx.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ..config.kinds import EndpointKind
from .llama_endpoint import LlamaEndpoint
from .modes.shared import shared_endpoint_widgets
from .shared_endpoint import SharedHostingEndpoint
from .widgets import graph

ADAPTER_NAMESPACE = "SemIf/Adapter"
DEFAULT_WARNING_RATE = 0.25  # the warning-rate alarm's threshold unless decision.alarms.warning_rate sets it


def adapter_metric(endpoint_name: str, name: str, statistic: str, *, period_s: int = 60,
                   label: str | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace=ADAPTER_NAMESPACE, metric_name=name, statistic=statistic, label=label,
                             dimensions_map={"EndpointName": endpoint_name}, period=Duration.seconds(period_s))


def decisions_by_scoring(endpoint_name: str, period_s: int = 60) -> cloudwatch.MathExpression:
    """Decisions per value of the adapter's Scoring dimension, whichever values occur: a search, not a fixed list,
    because a decision model's own head scores as `native:TYPE` (openjev, lev, ...) and our engine as its method."""
    query = (f"{{{ADAPTER_NAMESPACE},EndpointName,Scoring}} MetricName=\"Decisions\" "
             f"EndpointName=\"{endpoint_name}\"")
    return cloudwatch.MathExpression(expression=f"SEARCH('{query}', 'Sum', {period_s})",
                                     label="${PROP('Dim.Scoring')}", using_metrics={},
                                     period=Duration.seconds(period_s))


def warning_rate(endpoint_name: str, period_s: int) -> cloudwatch.MathExpression:
    """WarnedDecisions / Decisions per period (0 where no decision was made)."""
    return cloudwatch.MathExpression(
        expression="IF(decisions > 0, warned / decisions, 0)", label="warned / decisions",
        using_metrics={"warned": adapter_metric(endpoint_name, "WarnedDecisions", "Sum", period_s=period_s),
                       "decisions": adapter_metric(endpoint_name, "Decisions", "Sum", period_s=period_s)},
        period=Duration.seconds(period_s))


def add_warning_rate_alarm(decision: LlamaEndpoint) -> cloudwatch.Alarm:
    """The share of decisions that came back with warnings (low option mass, near ties, ...), above the configured
    `alarms.warning_rate` (default 0.25)."""
    threshold = decision.props.settings.alarms.warning_rate or DEFAULT_WARNING_RATE
    period_s = decision.props.settings.alarms.period_s
    name = decision.serving_name
    return decision.alarm(
        "WarningRateAlarm", f"{name}-warning-rate",
        f"{name}: more than {threshold:.0%} of decisions came back with warnings (WarnedDecisions / Decisions)",
        warning_rate(decision.endpoint_name, period_s), threshold=threshold,
        comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD, datapoints=None)


def model_widgets(kind: EndpointKind, model: LlamaEndpoint, gpu: bool) -> list[cloudwatch.IWidget]:
    """The SageMaker view of one model: traffic, latency, errors, then its mode's utilisation and capacity."""
    name = model.serving_name
    widgets: list[cloudwatch.IWidget] = [
        graph(f"{kind}: invocations ({name})", [model.metric("Invocations", "Sum", label="invocations")]),
        graph(f"{kind}: ModelLatency (microseconds)",
              [model.metric("ModelLatency", p, label=p) for p in ("p50", "p90", "p99")], left_label="µs"),
        graph(f"{kind}: errors", [model.metric("Invocation4XXErrors", "Sum", label="4xx"),
                                  model.metric("Invocation5XXErrors", "Sum", label="5xx"),
                                  model.metric("InvocationModelErrors", "Sum", label="model errors")]),
    ]
    return widgets + model.serving.capacity_widgets(kind, model, gpu)


def adapter_widgets(endpoint_name: str) -> list[cloudwatch.IWidget]:
    """The decision adapter's own metrics (EMF): what the decisions were like, not only how many."""

    def metric(name: str, statistic: str = "Sum", *, label: str | None = None) -> cloudwatch.Metric:
        return adapter_metric(endpoint_name, name, statistic, label=label)

    return [
        graph("decisions: count and warnings", [metric("Decisions", label="decisions"),
                                                metric("WarnedDecisions", label="warned"),
                                                metric("LowOptionMass", label="low option mass"),
                                                metric("NearTie", label="near tie"),
                                                metric("ResultCacheHits", label="result cache hits")]),
        graph("decisions: warning rate", [warning_rate(endpoint_name, 60)]),
        graph("decisions: by scoring method (ours: letters, likelihood, pmi; a decision head: native:TYPE)",
              [decisions_by_scoring(endpoint_name)]),
        graph("decisions: latency (ms)", [*(metric("DecisionLatency", p, label=f"decision {p}")
                                            for p in ("p50", "p90", "p99")),
                                          metric("QueueTime", "p90", label="queue p90"),
                                          metric("ForwardTime", "p90", label="forward p90")], left_label="ms"),
        graph("decisions: evaluated vs cached tokens", [metric("EvaluatedTokens", label="evaluated"),
                                                        metric("CachedTokens", label="cached")]),
        graph("decisions: confidence", [metric("TopProbability", "Average", label="top probability (mean)"),
                                         metric("TopProbability", "p10", label="top probability p10"),
                                         metric("AllowedTokenMass", "Average", label="allowed token mass (mean)"),
                                         metric("AllowedTokenMass", "p10", label="allowed token mass p10")]),
        graph("decisions: adapter errors", [metric("ClientErrors", label="4xx"),
                                            metric("ServerErrors", label="5xx")]),
    ]


class OperationsDashboard(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str, models: Mapping[EndpointKind, LlamaEndpoint],
                 shared: SharedHostingEndpoint | None, gpu: bool) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=name,
                                              default_interval=Duration.hours(3))
        for kind, model in models.items():
            self.dashboard.add_widgets(cloudwatch.TextWidget(
                markdown=f"## {kind}: {model.serving_name} ({model.props.hosting.mode})", width=24, height=1))
            self.dashboard.add_widgets(*model_widgets(kind, model, gpu))
        if shared is not None:
            self.dashboard.add_widgets(*shared_endpoint_widgets(shared, gpu))
        decision = models["decision"]
        self.dashboard.add_widgets(cloudwatch.TextWidget(
            markdown=f"## decision adapter (namespace {ADAPTER_NAMESPACE}, EndpointName {decision.endpoint_name})",
            width=24, height=1))
        self.dashboard.add_widgets(*adapter_widgets(decision.endpoint_name))
