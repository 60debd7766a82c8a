"""Target tracking for whatever serves a model (the instances of an endpoint's variant, or a component's copies), and
the step that brings a component scaled to zero back."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from ..config.endpoint import TargetTracking
from .common import SAGEMAKER_NAMESPACE

NO_CAPACITY = "NoCapacityInvocationFailures"  # a request to a component with no copy (scaled to zero)

SCALING_SLR = ("sagemaker.application-autoscaling.amazonaws.com/"
               "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")


@dataclass(frozen=True)
class Scaling:
    """One Application Auto Scaling target with target tracking (instances of a variant, copies of a component)."""

    resource_id: str
    dimension: str
    minimum: int
    maximum: int
    target: float
    metric: appscaling.PredefinedMetric
    cooldowns: TargetTracking


def track(scope: Construct, scaling: Scaling, after: IConstruct) -> appscaling.ScalableTarget:
    """Register `scaling` (after what it scales exists) as SageMaker's service-linked role."""
    stack = Stack.of(scope)
    # SageMaker scaling runs as Application Auto Scaling's service-linked role (created on first use);
    # naming it keeps CDK from creating an extra, permissionless role.
    service_linked_role = iam.Role.from_role_arn(
        scope, "AutoScalingRole",
        stack.format_arn(service="iam", region="", resource="role", resource_name=f"aws-service-role/{SCALING_SLR}"))
    target = appscaling.ScalableTarget(
        scope, "ScalableTarget", role=service_linked_role, service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=scaling.resource_id, scalable_dimension=scaling.dimension,
        min_capacity=scaling.minimum, max_capacity=scaling.maximum)
    target.node.add_dependency(after)
    target.scale_to_track_metric(
        "InvocationsPerInstance" if "variant" in scaling.dimension else "InvocationsPerCopy",
        target_value=scaling.target, predefined_metric=scaling.metric,
        scale_in_cooldown=Duration.seconds(scaling.cooldowns.scale_in_cooldown_s),
        scale_out_cooldown=Duration.seconds(scaling.cooldowns.scale_out_cooldown_s))
    return target


def no_capacity_metric(component_name: str, period_s: int = 60) -> cloudwatch.Metric:
    """Requests that found no copy of the component: what a component scaled to zero answers."""
    return cloudwatch.Metric(namespace=SAGEMAKER_NAMESPACE, metric_name=NO_CAPACITY, statistic="Maximum",
                             dimensions_map={"InferenceComponentName": component_name},
                             period=Duration.seconds(period_s))


def scale_out_from_zero(scope: Construct, target: appscaling.ScalableTarget, component_name: str,
                        cooldown_s: int) -> cloudwatch.Alarm:
    """Target tracking never leaves zero copies (no traffic reaches a copy to count); a request that finds none
    raises NoCapacityInvocationFailures, and this alarm on it adds one copy (a step policy, as SageMaker documents
    for scale to zero); managed instance scaling then starts an instance for it."""
    step = appscaling.StepScalingAction(
        scope, "ScaleOutFromZero", scaling_target=target, policy_name=f"{component_name}-scale-out-from-zero",
        adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY, cooldown=Duration.seconds(cooldown_s))
    step.add_adjustment(adjustment=1, lower_bound=0)
    alarm = cloudwatch.Alarm(
        scope, "NoCapacityAlarm", alarm_name=f"{component_name}-no-capacity",
        alarm_description=f"{component_name}: a request found no copy (scaled to zero): add one",
        metric=no_capacity_metric(component_name), threshold=1, evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
    alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(step))
    return alarm
