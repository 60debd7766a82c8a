"""The deployment configuration: one typed, validated object per environment, from cdk.json or made in code.

Validated before any construct exists, so every mistake that SageMaker would report ten minutes into a deployment
(or never: a GPU idling under the CPU image) fails `cdk synth` with the key named, e.g.
`environments.prod.decision.instance_type: ...`. The settings models are importable from here (what a foreign
app builds its settings from); the rules, names and facts from their own modules.
"""

from __future__ import annotations

from .endpoint import (
    Alarms,
    AlarmWindow,
    Autoscaling,
    BatchTransform,
    Component,
    CopyAutoscaling,
    DataCapture,
    Endpoint,
    ManagedScaling,
    Serverless,
    SharedEndpoint,
    TargetTracking,
)
from .environment import EnvironmentSettings
from .https_api import ApiAlarms, ApiDomain, ApiQuota, ApiThrottle, ApiWaf, HttpsApi
from .image import DlcImage, ImageBuild
from .model_source import EmbeddedModel, GgufModel, ModelSource, S3Model, TarballModel
from .network import Vpc, VpcEndpoints
from .notifications import Notifications
from .problems import ConfigError

__all__ = [
    "AlarmWindow", "Alarms", "ApiAlarms", "ApiDomain", "ApiQuota", "ApiThrottle", "ApiWaf", "Autoscaling",
    "BatchTransform", "Component", "ConfigError", "CopyAutoscaling", "DataCapture", "DlcImage", "EmbeddedModel",
    "Endpoint", "EnvironmentSettings", "GgufModel", "HttpsApi", "ImageBuild", "ManagedScaling", "ModelSource",
    "Notifications", "S3Model", "Serverless", "SharedEndpoint", "TarballModel", "TargetTracking", "Vpc",
    "VpcEndpoints",
]
