"""Running both models inside a VPC: the subnets and security groups, and optional service endpoints for them."""

from __future__ import annotations

from pydantic import Field, field_validator

from .strict import Strict, resource_ids


class VpcEndpoints(Strict):
    """Interface endpoints (ECR API, ECR Docker, CloudWatch Logs) and an S3 gateway endpoint in the VPC."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    route_table_ids: list[str] = Field(min_length=1)

    @field_validator("route_table_ids")
    @classmethod
    def _route_tables(cls, value: list[str]) -> list[str]:
        return resource_ids(value, "rtb", "route table")


class Vpc(Strict):
    """Run both models inside these subnets (ids, never looked up: synth stays offline)."""

    subnet_ids: list[str] = Field(min_length=1, max_length=16)
    security_group_ids: list[str] = Field(min_length=1, max_length=5)
    vpc_endpoints: VpcEndpoints | None = None

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, value: list[str]) -> list[str]:
        return resource_ids(value, "subnet", "subnet")

    @field_validator("security_group_ids")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        return resource_ids(value, "sg", "security group")
