"""A model on an endpoint of its own: instances of a variant (`dedicated`) or a ServerlessConfig (`serverless`).

The endpoint is the only named resource; its config's name is left to CloudFormation, so a new model replaces the
config and the endpoint is updated in place (blue/green with the model's error alarms as rollback triggers, when
`alarms.auto_rollback` is on).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ..config.endpoint import Endpoint
from ..config.instances import describe_instance
from ..security.nag import NIST, acknowledge
from .common import LOCAL_STORAGE_KEY, VARIANT_NAME
from .scaling import Scaling, track
from .timeouts import StartupTimeouts

SERVERLESS_KEY = ("a serverless endpoint has no ML compute instance of its own: the KmsKeyId of an endpoint config "
                  "encrypts the storage volume attached to the instances that host the endpoint, and SageMaker "
                  "manages the serverless compute; see docs/security.md, Hosting modes")


@dataclass(frozen=True)
class OwnEndpoint:
    """What serves the model: its endpoint config, its endpoint, and the autoscaling target when it scales."""

    config: sagemaker.CfnEndpointConfig
    endpoint: sagemaker.CfnEndpoint
    scalable_target: appscaling.ScalableTarget | None


def own_endpoint(scope: Construct, *, endpoint_name: str, model: sagemaker.CfnModel, settings: Endpoint,
                 serverless: bool, timeouts: StartupTimeouts, key: kms.IKey, inference_ami_version: str | None,
                 capture_bucket: s3.IBucket | None, rollback_alarms: list[cloudwatch.Alarm],
                 log_group: logs.ILogGroup) -> OwnEndpoint:
    """The endpoint config and endpoint of `model` under `scope`, and its autoscaling."""
    serverless_config = settings.serverless if serverless else None
    key_arn: str | None
    key_reason: str | None
    if serverless_config is not None:
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME, model_name=model.attr_model_name,
            serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                memory_size_in_mb=serverless_config.memory_mb, max_concurrency=serverless_config.max_concurrency,
                provisioned_concurrency=serverless_config.provisioned_concurrency))
        key_arn, key_reason = None, SERVERLESS_KEY
    else:
        assert settings.instance_type is not None  # config: required for dedicated hosting
        local_storage = describe_instance(settings.instance_type).local_storage
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            model_name=model.attr_model_name,
            initial_instance_count=settings.instance_count,
            instance_type=settings.instance_type,
            initial_variant_weight=1.0,
            container_startup_health_check_timeout_in_seconds=timeouts.container_startup_health_check_s,
            model_data_download_timeout_in_seconds=timeouts.model_data_download_s,
            inference_ami_version=inference_ami_version,
        )
        # Instance types with local NVMe storage keep /opt/ml and /tmp on instance storage, encrypted by the
        # instance's hardware module; a KmsKeyId does not encrypt it (SageMaker API reference, as of the pinned
        # botocore), and older versions of that reference said CreateEndpointConfig fails with one: omit it.
        key_arn, key_reason = (None, LOCAL_STORAGE_KEY) if local_storage else (key.key_arn, None)
    config = sagemaker.CfnEndpointConfig(
        scope, "Config", production_variants=[variant], kms_key_id=key_arn,
        data_capture_config=_data_capture(endpoint_name, settings, capture_bucket, key))
    if key_reason:
        acknowledge(config, {f"{NIST}SageMakerEndpointConfigurationKMSKeyConfigured": key_reason,
                             **({"CKV_AWS_98": key_reason} if serverless_config else {})})

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
    endpoint.node.add_dependency(log_group)
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
