"""What every part of serving a model agrees on: the variant's name, SageMaker's metric namespaces, the action that
invokes a model, and why an endpoint config on local instance storage carries no KMS key."""

from __future__ import annotations

VARIANT_NAME = "AllTraffic"
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"  # CPU/memory/disk, published with the role
COMPONENT_METRICS_NAMESPACE = "/aws/sagemaker/InferenceComponents"  # utilisation per component
INVOKE_ACTIONS = ["sagemaker:InvokeEndpoint"]
LOCAL_STORAGE_KEY = ("this instance type keeps /opt/ml and /tmp on NVMe instance storage, encrypted by the "
                     "instance's hardware module, which a KmsKeyId does not encrypt (SageMaker API reference; older "
                     "versions said CreateEndpointConfig fails with one): see docs/security.md, Encryption at rest")
