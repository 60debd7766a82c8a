"""Target tracking for whatever serves a model: the instances of an endpoint's variant, or a component's copies."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from ..config.endpoint import TargetTracking

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
