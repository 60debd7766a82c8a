"""`serverless`: the decision model on a serverless endpoint (a ServerlessConfig, no instances of its own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker

from ...config.kinds import EndpointKind, HostingMode
from ...security.nag import acknowledge
from ..common import VARIANT_NAME
from ..own_endpoint import own_endpoint
from ..timeouts import StartupTimeouts
from ..widgets import graph
from .serving import Served, Serving

if TYPE_CHECKING:
    from ..llama_endpoint import LlamaEndpoint

SERVERLESS_KEY = ("a serverless endpoint has no ML compute instance of its own: the KmsKeyId of an endpoint config "
                  "encrypts the storage volume attached to the instances that host the endpoint, and SageMaker "
                  "manages the serverless compute; see docs/security.md, Hosting modes")
SERVERLESS_ISOLATION = ("SageMaker Serverless Inference does not support network isolation; the config turns it off "
                        "explicitly for the decision model (decision.network_isolation: false), the documented "
                        "trade-off of serverless hosting (README, Hosting modes)")


class Serverless(Serving):
    name: ClassVar[HostingMode] = "serverless"

    def serve(self, model: LlamaEndpoint, timeouts: StartupTimeouts) -> Served:
        serverless = model.props.settings.serverless
        assert serverless is not None  # config: required for serverless hosting
        if not model.props.hosting.network_isolation:
            acknowledge(model.model, {"CKV_AWS_370": SERVERLESS_ISOLATION})
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME, model_name=model.model.attr_model_name,
            serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                memory_size_in_mb=serverless.memory_mb, max_concurrency=serverless.max_concurrency,
                provisioned_concurrency=serverless.provisioned_concurrency))
        own = own_endpoint(model, variant=variant, timeouts=timeouts, key_reason=SERVERLESS_KEY,
                           acknowledgements={"CKV_AWS_98": SERVERLESS_KEY})
        return Served(config=own.config, endpoint=own.endpoint, scalable_target=own.scalable_target)

    def capacity_widgets(self, kind: EndpointKind, model: LlamaEndpoint, gpu: bool) -> list[cloudwatch.IWidget]:
        """No instances to watch: the cold starts are what serverless costs in latency."""
        return [graph(f"{kind}: cold starts (ModelSetupTime, microseconds)",
                      [model.metric("ModelSetupTime", s, label=s) for s in ("Average", "Maximum")])]
