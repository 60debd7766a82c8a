"""One environment of the app: the model artifact, the decision image, the chat and decision models in their
hosting modes, and what operates them (alarm topic, dashboard, batch locations).

One stack per environment (`{app}-{env}`), so an environment deploys, rolls back and is deleted as a unit,
and the two models always serve the same model artifact.
"""

from __future__ import annotations

import math
from pathlib import Path

from aws_cdk import CfnOutput, Environment, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from .artifact_source import Artifact, LocalArtifact, container_model_path
from .batch_transform import BatchLocations
from .config import (
    CALIBRATION_KEY,
    ENDPOINT_KINDS,
    ENDPOINT_NAME_KEY,
    LOG_RETENTION_DAYS,
    MAX_BODY_KEY,
    MODEL_SHA256_KEY,
    Deployment,
    EndpointKind,
)
from .dashboard import OperationsDashboard, add_warning_rate_alarm
from .data_bucket import CAPTURE, DataBucket
from .decision_image import DecisionImage
from .dlc import DlcRegistry
from .hosting import decision_body_limit, warning_rate
from .iam_hardening import confine_service_trust, scope_waiter_logging
from .keys import account_key, deny_key_use
from .llama_endpoint import EndpointProps, Hosting, ImageSource, LlamaEndpoint
from .log_groups import LogSettings, allow_cloudwatch_logs
from .model_artifact import ModelArtifact
from .nag import acknowledge_inline_policies
from .notifications import AlarmTopic
from .shared_endpoint import SharedEndpoint
from .timeouts import derive_timeouts
from .vpc_endpoints import VpcEndpoints

CONSTRUCT_IDS: dict[EndpointKind, str] = {"chat": "Chat", "decision": "Decision"}
THREADS_KEY = "SM_LLAMA_CPP_THREADS"


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
                                   log_settings=log_settings, instance_types=env.decision_instance_types())
        deny_key_use(self.data_key, self.image.project.role, "TheImageBuildNeverUsesThisKey")
        if env.vpc is not None and env.vpc.vpc_endpoints is not None:
            self.vpc_endpoints = VpcEndpoints(self, "VpcEndpoints", vpc=env.vpc)
        capture = any(env.endpoint(kind).data_capture for kind in ENDPOINT_KINDS)
        self.capture = DataBucket(self, "DataCapture", key=self.data_key, holding=CAPTURE) if capture else None
        self.alarm_topic = AlarmTopic(self, "Alarms", stack_name=deployment.stack_name, key=self.data_key,
                                      notifications=env.notifications)
        inference_ami = env.inference_ami_version if env.accelerator == "gpu" else None
        self.shared: SharedEndpoint | None = None
        if env.shared:
            assert env.shared_endpoint is not None  # config: required for shared hosting
            self.shared = SharedEndpoint(
                self, "Shared", endpoint_name=deployment.shared_endpoint_name, settings=env.shared_endpoint,
                key=self.data_key, log_settings=log_settings, inference_ami_version=inference_ami,
                network_isolation=env.network_isolation, vpc=env.vpc, artifact=self.artifact)

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
                image=images[kind],
                artifact=self.artifact,
                environment=self.container_environment(kind, artifact),
                settings=env.endpoint(kind),
                hosting=Hosting(mode=env.hosting_of(kind), endpoint_name=deployment.endpoint_name(kind),
                                component_name=deployment.component_name(kind), shared=self.shared,
                                network_isolation=env.network_isolation_for(kind)),
                timeouts=timeouts,
                key=self.data_key,
                log_settings=log_settings,
                alarm_topic=self.alarm_topic,
                inference_ami_version=inference_ami,
                vpc=env.vpc,
                capture_bucket=self.capture.bucket if self.capture else None,
            ))
            if self.shared is not None:
                self.shared.admit(self.endpoints[kind])
        decision = self.endpoints["decision"]
        add_warning_rate_alarm(decision, warning_rate(env))
        self.batch: BatchLocations | None = None
        if env.decision.batch_transform is not None:
            self.batch = BatchLocations(self, "BatchTransform", key=self.data_key,
                                        settings=env.decision.batch_transform)
            self.batch.grant(decision.policy)
        self.dashboard = OperationsDashboard(self, "Operations", name=deployment.stack_name, models=self.endpoints,
                                             shared=self.shared, gpu=env.accelerator == "gpu")
        self._outputs()
        confine_service_trust(self)
        scope_waiter_logging(self)
        acknowledge_inline_policies(self)

    def container_environment(self, kind: EndpointKind, artifact: Artifact) -> dict[str, str]:
        """One SM_LLAMA_CPP_* map for both (plus overrides), the model path pinned, adapter settings."""
        env, deployment = self.deployment.env, self.deployment
        environment = {**env.llama_env_for(kind), "SM_LLAMA_CPP_MODEL": container_model_path(artifact)}
        component = env.endpoint(kind).component
        if env.hosting_of(kind) == "shared" and component is not None:
            # Two llama.cpp processes share the instance: each uses the cores its copy reserves, not every core
            # of the machine (its spinning threads would slow the other down).
            environment.setdefault(THREADS_KEY, str(max(1, math.ceil(component.cpu_cores))))
        if kind == "decision":
            environment.update(env.decision.env)
            environment[ENDPOINT_NAME_KEY] = deployment.endpoint_name("decision")
            calibration = env.decision.calibration_setting()  # validated at synth (config.py)
            if calibration is not None:
                environment[CALIBRATION_KEY] = calibration
            if artifact.model_sha256:
                environment[MODEL_SHA256_KEY] = artifact.model_sha256
            body_limit = decision_body_limit(env)
            if body_limit is not None:
                environment[MAX_BODY_KEY] = str(body_limit)
        return environment

    def _outputs(self) -> None:
        for kind, endpoint in self.endpoints.items():
            prefix = CONSTRUCT_IDS[kind]
            CfnOutput(self, f"{prefix}EndpointName", value=endpoint.endpoint_name,
                      description=f"{kind} endpoint (scripts/smoke.py {kind} --env {self.deployment.env_name})")
            config = self.shared.config if self.shared is not None else endpoint.endpoint_config
            assert config is not None
            CfnOutput(self, f"{prefix}EndpointConfigName", value=config.attr_endpoint_config_name,
                      description=f"endpoint config the {kind} endpoint should be InService on")
            if endpoint.component_name is not None:
                CfnOutput(self, f"{prefix}InferenceComponentName", value=endpoint.component_name,
                          description=f"pass as InferenceComponentName when invoking the {kind} model")
        CfnOutput(self, "DecisionModelName", value=self.endpoints["decision"].model.attr_model_name,
                  description="the decision model's SageMaker Model (CreateTransformJob ModelName)")
        if self.batch is not None:
            CfnOutput(self, "BatchInputUri", value=self.batch.input_uri, description="Batch Transform input prefix")
            CfnOutput(self, "BatchOutputUri", value=self.batch.output_uri,
                      description="Batch Transform output prefix")
            CfnOutput(self, "BatchInstanceType", value=self.batch.settings.instance_type,
                      description="the instance type validated for transform jobs of this decision model")
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic.topic_arn,
                  description="every alarm of this environment notifies this topic")
        CfnOutput(self, "ModelDataUrl", value=self.artifact.s3_url, description="model.tar.gz both endpoints load")
        CfnOutput(self, "DecisionImageUri", value=self.image.image_uri, description="decision image, built FROM "
                                                                                   + self.image.base_image)
