"""A model as an inference component of the shared endpoint: the model, what one copy reserves, how many copies.

A component updates by rolling its copies (at most half at a time), its error alarms as rollback triggers; its
copies scale by target tracking, and the shared endpoint's instances follow through managed instance scaling; copies
scaled to zero come back by a step on NoCapacityInvocationFailures (scaling.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ..config.endpoint import Component
from .common import VARIANT_NAME
from .scaling import Scaling, scale_out_from_zero, track
from .timeouts import StartupTimeouts

MAX_ROLLING_UPDATE_S = 28_800  # SageMaker's bound on a rolling update's MaximumExecutionTimeoutInSeconds


@dataclass(frozen=True)
class InferenceComponent:
    """What serves the model: its component, and the autoscaling target when its copies scale."""

    component: sagemaker.CfnInferenceComponent
    scalable_target: appscaling.ScalableTarget | None


def inference_component(scope: Construct, *, component_name: str, shared_endpoint: sagemaker.CfnEndpoint,
                        model: sagemaker.CfnModel, settings: Component, timeouts: StartupTimeouts,
                        auto_rollback: bool, rollback_alarms: list[cloudwatch.Alarm],
                        log_group: logs.ILogGroup) -> InferenceComponent:
    """The inference component of `model` on `shared_endpoint`, under `scope`, and its autoscaling."""
    startup_s, download_s = timeouts.container_startup_health_check_s, timeouts.model_data_download_s
    component = sagemaker.CfnInferenceComponent(
        scope, "Component",
        inference_component_name=component_name,
        endpoint_name=shared_endpoint.attr_endpoint_name,  # an attribute: created after the endpoint
        variant_name=VARIANT_NAME,
        specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
            model_name=model.attr_model_name,
            compute_resource_requirements=sagemaker.CfnInferenceComponent
            .InferenceComponentComputeResourceRequirementsProperty(
                number_of_cpu_cores_required=settings.cpu_cores,
                min_memory_required_in_mb=settings.memory_mb,
                max_memory_required_in_mb=settings.max_memory_mb,
                number_of_accelerator_devices_required=settings.accelerators or None),
            startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                container_startup_health_check_timeout_in_seconds=startup_s,
                model_data_download_timeout_in_seconds=download_s)),
        runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
            copy_count=settings.copy_count),
        # A component updates by rolling its copies (at most half at a time), its error alarms as triggers.
        deployment_config=sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
            rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
                maximum_batch_size=sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(
                    type="COPY_COUNT", value=max(1, settings.copy_count // 2)),
                wait_interval_in_seconds=300,
                maximum_execution_timeout_in_seconds=min(MAX_ROLLING_UPDATE_S, startup_s + download_s + 1800)),
            auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
                alarms=[sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=a.alarm_name)
                        for a in rollback_alarms])) if auto_rollback else None,
    )
    component.node.add_dependency(log_group)
    copies = settings.autoscaling
    scalable_target = None
    if copies is not None:
        scalable_target = track(scope, Scaling(
            resource_id=f"inference-component/{component_name}",
            dimension="sagemaker:inference-component:DesiredCopyCount",
            minimum=copies.min_copies, maximum=copies.max_copies, target=copies.target_invocations_per_copy,
            metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY,
            cooldowns=copies), after=component)
        if copies.min_copies == 0:
            scale_out_from_zero(scope, scalable_target, component_name, copies.scale_out_cooldown_s)
    return InferenceComponent(component, scalable_target)
