"""CloudWatch metrics as embedded metric format (EMF) records on stdout.

SageMaker ships a container's stdout to CloudWatch Logs, which extracts EMF metrics from the log events: no
agent and no PutMetricData permission. Per request: one record of the request's outcome (dimension EndpointName),
and one of its decisions per scoring method (dimension sets EndpointName and EndpointName + Scoring), each metric
an array with one value per decision. Dimensions stay low-cardinality: never a decision id or an option id.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Protocol, TextIO

from aws_embedded_metrics.logger.metrics_context import MetricsContext
from aws_embedded_metrics.serializers.log_serializer import LogSerializer

from .scoring import LOW_OPTION_MASS, NEAR_TIE

NAMESPACE = "SemIf/Adapter"
LOCAL_ENDPOINT = "local"  # the EndpointName dimension when the deployment does not name the endpoint
LOG = logging.getLogger("semif_adapter.metrics")


class DecisionFacts(Protocol):
    """The numbers metrics report of one answered decision (`decided.Decided` has them), so that metrics
    need no service; None: not measured by the engine that answered, so not reported."""

    @property
    def method(self) -> str: ...
    @property
    def total_ms(self) -> float: ...
    @property
    def queue_ms(self) -> float | None: ...
    @property
    def forward_ms(self) -> float | None: ...
    @property
    def evaluated_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def top_probability(self) -> float: ...
    @property
    def allowed_token_mass(self) -> float | None: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...
    @property
    def cache_source(self) -> str: ...


def configure(stream: TextIO | None = None) -> None:
    """EMF records go to stdout as they are: CloudWatch Logs parses a record only when it is the whole line."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOG.handlers[:] = [handler]
    LOG.propagate = False
    LOG.setLevel(logging.INFO)


def _context(dimensions: list[dict[str, str]]) -> MetricsContext:
    context = MetricsContext(namespace=NAMESPACE)
    context.set_dimensions(dimensions, use_default=False)
    return context


def request_record(endpoint: str, status: int) -> list[str]:
    """The request's outcome: 4xx and 5xx as 0/1 counts, so their averages are error rates."""
    context = _context([{"EndpointName": endpoint}])
    context.put_metric("ClientErrors", int(400 <= status < 500), "Count")
    context.put_metric("ServerErrors", int(status >= 500), "Count")
    return LogSerializer.serialize(context)


def decision_records(endpoint: str, decided: Sequence[DecisionFacts]) -> list[str]:
    """One record per scoring method used, every metric one value per decision (split at 100 by the library)."""
    records: list[str] = []
    for method in sorted({d.method for d in decided}):
        group = [d for d in decided if d.method == method]
        context = _context([{"EndpointName": endpoint}, {"EndpointName": endpoint, "Scoring": method}])
        for d in group:
            context.put_metric("Decisions", 1, "Count")
            context.put_metric("DecisionLatency", round(d.total_ms, 3), "Milliseconds")
            if d.queue_ms is not None:  # absent where the engine does not measure it (llama-server's path)
                context.put_metric("QueueTime", round(d.queue_ms, 3), "Milliseconds")
            if d.forward_ms is not None:
                context.put_metric("ForwardTime", round(d.forward_ms, 3), "Milliseconds")
            context.put_metric("EvaluatedTokens", d.evaluated_tokens, "Count")
            context.put_metric("CachedTokens", d.cached_tokens, "Count")
            context.put_metric("TopProbability", d.top_probability, "None")
            if d.allowed_token_mass is not None:
                context.put_metric("AllowedTokenMass", d.allowed_token_mass, "None")
            context.put_metric("WarnedDecisions", int(bool(d.warnings)), "Count")
            context.put_metric("LowOptionMass", int(LOW_OPTION_MASS in d.warnings), "Count")
            context.put_metric("NearTie", int(NEAR_TIE in d.warnings), "Count")
            context.put_metric("ResultCacheHits", int(d.cache_source == "result"), "Count")
        records += LogSerializer.serialize(context)
    return records


def emit(endpoint: str | None, status: int, decided: Sequence[DecisionFacts]) -> None:
    endpoint = endpoint or LOCAL_ENDPOINT
    for record in (*request_record(endpoint, status), *decision_records(endpoint, decided)):
        LOG.info(record)
