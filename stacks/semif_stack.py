"""One environment of the app: the model artifact, the decision image, and the paired chat/decision endpoints.

One stack per environment (`{app}-{env}`), so an environment deploys, rolls back and is deleted as a unit,
and the two endpoints always serve the same model artifact.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Environment, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from .artifact_source import Artifact, LocalArtifact, container_model_path
from .capture_bucket import CaptureBucket
from .config import ENDPOINT_KINDS, LOG_RETENTION_DAYS, MODEL_SHA256_KEY, Deployment, EndpointKind
from .decision_image import DecisionImage
from .dlc import DlcRegistry
from .iam_hardening import confine_service_trust, scope_waiter_logging
from .keys import account_key, deny_key_use
from .llama_endpoint import EndpointProps, ImageSource, LlamaEndpoint
from .log_groups import LogSettings, allow_cloudwatch_logs
from .model_artifact import ModelArtifact
from .nag import acknowledge_inline_policies
from .timeouts import derive_timeouts
from .vpc_endpoints import VpcEndpoints

CONSTRUCT_IDS: dict[EndpointKind, str] = {"chat": "Chat", "decision": "Decision"}


class SemifStack(Stack):
    def __init__(self, scope: Construct, deployment: Deployment, artifact: Artifact, *, container_dir: Path,
                 account: str | None = None) -> None:
        env = deployment.env
        super().__init__(
            scope, deployment.stack_name,
            env=Environment(account=env.account or account, region=env.region),
            description=f"{deployment.app_name} {deployment.env_name}: llama.cpp chat and SemIf decision "
                        "endpoints on SageMaker",
        )
        self.deployment = deployment
        # Two keys (stacks/keys.py): the build's, and the one for data the build must never read.
        self.build_key = account_key(self, "Key", description=f"{deployment.stack_name}: decision image "
                                                              "repository and its build")
        self.data_key = account_key(self, "DataKey", description=f"{deployment.stack_name}: logs, captured "
                                                                 "request data, endpoint volumes")
        allow_cloudwatch_logs(self.data_key)
        log_settings = LogSettings(logs.RetentionDays[LOG_RETENTION_DAYS[env.log_retention_days]], self.data_key)
        self.registry = DlcRegistry.for_region(env.region, env.dlc_image)
        self.artifact = ModelArtifact(self, "ModelArtifact", artifact=artifact, log_settings=log_settings)
        self.image = DecisionImage(self, "DecisionImage", context_dir=container_dir, registry=self.registry,
                                   accelerator=env.accelerator, key=self.build_key, build=env.image_build,
                                   log_settings=log_settings, instance_types=[env.decision.instance_type])
        deny_key_use(self.data_key, self.image.project.role, "TheImageBuildNeverUsesThisKey")
        if env.vpc is not None and env.vpc.vpc_endpoints is not None:
            self.vpc_endpoints = VpcEndpoints(self, "VpcEndpoints", vpc=env.vpc)
        capture = any(env.endpoint(kind).data_capture for kind in ENDPOINT_KINDS)
        self.capture = CaptureBucket(self, "DataCapture", key=self.data_key) if capture else None

        timeouts = derive_timeouts(artifact.model_bytes,
                                   artifact.tarball_bytes if isinstance(artifact, LocalArtifact) else None)
        images = {
            "chat": ImageSource(uri=self.registry.image_uri(env.accelerator),
                                repository_arn=self.registry.repository_arn),
            "decision": ImageSource(uri=self.image.image_uri, repository_arn=self.image.repository.repository_arn),
        }
        self.endpoints: dict[EndpointKind, LlamaEndpoint] = {}
        for kind in ENDPOINT_KINDS:
            self.endpoints[kind] = LlamaEndpoint(self, CONSTRUCT_IDS[kind], EndpointProps(
                endpoint_name=deployment.endpoint_name(kind),
                image=images[kind],
                artifact=self.artifact,
                environment=self.container_environment(kind, artifact),
                settings=env.endpoint(kind),
                timeouts=timeouts,
                key=self.data_key,
                log_settings=log_settings,
                inference_ami_version=env.inference_ami_version if env.accelerator == "gpu" else None,
                network_isolation=env.network_isolation,
                vpc=env.vpc,
                capture_bucket=self.capture.bucket if self.capture else None,
            ))
        self._outputs()
        confine_service_trust(self)
        scope_waiter_logging(self)
        acknowledge_inline_policies(self)

    def container_environment(self, kind: EndpointKind, artifact: Artifact) -> dict[str, str]:
        """One SM_LLAMA_CPP_* map for both (plus overrides), the model path pinned, adapter settings."""
        env = self.deployment.env
        environment = {**env.llama_env_for(kind), "SM_LLAMA_CPP_MODEL": container_model_path(artifact)}
        if kind == "decision":
            environment.update(env.decision.env)
            if artifact.model_sha256:
                environment[MODEL_SHA256_KEY] = artifact.model_sha256
        return environment

    def _outputs(self) -> None:
        for kind, endpoint in self.endpoints.items():
            prefix = CONSTRUCT_IDS[kind]
            CfnOutput(self, f"{prefix}EndpointName", value=endpoint.endpoint_name,
                      description=f"{kind} endpoint (scripts/smoke.py {kind} --env {self.deployment.env_name})")
            CfnOutput(self, f"{prefix}EndpointConfigName", value=endpoint.endpoint_config.attr_endpoint_config_name,
                      description=f"endpoint config the {kind} endpoint should be InService on")
        CfnOutput(self, "ModelDataUrl", value=self.artifact.s3_url, description="model.tar.gz both endpoints load")
        CfnOutput(self, "DecisionImageUri", value=self.image.image_uri, description="decision image, built FROM "
                                                                                   + self.image.base_image)
