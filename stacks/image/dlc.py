"""The AWS llama.cpp Deep Learning Container: image URIs and registry per region, from CDK's region facts.

The DLC registry account is not the same in every region; `aws_cdk.region_info` knows it, so no table of
accounts is kept here (a stale one would point a region at a registry that has no such image).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk.region_info import RegionInfo

from ..config.image import DlcImage
from ..config.instances import Accelerator, Architecture


@dataclass(frozen=True)
class DlcRegistry:
    region: str
    account: str
    domain_suffix: str
    partition: str
    images: DlcImage

    @classmethod
    def for_region(cls, region: str, images: DlcImage) -> DlcRegistry:
        facts = RegionInfo.get(region)
        account = facts.dlc_repository_account
        if account is None:  # config validation refuses such regions first; this guards direct use
            raise ValueError(f"CDK knows no Deep Learning Containers registry in {region}")
        return cls(region=region, account=account, domain_suffix=facts.domain_suffix or "amazonaws.com",
                   partition=facts.partition or "aws", images=images)

    @property
    def host(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.{self.domain_suffix}"

    def repository(self, architecture: Architecture = "x86_64") -> str:
        """The DLC repository of an architecture: x86-64 (CPU and CUDA), or arm64 (CPU, Graviton3 and newer)."""
        return self.images.arm64_repository if architecture == "arm64" else self.images.repository

    def repository_arn(self, architecture: Architecture = "x86_64") -> str:
        return f"arn:{self.partition}:ecr:{self.region}:{self.account}:repository/{self.repository(architecture)}"

    def image_uri(self, accelerator: Accelerator, architecture: Architecture = "x86_64") -> str:
        """The DLC image of an accelerator and architecture: by digest when `dlc_image.digest` pins it (config
        refuses a digest where an environment runs both architectures), else by its moving tag."""
        repository = self.repository(architecture)
        if self.images.digest is not None:
            return f"{self.host}/{repository}@{self.images.digest}"
        tag = self.images.cuda_tag if accelerator == "gpu" else self.images.cpu_tag
        return f"{self.host}/{repository}:{tag}"
