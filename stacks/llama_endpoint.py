"""One SageMaker real-time endpoint serving the model: used twice, for the chat and the decision endpoint.

What is deliberately fixed here, for both:
- the endpoint is the only named resource; Model and EndpointConfig names are left to CloudFormation, so a new
  image or model replaces them and the endpoint is updated in place (no name collision, no manual step);
- the model depends on its execution role's policy, or CreateModel races IAM and fails with "could not access
  model data";
- the execution role reads exactly one S3 object, pulls from exactly one repository, and writes to its own
  log group;
- start-up timeouts follow the model's size; alarms exist from the first deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from .config import Endpoint, Vpc
from .instances import describe_instance
from .log_groups import LogSettings
from .model_artifact import ModelArtifact
from .nag import NIST, acknowledge, logical_id
from .timeouts import StartupTimeouts

VARIANT_NAME = "AllTraffic"
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"  # CPU/memory/disk, published with the role
# VPC mode: SageMaker creates the models' network interfaces with the execution role. Creating one is allowed
# only in the configured subnets with the configured security groups (both resources of the same request);
# the interface's own id is generated, and the Describe actions have no resource-level permissions.
ENI_ACTIONS = ["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
               "ec2:DeleteNetworkInterfacePermission"]
DESCRIBE_NETWORK = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]
GENERATED_INTERFACES = ("SageMaker names the network interfaces it creates in VPC mode, so their ids are not known "
                        "in advance: network-interface/* of this account and region; creating one is allowed only "
                        "in the configured subnets and security groups")
DESCRIBE_REASON = "the ec2:Describe* actions SageMaker needs in VPC mode have no resource-level permissions"
AT_OR_ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
NO_ALARM_ACTION = ("the endpoint's alarms exist from the first deployment for SageMaker's deployment guardrails "
                   "(auto_rollback) and for whoever watches the endpoint; this stack has no notification target of "
                   "its own: subscribe your paging or ticketing to the alarm names")
LOCAL_STORAGE_KEY = ("this instance type keeps /opt/ml and /tmp on NVMe instance storage, encrypted by the "
                     "instance's hardware module, which a KmsKeyId does not encrypt (SageMaker API reference; older "
                     "versions said CreateEndpointConfig fails with one): see docs/security.md, Encryption at rest")
SCALING_SLR = ("sagemaker.application-autoscaling.amazonaws.com/"
               "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")


@dataclass(frozen=True)
class ImageSource:
    """The container image and the one repository the execution role may pull it from."""

    uri: str
    repository_arn: str


@dataclass(frozen=True)
class EndpointProps:
    endpoint_name: str
    image: ImageSource
    artifact: ModelArtifact
    environment: dict[str, str]
    settings: Endpoint
    timeouts: StartupTimeouts
    key: kms.IKey
    log_settings: LogSettings
    inference_ami_version: str | None = None
    network_isolation: bool = True
    vpc: Vpc | None = None
    capture_bucket: s3.IBucket | None = None


class LlamaEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, props: EndpointProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        self.endpoint_name = props.endpoint_name
        settings = props.settings
        self.log_group = props.log_settings.log_group(
            self, "Logs", name=f"/aws/sagemaker/Endpoints/{props.endpoint_name}")
        self.role = iam.Role(self, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description=f"Execution role of SageMaker endpoint {props.endpoint_name}")
        self.policy = iam.Policy(self, "ExecutionPolicy", roles=[self.role],
                                 statements=self._statements())
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
            enable_network_isolation=props.network_isolation,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                subnets=props.vpc.subnet_ids, security_group_ids=props.vpc.security_group_ids,
            ) if props.vpc else None,
        )
        # CreateModel checks access to the model data with the role as it is at that moment.
        self.model.node.add_dependency(self.policy)
        # A version-pinned artifact is checked first. (The decision image needs no explicit dependency: its
        # URI is an attribute of the build resource, so CloudFormation creates the model after the build.)
        for dependency in props.artifact.ready:
            self.model.node.add_dependency(dependency)

        facts = describe_instance(settings.instance_type)
        startup_s = settings.startup_health_check_timeout_s or props.timeouts.container_startup_health_check_s
        download_s = settings.model_download_timeout_s or props.timeouts.model_data_download_s
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self, "Config",
            production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT_NAME,
                model_name=self.model.attr_model_name,
                initial_instance_count=settings.instance_count,
                instance_type=settings.instance_type,
                initial_variant_weight=1.0,
                container_startup_health_check_timeout_in_seconds=startup_s,
                model_data_download_timeout_in_seconds=download_s,
                inference_ami_version=props.inference_ami_version,
            )],
            # Instance types with local NVMe storage keep /opt/ml and /tmp on instance storage, encrypted by the
            # instance's hardware module; a KmsKeyId does not encrypt it (SageMaker API reference, as of the pinned
            # botocore), and older versions of that reference said CreateEndpointConfig fails with one: omit it.
            kms_key_id=None if facts.local_storage else props.key.key_arn,
            data_capture_config=self._data_capture(),
        )
        if facts.local_storage:
            acknowledge(self.endpoint_config, {f"{NIST}SageMakerEndpointConfigurationKMSKeyConfigured":
                                               LOCAL_STORAGE_KEY})

        self.alarms = self._alarms()
        rollback_alarms = [self.alarms["errors5xx"], self.alarms["modelErrors"]]
        self.endpoint = sagemaker.CfnEndpoint(
            self, "Endpoint",
            endpoint_name=props.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
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
        self.endpoint.node.add_dependency(self.log_group)
        self.scalable_target = self._autoscaling()

    def _statements(self) -> list[iam.PolicyStatement]:
        props = self.props
        statements = [
            *props.artifact.read_statements(),
            iam.PolicyStatement(
                sid="PullImage",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[props.image.repository_arn]),
            iam.PolicyStatement(sid="RegistryLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[self.log_group.log_group_arn]),
            iam.PolicyStatement(
                sid="PutInstanceMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": INSTANCE_METRICS_NAMESPACE}}),
        ]
        if props.capture_bucket is not None and props.settings.data_capture is not None:
            statements += [
                iam.PolicyStatement(
                    sid="WriteDataCapture", actions=["s3:PutObject"],
                    resources=[props.capture_bucket.arn_for_objects(f"{props.endpoint_name}/*")]),
                iam.PolicyStatement(
                    sid="EncryptDataCapture", actions=["kms:GenerateDataKey", "kms:Encrypt"],
                    resources=[props.key.key_arn]),
            ]
        if props.vpc is not None:
            statements += self._vpc_statements(props.vpc)
        return statements

    def _vpc_statements(self, vpc: Vpc) -> list[iam.PolicyStatement]:
        stack = Stack.of(self)

        def ec2_arn(resource: str, name: str) -> str:
            return stack.format_arn(service="ec2", resource=resource, resource_name=name)

        interfaces = ec2_arn("network-interface", "*")
        return [
            iam.PolicyStatement(
                sid="CreateInterfacesInTheConfiguredSubnets", actions=["ec2:CreateNetworkInterface"],
                resources=[*(ec2_arn("subnet", s) for s in vpc.subnet_ids),
                           *(ec2_arn("security-group", g) for g in vpc.security_group_ids), interfaces]),
            iam.PolicyStatement(sid="ManageTheInterfaces", actions=ENI_ACTIONS, resources=[interfaces]),
            iam.PolicyStatement(sid="DescribeTheNetwork", actions=DESCRIBE_NETWORK, resources=["*"]),
        ]

    def _acknowledge_wildcards(self) -> None:
        """Each remaining wildcard of the execution policy, acknowledged on its own with its reason."""
        reasons = {
            "AwsSolutions-IAM5[Resource::*]":
                "ecr:GetAuthorizationToken has no resource-level permissions; cloudwatch:PutMetricData is limited "
                "by its namespace condition instead" + (f"; {DESCRIBE_REASON}" if self.props.vpc else ""),
        }
        if self.props.vpc is not None:
            stack = Stack.of(self)
            partition, region = stack.resolve(stack.partition), stack.resolve(stack.region)
            reasons[f"AwsSolutions-IAM5[Resource::arn:{partition}:ec2:{region}:<AWS::AccountId>:"
                    "network-interface/*]"] = GENERATED_INTERFACES
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
            destination_s3_uri=bucket.s3_url_for_object(self.props.endpoint_name),
            kms_key_id=self.props.key.key_arn,
            capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=m) for m in modes],
        )

    def _metric(self, name: str, statistic: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=SAGEMAKER_NAMESPACE, metric_name=name, statistic=statistic,
            dimensions_map={"EndpointName": self.endpoint_name, "VariantName": VARIANT_NAME},
            period=Duration.seconds(self.props.settings.alarms.period_s))

    def _alarms(self) -> dict[str, cloudwatch.Alarm]:
        alarms = self.props.settings.alarms
        name = self.endpoint_name
        return {
            "latency": self._alarm(
                "LatencyAlarm", f"{name}-model-latency", f"{name}: ModelLatency p90 above {alarms.latency_p90_ms:g} ms",
                self._metric("ModelLatency", "p90"),
                threshold=alarms.latency_p90_ms * 1000,  # ModelLatency is in microseconds
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD, datapoints=None),
            "errors5xx": self._alarm(
                "Errors5xxAlarm", f"{name}-5xx-errors",
                f"{name}: Invocation5XXErrors (the container failed or is not ready)",
                self._metric("Invocation5XXErrors", "Sum"), threshold=alarms.errors_5xx),
            # Real-time endpoints publish no ModelSetupTime; failed starts and crashes surface as model errors.
            "modelErrors": self._alarm(
                "ModelErrorsAlarm", f"{name}-model-errors",
                f"{name}: InvocationModelErrors (model crashed, timed out or was not loaded)",
                self._metric("InvocationModelErrors", "Sum"), threshold=alarms.model_errors),
        }

    def _alarm(self, construct_id: str, alarm_name: str, description: str, metric: cloudwatch.Metric, *,
               threshold: float, datapoints: int | None = 1,
               comparison: cloudwatch.ComparisonOperator = AT_OR_ABOVE) -> cloudwatch.Alarm:
        """One alarm of this endpoint; a missing datapoint (no traffic) is never a breach."""
        alarm = cloudwatch.Alarm(
            self, construct_id, alarm_name=alarm_name, alarm_description=description, metric=metric,
            threshold=threshold, comparison_operator=comparison,
            evaluation_periods=self.props.settings.alarms.evaluation_periods, datapoints_to_alarm=datapoints,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
        acknowledge(alarm, {f"{NIST}CloudWatchAlarmAction": NO_ALARM_ACTION})
        return alarm

    def _autoscaling(self) -> appscaling.ScalableTarget | None:
        scaling = self.props.settings.autoscaling
        if scaling is None:
            return None
        stack = Stack.of(self)
        # SageMaker scaling runs as Application Auto Scaling's service-linked role (created on first use);
        # naming it keeps CDK from creating an extra, permissionless role.
        service_linked_role = iam.Role.from_role_arn(
            self, "AutoScalingRole",
            stack.format_arn(service="iam", region="", resource="role",
                             resource_name=f"aws-service-role/{SCALING_SLR}"))
        target = appscaling.ScalableTarget(
            self, "ScalableTarget",
            role=service_linked_role,
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT_NAME}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=scaling.min_instances,
            max_capacity=scaling.max_instances,
        )
        target.node.add_dependency(self.endpoint)  # the variant must exist before it can be registered
        target.scale_to_track_metric(
            "InvocationsPerInstance",
            target_value=scaling.target_invocations_per_instance,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
            scale_in_cooldown=Duration.seconds(scaling.scale_in_cooldown_s),
            scale_out_cooldown=Duration.seconds(scaling.scale_out_cooldown_s),
        )
        return target
