"""The AWS llama.cpp Deep Learning Container: image URIs and registry per region, from CDK's region facts.

The DLC registry account is not the same in every region; `aws_cdk.region_info` knows it, so no table of
accounts is kept here (a stale one would point a region at a registry that has no such image).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk.region_info import RegionInfo

from ..config.image import DlcImage
from ..config.instances import Accelerator


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

    @property
    def repository_arn(self) -> str:
        return f"arn:{self.partition}:ecr:{self.region}:{self.account}:repository/{self.images.repository}"

    def image_uri(self, accelerator: Accelerator) -> str:
        """The DLC image both endpoints use: by digest when `dlc_image.digest` pins it, else by its moving tag."""
        if self.images.digest is not None:
            return f"{self.host}/{self.images.repository}@{self.images.digest}"
        tag = self.images.cuda_tag if accelerator == "gpu" else self.images.cpu_tag
        return f"{self.host}/{self.images.repository}:{tag}"
