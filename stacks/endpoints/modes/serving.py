"""What every hosting mode builds, as the constructs see it: what serves a model, and the dashboard graphs of its
capacity. The twin of stacks/config/hosting/mode.py (the mode's config rules), one class per mode."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker

from ...config.kinds import EndpointKind, HostingMode
from ..common import INSTANCE_METRICS_NAMESPACE
from ..timeouts import StartupTimeouts
from ..widgets import graph

if TYPE_CHECKING:
    from ..llama_endpoint import LlamaEndpoint


@dataclass(frozen=True)
class Served:
    """What serves one model: its own endpoint (config and endpoint) or its component, and the autoscaling
    target when it scales."""

    config: sagemaker.CfnEndpointConfig | None = None
    endpoint: sagemaker.CfnEndpoint | None = None
    component: sagemaker.CfnInferenceComponent | None = None
    scalable_target: appscaling.ScalableTarget | None = None


class Serving:
    """One hosting mode's resources and graphs. The defaults are those of a model on instances of its own."""

    name: ClassVar[HostingMode]
    utilisation: ClassVar[tuple[str, str]] = (INSTANCE_METRICS_NAMESPACE, "")  # namespace, metric-name suffix
    per: ClassVar[tuple[str, str]] = ("InvocationsPerInstance", "instances")  # the metric per unit, the unit

    def serve(self, model: LlamaEndpoint, timeouts: StartupTimeouts) -> Served:
        raise NotImplementedError

    def capacity_widgets(self, kind: EndpointKind, model: LlamaEndpoint, gpu: bool) -> list[cloudwatch.IWidget]:
        """What follows the traffic, latency and error graphs: utilisation and how many units serve it."""
        namespace, suffix = self.utilisation
        per, unit = self.per
        used = ["CPUUtilization", "MemoryUtilization", *(("GPUUtilization", "GPUMemoryUtilization") if gpu else ())]
        return [
            graph(f"{kind}: utilisation (%)", [
                model.metric(f"{metric}{suffix}", "Average", namespace=namespace, label=metric) for metric in used]),
            graph(f"{kind}: {unit} serving (Invocations / {per})", [cloudwatch.MathExpression(
                expression="invocations / per", label=f"{unit} (only where there was traffic)",
                using_metrics={"invocations": model.metric("Invocations", "Sum"), "per": model.metric(per, "Sum")},
                period=Duration.seconds(model.props.settings.alarms.period_s))]),
        ]
