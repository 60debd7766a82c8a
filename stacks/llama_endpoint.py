"""One model served on SageMaker, used twice: for the chat and the decision model, in any hosting mode.

What is deliberately fixed here, for every mode:
- the endpoint (and the inference component) is the only named resource; Model and EndpointConfig names are
  left to CloudFormation, so a new image or model replaces them and the endpoint is updated in place;
- the model depends on its execution role's policy, or CreateModel races IAM and fails with "could not access
  model data";
- the execution role reads exactly one S3 object, pulls from exactly one repository, and writes to its own
  log group;
- start-up timeouts follow the model's size; alarms exist from the first deployment, and notify.

The mode decides what serves the model: its own endpoint (`dedicated`), a serverless endpoint (`serverless`,
decision only), or an inference component on the shared endpoint (`shared`, stacks/shared_endpoint.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct

from .config import Endpoint, HostingMode, TargetTracking, Vpc
from .instances import describe_instance
from .log_groups import LogSettings
from .model_artifact import ModelArtifact
from .nag import NIST, acknowledge, logical_id
from .notifications import AlarmTopic
from .timeouts import StartupTimeouts
from .vpc_access import DESCRIBE_REASON, vpc_acknowledgements, vpc_statements

if TYPE_CHECKING:
    from .shared_endpoint import SharedEndpoint

VARIANT_NAME = "AllTraffic"
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"  # CPU/memory/disk, published with the role
COMPONENT_METRICS_NAMESPACE = "/aws/sagemaker/InferenceComponents"  # utilisation per component
AT_OR_ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
LOCAL_STORAGE_KEY = ("this instance type keeps /opt/ml and /tmp on NVMe instance storage, encrypted by the "
                     "instance's hardware module, which a KmsKeyId does not encrypt (SageMaker API reference; older "
                     "versions said CreateEndpointConfig fails with one): see docs/security.md, Encryption at rest")
SERVERLESS_KEY = ("a serverless endpoint has no ML compute instance of its own: the KmsKeyId of an endpoint config "
                  "encrypts the storage volume attached to the instances that host the endpoint, and SageMaker "
                  "manages the serverless compute; see docs/security.md, Hosting modes")
SERVERLESS_ISOLATION = ("SageMaker Serverless Inference does not support network isolation; the config turns it off "
                        "explicitly for the decision model (decision.network_isolation: false), the documented "
                        "trade-off of serverless hosting (README, Hosting modes)")
SCALING_SLR = ("sagemaker.application-autoscaling.amazonaws.com/"
               "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")


@dataclass(frozen=True)
class ImageSource:
    """The container image and the one repository the execution role may pull it from."""

    uri: str
    repository_arn: str


@dataclass(frozen=True)
class Hosting:
    """Where the model is served: `endpoint_name` always; the component and shared endpoint in shared mode."""

    mode: HostingMode
    endpoint_name: str
    component_name: str | None = None
    shared: SharedEndpoint | None = None
    network_isolation: bool = True


@dataclass(frozen=True)
class EndpointProps:
    image: ImageSource
    artifact: ModelArtifact
    environment: dict[str, str]
    settings: Endpoint
    hosting: Hosting
    timeouts: StartupTimeouts
    key: kms.IKey
    log_settings: LogSettings
    alarm_topic: AlarmTopic
    inference_ami_version: str | None = None
    vpc: Vpc | None = None
    capture_bucket: s3.IBucket | None = None


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


class LlamaEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: EndpointProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        hosting = props.hosting
        self.endpoint_name = hosting.endpoint_name
        self.component_name = hosting.component_name
        # What the alarms and dashboard call this model: its component on a shared endpoint, else its endpoint.
        self.serving_name = hosting.component_name or hosting.endpoint_name
        log_name = (f"/aws/sagemaker/InferenceComponents/{hosting.component_name}" if hosting.component_name
                    else f"/aws/sagemaker/Endpoints/{hosting.endpoint_name}")
        self.log_group = props.log_settings.log_group(self, "Logs", name=log_name)
        self.role = iam.Role(self, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description=f"Execution role of SageMaker model {self.serving_name}")
        self.policy = iam.Policy(self, "ExecutionPolicy", roles=[self.role], statements=self._statements())
        self._acknowledge_wildcards()

        self.model = sagemaker.CfnModel(
            self, "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=props.image.uri,
                model_data_url=props.artifact.s3_url,
                environment=dict(sorted(props.environment.items())),
                mode="SingleModel",
            ),
            enable_network_isolation=hosting.network_isolation,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                subnets=props.vpc.subnet_ids, security_group_ids=props.vpc.security_group_ids,
            ) if props.vpc else None,
        )
        if hosting.mode == "serverless" and not hosting.network_isolation:
            acknowledge(self.model, {"CKV_AWS_370": SERVERLESS_ISOLATION})
        # CreateModel checks access to the model data with the role as it is at that moment.
        self.model.node.add_dependency(self.policy)
        # A version-pinned artifact is checked first. (The decision image needs no explicit dependency: its
        # URI is an attribute of the build resource, so CloudFormation creates the model after the build.)
        for dependency in props.artifact.ready:
            self.model.node.add_dependency(dependency)

        settings = props.settings
        self.startup_s = settings.startup_health_check_timeout_s or props.timeouts.container_startup_health_check_s
        self.download_s = settings.model_download_timeout_s or props.timeouts.model_data_download_s
        self.alarms = self._alarms()
        self.endpoint_config: sagemaker.CfnEndpointConfig | None = None
        self.endpoint: sagemaker.CfnEndpoint | None = None
        self.component: sagemaker.CfnInferenceComponent | None = None
        self.scalable_target: appscaling.ScalableTarget | None = None
        if hosting.mode == "shared":
            self._component()
        else:
            self._endpoint()

    # ---- what serves the model ----------------------------------------------------------------------------

    def _endpoint(self) -> None:
        """Its own endpoint: instances (dedicated) or a ServerlessConfig (serverless)."""
        props, settings = self.props, self.props.settings
        serverless = settings.serverless if props.hosting.mode == "serverless" else None
        if serverless is not None:
            variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT_NAME, model_name=self.model.attr_model_name,
                serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                    memory_size_in_mb=serverless.memory_mb, max_concurrency=serverless.max_concurrency,
                    provisioned_concurrency=serverless.provisioned_concurrency))
            key_arn, key_reason = None, SERVERLESS_KEY
        else:
            assert settings.instance_type is not None  # config: required for dedicated hosting
            local_storage = describe_instance(settings.instance_type).local_storage
            variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT_NAME,
                model_name=self.model.attr_model_name,
                initial_instance_count=settings.instance_count,
                instance_type=settings.instance_type,
                initial_variant_weight=1.0,
                container_startup_health_check_timeout_in_seconds=self.startup_s,
                model_data_download_timeout_in_seconds=self.download_s,
                inference_ami_version=props.inference_ami_version,
            )
            # Instance types with local NVMe storage keep /opt/ml and /tmp on instance storage, encrypted by the
            # instance's hardware module; a KmsKeyId does not encrypt it (SageMaker API reference, as of the pinned
            # botocore), and older versions of that reference said CreateEndpointConfig fails with one: omit it.
            key_arn, key_reason = (None, LOCAL_STORAGE_KEY) if local_storage else (props.key.key_arn, None)
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self, "Config", production_variants=[variant], kms_key_id=key_arn, data_capture_config=self._data_capture())
        if key_reason:
            acknowledge(self.endpoint_config, {f"{NIST}SageMakerEndpointConfigurationKMSKeyConfigured": key_reason,
                                               **({"CKV_AWS_98": key_reason} if serverless else {})})

        self.endpoint = sagemaker.CfnEndpoint(
            self, "Endpoint",
            endpoint_name=self.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # With autoscaling, keep the instance count it chose instead of resetting to the initial count.
            retain_all_variant_properties=True if settings.autoscaling else None,
            deployment_config=sagemaker.CfnEndpoint.DeploymentConfigProperty(
                auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                    alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name)
                            for a in self.rollback_alarms]),
                blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                    traffic_routing_configuration=sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
                        type="ALL_AT_ONCE", wait_interval_in_seconds=0),
                    termination_wait_in_seconds=300,
                    # Room for the new fleet to download and start, plus the bake; SageMaker allows 600-14400.
                    maximum_execution_timeout_in_seconds=self.startup_s + self.download_s + 1800,
                ),
            ) if settings.alarms.auto_rollback else None,
        )
        self.endpoint.node.add_dependency(self.log_group)
        scaling = settings.autoscaling
        if scaling is not None:
            self.scalable_target = track(self, Scaling(
                resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT_NAME}",
                dimension="sagemaker:variant:DesiredInstanceCount",
                minimum=scaling.min_instances, maximum=scaling.max_instances,
                target=scaling.target_invocations_per_instance,
                metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
                cooldowns=scaling), after=self.endpoint)

    def _component(self) -> None:
        """An inference component of the shared endpoint: the model, what one copy reserves, how many copies."""
        props, settings = self.props, self.props.settings
        shared, component = props.hosting.shared, settings.component
        assert shared is not None and component is not None and self.component_name is not None
        self.component = sagemaker.CfnInferenceComponent(
            self, "Component",
            inference_component_name=self.component_name,
            endpoint_name=shared.endpoint.attr_endpoint_name,  # an attribute: created after the endpoint
            variant_name=VARIANT_NAME,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=self.model.attr_model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent
                .InferenceComponentComputeResourceRequirementsProperty(
                    number_of_cpu_cores_required=component.cpu_cores,
                    min_memory_required_in_mb=component.memory_mb,
                    max_memory_required_in_mb=component.max_memory_mb,
                    number_of_accelerator_devices_required=component.accelerators or None),
                startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                    container_startup_health_check_timeout_in_seconds=self.startup_s,
                    model_data_download_timeout_in_seconds=self.download_s)),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=component.copy_count),
            # A component updates by rolling its copies (at most half at a time), its error alarms as triggers.
            deployment_config=sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
                rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
                    maximum_batch_size=sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(
                        type="COPY_COUNT", value=max(1, component.copy_count // 2)),
                    wait_interval_in_seconds=300,
                    maximum_execution_timeout_in_seconds=min(28_800, self.startup_s + self.download_s + 1800)),
                auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
                    alarms=[sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=a.alarm_name)
                            for a in self.rollback_alarms])) if settings.alarms.auto_rollback else None,
        )
        self.component.node.add_dependency(self.log_group)
        copies = component.autoscaling
        if copies is not None:
            self.scalable_target = track(self, Scaling(
                resource_id=f"inference-component/{self.component_name}",
                dimension="sagemaker:inference-component:DesiredCopyCount",
                minimum=copies.min_copies, maximum=copies.max_copies, target=copies.target_invocations_per_copy,
                metric=appscaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_INVOCATIONS_PER_COPY,
                cooldowns=copies), after=self.component)

    # ---- the execution role ------------------------------------------------------------------------------

    def pull_and_log_statements(self) -> list[iam.PolicyStatement]:
        """Pull this model's image and write its logs: what the shared endpoint's own role needs of each model."""
        return [
            iam.PolicyStatement(
                sid="PullImage",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[self.props.image.repository_arn]),
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn]),
        ]

    def _statements(self) -> list[iam.PolicyStatement]:
        props = self.props
        pull, logs = self.pull_and_log_statements()
        statements = [
            *props.artifact.read_statements(),
            pull,
            iam.PolicyStatement(sid="RegistryLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            logs,
            iam.PolicyStatement(
                sid="PutInstanceMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": INSTANCE_METRICS_NAMESPACE}}),
        ]
        if props.capture_bucket is not None and props.settings.data_capture is not None:
            statements += [
                iam.PolicyStatement(
                    sid="WriteDataCapture", actions=["s3:PutObject"],
                    resources=[props.capture_bucket.arn_for_objects(f"{self.endpoint_name}/*")]),
                iam.PolicyStatement(
                    sid="EncryptDataCapture", actions=["kms:GenerateDataKey", "kms:Encrypt"],
                    resources=[props.key.key_arn]),
            ]
        if props.vpc is not None:
            statements += vpc_statements(self, props.vpc)
        return statements

    def _acknowledge_wildcards(self) -> None:
        """Each remaining wildcard of the execution policy, acknowledged on its own with its reason."""
        reasons = {
            "AwsSolutions-IAM5[Resource::*]":
                "ecr:GetAuthorizationToken has no resource-level permissions; cloudwatch:PutMetricData is limited "
                "by its namespace condition instead" + (f"; {DESCRIBE_REASON}" if self.props.vpc else ""),
        }
        if self.props.vpc is not None:
            reasons.update(vpc_acknowledgements(self))
        if self.props.capture_bucket is not None and self.props.settings.data_capture is not None:
            bucket = logical_id(self.props.capture_bucket)
            reasons[f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{self.endpoint_name}/*]"] = (
                "SageMaker writes capture files with generated names under this endpoint's own prefix")
        acknowledge(self.policy, reasons)

    def _data_capture(self) -> sagemaker.CfnEndpointConfig.DataCaptureConfigProperty | None:
        capture = self.props.settings.data_capture
        bucket = self.props.capture_bucket
        if capture is None or bucket is None:
            return None
        modes = [m for m, on in (("Input", capture.capture_input), ("Output", capture.capture_output)) if on]
        return sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
            enable_capture=True,
            initial_sampling_percentage=capture.sampling_percentage,
            destination_s3_uri=bucket.s3_url_for_object(self.endpoint_name),
            kms_key_id=self.props.key.key_arn,
            capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=m) for m in modes],
        )

    # ---- metrics and alarms ------------------------------------------------------------------------------

    @property
    def rollback_alarms(self) -> list[cloudwatch.Alarm]:
        """The alarms that roll a deployment back (auto_rollback): the container failing, not its latency."""
        return [self.alarms["errors5xx"], self.alarms["modelErrors"]]

    @property
    def dimensions(self) -> dict[str, str]:
        """SageMaker's invocation metrics of this model: per component on a shared endpoint, else per variant."""
        if self.component_name:
            return {"InferenceComponentName": self.component_name}
        return {"EndpointName": self.endpoint_name, "VariantName": VARIANT_NAME}

    def metric(self, name: str, statistic: str, *, namespace: str = SAGEMAKER_NAMESPACE,
               label: str | None = None) -> cloudwatch.Metric:
        return cloudwatch.Metric(namespace=namespace, metric_name=name, statistic=statistic, label=label,
                                 dimensions_map=self.dimensions,
                                 period=Duration.seconds(self.props.settings.alarms.period_s))

    def _alarms(self) -> dict[str, cloudwatch.Alarm]:
        alarms = self.props.settings.alarms
        name = self.serving_name
        return {
            "latency": self.alarm(
                "LatencyAlarm", f"{name}-model-latency", f"{name}: ModelLatency p90 above {alarms.latency_p90_ms:g} ms",
                self.metric("ModelLatency", "p90"),
                threshold=alarms.latency_p90_ms * 1000,  # ModelLatency is in microseconds
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD, datapoints=None),
            "errors5xx": self.alarm(
                "Errors5xxAlarm", f"{name}-5xx-errors",
                f"{name}: Invocation5XXErrors (the container failed or is not ready)",
                self.metric("Invocation5XXErrors", "Sum"), threshold=alarms.errors_5xx),
            # Real-time endpoints publish no ModelSetupTime; failed starts and crashes surface as model errors.
            "modelErrors": self.alarm(
                "ModelErrorsAlarm", f"{name}-model-errors",
                f"{name}: InvocationModelErrors (model crashed, timed out or was not loaded)",
                self.metric("InvocationModelErrors", "Sum"), threshold=alarms.model_errors),
        }

    def alarm(self, construct_id: str, alarm_name: str, description: str, metric: cloudwatch.IMetric, *,
              threshold: float, datapoints: int | None = 1,
              comparison: cloudwatch.ComparisonOperator = AT_OR_ABOVE) -> cloudwatch.Alarm:
        """One alarm of this model, notifying the environment's topic; a missing datapoint (no traffic) is never a
        breach."""
        alarm = cloudwatch.Alarm(
            self, construct_id, alarm_name=alarm_name, alarm_description=description, metric=metric,
            threshold=threshold, comparison_operator=comparison,
            evaluation_periods=self.props.settings.alarms.evaluation_periods, datapoints_to_alarm=datapoints,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
        self.props.alarm_topic.notify(alarm)
        return alarm
