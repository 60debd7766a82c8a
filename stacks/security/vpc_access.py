"""What SageMaker needs of an execution role in VPC mode, shared by the models' roles and the shared endpoint's.

SageMaker creates the network interfaces with the execution role. Creating one is allowed only in the configured
subnets with the configured security groups (both resources of the same request); the interface's own id is
generated, and the Describe actions have no resource-level permissions.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from ..config.network import Vpc

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

def vpc_statements(scope: Construct, vpc: Vpc) -> list[iam.PolicyStatement]:
    """What SageMaker needs of an execution role in VPC mode: interfaces only in the configured subnets/groups."""
    stack = Stack.of(scope)

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


def vpc_acknowledgements(scope: Construct) -> dict[str, str]:
    stack = Stack.of(scope)
    partition, region = stack.resolve(stack.partition), stack.resolve(stack.region)
    return {f"AwsSolutions-IAM5[Resource::arn:{partition}:ec2:{region}:<AWS::AccountId>:network-interface/*]":
            GENERATED_INTERFACES}
