"""`dedicated`: the model on an endpoint of its own, on instances of its variant."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from aws_cdk import aws_sagemaker as sagemaker

from ...config.instances import describe_instance
from ...config.kinds import HostingMode
from ..common import LOCAL_STORAGE_KEY, VARIANT_NAME
from ..own_endpoint import own_endpoint
from ..timeouts import StartupTimeouts
from .serving import Served, Serving

if TYPE_CHECKING:
    from ..llama_endpoint import LlamaEndpoint


class Dedicated(Serving):
    name: ClassVar[HostingMode] = "dedicated"

    def serve(self, model: LlamaEndpoint, timeouts: StartupTimeouts) -> Served:
        settings = model.props.settings
        types = settings.instance_pools or ([settings.instance_type] if settings.instance_type else [])
        assert types  # config: an instance type or pools are required for dedicated hosting
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            model_name=model.model.attr_model_name,
            initial_instance_count=settings.instance_count,
            instance_type=settings.instance_type,
            instance_pools=_pools(model, settings.instance_pools) if settings.instance_pools else None,
            initial_variant_weight=1.0,
            container_startup_health_check_timeout_in_seconds=timeouts.container_startup_health_check_s,
            model_data_download_timeout_in_seconds=timeouts.model_data_download_s,
            inference_ami_version=model.props.inference_ami_version,
        )
        # Instance types with local NVMe storage keep /opt/ml and /tmp on instance storage, encrypted by the
        # instance's hardware module; a KmsKeyId does not encrypt it (SageMaker API reference, as of the pinned
        # botocore), and older versions of that reference said CreateEndpointConfig fails with one: omit it (for
        # pools, where any pool has such storage: one config serves them all).
        local_storage = any(describe_instance(instance_type).local_storage for instance_type in types)
        own = own_endpoint(model, variant=variant, timeouts=timeouts,
                           key_reason=LOCAL_STORAGE_KEY if local_storage else None)
        return Served(config=own.config, endpoint=own.endpoint, scalable_target=own.scalable_target)


def _pools(model: LlamaEndpoint, pools: list[str]) -> list[sagemaker.CfnEndpointConfig.InstancePoolProperty]:
    """The pools in priority order (1 first); a pool on another image names its own model."""
    return [sagemaker.CfnEndpointConfig.InstancePoolProperty(
        instance_type=instance_type, priority=priority,
        model_name_override=model.pool_models[instance_type].attr_model_name
        if instance_type in model.pool_models else None)
        for priority, instance_type in enumerate(pools, start=1)]
