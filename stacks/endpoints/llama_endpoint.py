"""One model served on SageMaker, used twice: for the chat and the decision model, in any hosting mode.

What is deliberately fixed here, for every mode:
- the endpoint (and the inference component) is the only named resource; Model and EndpointConfig names are
  left to CloudFormation, so a new image or model replaces them and the endpoint is updated in place;
- the model depends on its execution role's policy, or CreateModel races IAM and fails with "could not access
  model data";
- the execution role reads exactly one S3 object, pulls from exactly one repository, and writes to its own
  log group;
- start-up timeouts follow the model's size; alarms exist from the first deployment, and notify;
- who may invoke the model is granted here (`grant_invoke`): InvokeEndpoint on its endpoint, and on its inference
  component where the endpoint is shared.

The mode decides what serves the model and how its capacity is graphed: each mode is a class of modes/ (its own
endpoint, `dedicated` or `serverless`; an inference component on the shared endpoint, `shared`), asked, never
compared by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ..artifact.model_artifact import ModelArtifact
from ..config.endpoint import Endpoint
from ..config.kinds import HostingMode
from ..config.network import Vpc
from ..operations.logs import LogSettings
from ..operations.notifications import AlarmTopic
from ..security.nag import acknowledge, logical_id
from ..security.vpc_access import DESCRIBE_REASON, vpc_acknowledgements, vpc_statements
from .common import INSTANCE_METRICS_NAMESPACE, INVOKE_ACTIONS, SAGEMAKER_NAMESPACE, VARIANT_NAME
from .modes import serving_for
from .shared_endpoint import SharedHostingEndpoint
from .timeouts import StartupTimeouts

AT_OR_ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD


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
    shared: SharedHostingEndpoint | None = None
    network_isolation: bool = True


@dataclass(frozen=True)
class EndpointProps:
    image: ImageSource
    artifact: ModelArtifact
    container_env: dict[str, str]
    settings: Endpoint
    hosting: Hosting
    timeouts: StartupTimeouts
    key: kms.IKey
    log_settings: LogSettings
    alarm_topic: AlarmTopic
    inference_ami_version: str | None = None
    vpc: Vpc | None = None
    capture_bucket: s3.IBucket | None = None
    pool_images: Mapping[str, ImageSource] = field(default_factory=dict)  # instance pool -> its other image


class LlamaEndpoint(Construct):
    """One model (its execution role, SageMaker Model, log group and alarms) and what serves it in its mode."""

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

        self.model = self._model("Model", props.image)
        # A pool on another image (model_per_image: x86-64 and arm64 pools) runs a model of its own, by instance type.
        by_image = {image.uri: image for image in props.pool_images.values()}
        models = {uri: self._model(f"PoolModel{index}", image) for index, (uri, image) in enumerate(by_image.items())}
        self.pool_models = {pool: models[image.uri] for pool, image in props.pool_images.items()}

        settings = props.settings
        self.startup_s = settings.startup_health_check_timeout_s or props.timeouts.container_startup_health_check_s
        self.download_s = settings.model_download_timeout_s or props.timeouts.model_data_download_s
        timeouts = StartupTimeouts(model_data_download_s=self.download_s,
                                   container_startup_health_check_s=self.startup_s)
        self.alarms = self._alarms()
        self.serving = serving_for(hosting.mode)
        served = self.serving.serve(self, timeouts)
        self.endpoint_config: sagemaker.CfnEndpointConfig | None = served.config
        self.endpoint: sagemaker.CfnEndpoint | None = served.endpoint
        self.component: sagemaker.CfnInferenceComponent | None = served.component
        self.scalable_target: appscaling.ScalableTarget | None = served.scalable_target

    def _model(self, construct_id: str, image: ImageSource) -> sagemaker.CfnModel:
        """A SageMaker Model of this model's artifact and environment on `image`, under the execution role."""
        props = self.props
        model = sagemaker.CfnModel(
            self, construct_id,
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri,
                model_data_url=props.artifact.s3_url,
                environment=dict(sorted(props.container_env.items())),
                mode="SingleModel",
            ),
            enable_network_isolation=props.hosting.network_isolation,
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                subnets=props.vpc.subnet_ids, security_group_ids=props.vpc.security_group_ids,
            ) if props.vpc else None,
        )
        # CreateModel checks access to the model data with the role as it is at that moment.
        model.node.add_dependency(self.policy)
        # A version-pinned artifact is checked first. (The decision image needs no explicit dependency: its
        # URI is an attribute of the build resource, so CloudFormation creates the model after the build.)
        for dependency in props.artifact.ready:
            model.node.add_dependency(dependency)
        return model

    # ---- who may invoke it -------------------------------------------------------------------------------

    @property
    def invoke_arns(self) -> list[str]:
        """What InvokeEndpoint must be allowed on to reach this model: its endpoint, and on a shared endpoint its
        inference component too."""
        stack = Stack.of(self)
        arns = [stack.format_arn(service="sagemaker", resource="endpoint", resource_name=self.endpoint_name)]
        if self.component_name:
            arns.append(stack.format_arn(service="sagemaker", resource="inference-component",
                                         resource_name=self.component_name))
        return arns

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` invoke this model (sagemaker:InvokeEndpoint on `invoke_arns`), nothing else."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=INVOKE_ACTIONS, resource_arns=self.invoke_arns)

    # ---- the execution role ------------------------------------------------------------------------------

    def pull_and_log_statements(self) -> list[iam.PolicyStatement]:
        """Pull this model's image and write its logs: what the shared endpoint's own role needs of each model."""
        return [
            iam.PolicyStatement(
                sid="PullImage",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=list(dict.fromkeys(image.repository_arn for image in
                                             (self.props.image, *self.props.pool_images.values())))),
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
