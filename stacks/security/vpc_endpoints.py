"""Private paths from the endpoints' subnets to S3, ECR and CloudWatch Logs, for VPC mode without NAT.

In VPC mode SageMaker downloads the model and pulls the image through the configured subnets; without these
endpoints (or a NAT gateway) the endpoint never starts. Plain ids from the config: nothing is looked up, so
synth stays offline.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ..config.network import Vpc

INTERFACE_SERVICES = ("ecr.api", "ecr.dkr", "logs")


class VpcServiceEndpoints(Construct):
    """The S3 gateway endpoint and the interface endpoints of `INTERFACE_SERVICES` in the configured VPC."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: Vpc) -> None:
        super().__init__(scope, construct_id)
        assert vpc.vpc_endpoints is not None
        stack = Stack.of(self)
        settings = vpc.vpc_endpoints
        self.gateway = ec2.CfnVPCEndpoint(
            self, "S3", vpc_id=settings.vpc_id, vpc_endpoint_type="Gateway",
            service_name=f"com.amazonaws.{stack.region}.s3", route_table_ids=settings.route_table_ids)
        self.interfaces = [
            ec2.CfnVPCEndpoint(
                self, service.replace(".", "-"), vpc_id=settings.vpc_id, vpc_endpoint_type="Interface",
                service_name=f"com.amazonaws.{stack.region}.{service}", private_dns_enabled=True,
                subnet_ids=vpc.subnet_ids, security_group_ids=vpc.security_group_ids)
            for service in INTERFACE_SERVICES
        ]
