"""A model on an endpoint of its own, whatever its variant is (instances: modes/dedicated.py; a ServerlessConfig:
modes/serverless.py).

The endpoint is the only named resource; its config's name is left to CloudFormation, so a new model replaces the
config and the endpoint is updated in place (blue/green with the model's error alarms as rollback triggers, when
`alarms.auto_rollback` is on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker

from ..config.endpoint import Endpoint
from ..security.nag import NIST, acknowledge
from .common import VARIANT_NAME
from .scaling import Scaling, track
from .timeouts import StartupTimeouts

if TYPE_CHECKING:
    from .llama_endpoint import LlamaEndpoint


@dataclass(frozen=True)
class OwnEndpoint:
    """What serves the model: its endpoint config, its endpoint, and the autoscaling target when it scales."""

    config: sagemaker.CfnEndpointConfig
    endpoint: sagemaker.CfnEndpoint
    scalable_target: appscaling.ScalableTarget | None


def own_endpoint(model: LlamaEndpoint, *, variant: sagemaker.CfnEndpointConfig.ProductionVariantProperty,
                 timeouts: StartupTimeouts, key_reason: str | None,
                 acknowledgements: dict[str, str] | None = None) -> OwnEndpoint:
    """The endpoint config (of `variant`, encrypted with the model's key unless `key_reason` says why not) and the
    endpoint of `model`, under it, and its autoscaling."""
    scope, settings, key, endpoint_name = model, model.props.settings, model.props.key, model.endpoint_name
    rollback_alarms = model.rollback_alarms
    key_arn = None if key_reason else key.key_arn
    config = sagemaker.CfnEndpointConfig(
        scope, "Config", production_variants=[variant], kms_key_id=key_arn,
        data_capture_config=_data_capture(endpoint_name, settings, model.props.capture_bucket, key))
    if key_reason:
        acknowledge(config, {f"{NIST}SageMakerEndpointConfigurationKMSKeyConfigured": key_reason,
                             **(acknowledgements or {})})

    startup_s, download_s = timeouts.container_startup_health_check_s, timeouts.model_data_download_s
    endpoint = sagemaker.CfnEndpoint(
        scope, "Endpoint",
        endpoint_name=endpoint_name,
        endpoint_config_name=config.attr_endpoint_config_name,
        # With autoscaling, keep the instance count it chose instead of resetting to the initial count.
        retain_all_variant_properties=True if settings.autoscaling else None,
        deployment_config=sagemaker.CfnEndpoint.DeploymentConfigProperty(
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in rollback_alarms]),
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
                    type="ALL_AT_ONCE", wait_interval_in_seconds=0),
                termination_wait_in_seconds=300,
                # Room for the new fleet to download and start, plus the bake; SageMaker allows 600-14400.
                maximum_execution_timeout_in_seconds=startup_s + download_s + 1800,
            ),
        ) if settings.alarms.auto_rollback else None,
    )
    endpoint.node.add_dependency(model.log_group)
    scaling = settings.autoscaling
    scalable_target = None
    if scaling is not None:
        scalable_target = track(scope, Scaling(
            resource_id=f"endpoint/{endpoint_name}/variant/{VARIANT_NAME}",
            dimension="sagemaker:variant:DesiredInstanceCount",
            minimum=scaling.min_instances, maximum=scaling.max_instances,
            target=scaling.target_invocations_per_instance,
            metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
            cooldowns=scaling), after=endpoint)
    return OwnEndpoint(config, endpoint, scalable_target)


def _data_capture(endpoint_name: str, settings: Endpoint, bucket: s3.IBucket | None,
                  key: kms.IKey) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
    capture = settings.data_capture
    if capture is None or bucket is None:
        return None
    modes = [m for m, on in (("Input", capture.capture_input), ("Output", capture.capture_output)) if on]
    return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
        enable_capture=True,
        initial_sampling_percentage=capture.sampling_percentage,
        destination_s3_uri=bucket.s3_url_for_object(endpoint_name),
        kms_key_id=key.key_arn,
        capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=m) for m in modes],
    )
