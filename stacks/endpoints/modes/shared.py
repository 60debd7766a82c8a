"""`shared`: the model as an inference component of the shared endpoint (component.py builds it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from ...config.kinds import EndpointKind, HostingMode
from ..common import COMPONENT_METRICS_NAMESPACE, INSTANCE_METRICS_NAMESPACE, VARIANT_NAME
from ..component import inference_component
from ..scaling import no_capacity_metric
from ..shared_endpoint import SharedHostingEndpoint
from ..timeouts import StartupTimeouts
from ..widgets import graph
from .serving import Served, Serving

if TYPE_CHECKING:
    from ..llama_endpoint import LlamaEndpoint


class Shared(Serving):
    name: ClassVar[HostingMode] = "shared"
    utilisation: ClassVar[tuple[str, str]] = (COMPONENT_METRICS_NAMESPACE, "Normalized")
    per: ClassVar[tuple[str, str]] = ("InvocationsPerCopy", "copies")

    def serve(self, model: LlamaEndpoint, timeouts: StartupTimeouts) -> Served:
        hosting, settings = model.props.hosting, model.props.settings
        assert hosting.shared is not None and settings.component is not None  # config: required when shared
        assert model.component_name is not None
        served = inference_component(
            model, component_name=model.component_name, shared_endpoint=hosting.shared.endpoint, model=model.model,
            settings=settings.component, timeouts=timeouts, auto_rollback=settings.alarms.auto_rollback,
            rollback_alarms=model.rollback_alarms, log_group=model.log_group)
        return Served(component=served.component, scalable_target=served.scalable_target)

    def capacity_widgets(self, kind: EndpointKind, model: LlamaEndpoint, gpu: bool) -> list[cloudwatch.IWidget]:
        """Utilisation and copies; scaled to zero, also the idle periods and the requests that found no copy."""
        widgets = super().capacity_widgets(kind, model, gpu)
        component, period = model.props.settings.component, model.props.settings.alarms.period_s
        if model.component_name is None or component is None or component.autoscaling is None \
                or component.autoscaling.min_copies != 0:
            return widgets
        idle = cloudwatch.MathExpression(
            expression="IF(FILL(invocations, 0) > 0, 0, 1)", label="idle (no invocation: copies may be at zero)",
            using_metrics={"invocations": model.metric("Invocations", "Sum")}, period=Duration.seconds(period))
        return [*widgets, graph(f"{kind}: scale to zero (idle periods, requests that found no copy)",
                                [idle], right=[no_capacity_metric(model.component_name, period)])]


def shared_endpoint_widgets(shared: SharedHostingEndpoint, gpu: bool) -> list[cloudwatch.IWidget]:
    """The instances under both components."""
    dimensions = {"EndpointName": shared.endpoint_name, "VariantName": VARIANT_NAME}
    used = ["CPUUtilization", "MemoryUtilization", *(("GPUUtilization", "GPUMemoryUtilization") if gpu else ())]
    return [graph(f"shared endpoint {shared.endpoint_name}: instance utilisation (%)", [
        cloudwatch.Metric(namespace=INSTANCE_METRICS_NAMESPACE, metric_name=metric, statistic="Average",
                          dimensions_map=dimensions, label=metric) for metric in used])]
