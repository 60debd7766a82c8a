"""The one endpoint of `shared` hosting: the instances that both models' inference components run on.

Its endpoint config holds no model: the instance type and count, managed instance scaling, least-outstanding-
requests routing, and an execution role of its own (SageMaker acts with it for the endpoint; each component's
model keeps its own role). That role can do what either model's role can for its container (pull the image,
write the component's logs), added once the components exist (`admit`), reading the one model object they
both load, plus the VPC interfaces in VPC mode.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ..config.endpoint import SharedEndpoint
from ..config.instances import describe_instance
from ..config.network import Vpc
from ..operations.logs import LogSettings
from ..security.nag import NIST, acknowledge
from ..security.vpc_access import DESCRIBE_REASON, vpc_acknowledgements, vpc_statements
from .common import LOCAL_STORAGE_KEY, VARIANT_NAME

ROUTING = "LEAST_OUTSTANDING_REQUESTS"  # a busy adapter (one decision at a time) gets fewer new requests


class SharedHostingEndpoint(Construct):
    """The endpoint both inference components run on (`endpoint`), with its own execution role (`policy`)."""

    def __init__(self, scope: Construct, construct_id: str, *, endpoint_name: str, settings: SharedEndpoint,
                 key: kms.IKey, log_settings: LogSettings, inference_ami_version: str | None,
                 network_isolation: bool, vpc: Vpc | None,
                 read_model: Iterable[iam.PolicyStatement]) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.settings = settings
        self.log_group = log_settings.log_group(self, "Logs", name=f"/aws/sagemaker/Endpoints/{endpoint_name}")
        self.role = iam.Role(self, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
                             description=f"Execution role of SageMaker endpoint {endpoint_name} (inference components)")
        statements = [
            *read_model,  # the one model object both components load (ModelArtifact.read_statements)
            iam.PolicyStatement(sid="RegistryLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(sid="WriteEndpointLogs",
                                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                                resources=[self.log_group.log_group_arn]),
        ]
        if vpc is not None:
            statements += vpc_statements(self, vpc)
        self.policy = iam.Policy(self, "ExecutionPolicy", roles=[self.role], statements=statements)
        acknowledge(self.policy, {
            "AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken has no resource-level permissions"
                                              + (f"; {DESCRIBE_REASON}" if vpc else ""),
            **(vpc_acknowledgements(self) if vpc else {}),
        })
        scaling = settings.managed_scaling
        # A KmsKeyId is left out where any pool keeps its volumes on local NVMe storage (one config serves them all).
        local_storage = any(describe_instance(t).local_storage for t in settings.instance_types)
        self.config = sagemaker.CfnEndpointConfig(
            self, "Config",
            execution_role_arn=self.role.role_arn,
            production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT_NAME,
                instance_type=settings.instance_type,
                instance_pools=[sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=t, priority=p)
                                for p, t in enumerate(settings.instance_pools, start=1)]
                if settings.instance_pools else None,
                initial_instance_count=settings.instance_count,
                inference_ami_version=inference_ami_version,
                routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(routing_strategy=ROUTING),
                managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status="ENABLED", min_instance_count=scaling.min_instances,
                    max_instance_count=scaling.max_instances) if scaling else None,
            )],
            enable_network_isolation=network_isolation,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(
                subnets=vpc.subnet_ids, security_group_ids=vpc.security_group_ids) if vpc else None,
            kms_key_id=None if local_storage else key.key_arn,
        )
        if local_storage:
            acknowledge(self.config, {f"{NIST}SageMakerEndpointConfigurationKMSKeyConfigured": LOCAL_STORAGE_KEY})
        self.config.node.add_dependency(self.policy)  # CreateEndpointConfig may check the role as it is then
        self.endpoint = sagemaker.CfnEndpoint(self, "Endpoint", endpoint_name=endpoint_name,
                                              endpoint_config_name=self.config.attr_endpoint_config_name)
        self.endpoint.node.add_dependency(self.log_group)

    def admit(self, name: str, statements: Iterable[iam.PolicyStatement]) -> None:
        """Let the endpoint's role do what the component `name` needs of it (pull the model's image, write the
        component's logs: LlamaEndpoint.pull_and_log_statements), each statement's sid suffixed with `name`."""
        for statement in statements:
            self.policy.add_statements(iam.PolicyStatement(
                sid=f"{statement.sid}{name}", actions=statement.actions, resources=statement.resources))
