"""The chat + decision pair as one construct, for any CDK app: the model artifact, the decision image build, the
two models in their hosting mode, and what operates them (keys, alarm topic, dashboard, batch locations), with the
System One API in front of the decision model where the environment turns it on.

Its props are typed and validated, and need no cdk.json: `DecisionEndpointPairProps.build(...)` takes the app's
name, an environment name and an `Environment` (the same pydantic model cdk.json's environments are parsed into,
built in code), checks the rules that span several keys (ConfigError naming them, as `cdk synth` does), and
prepares the model artifact. The app of this repository fills the same props from cdk.json (stacks/build.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import aws_logs as logs
from constructs import Construct

from .artifact_source import Artifact, ArtifactCache, LocalArtifact, container_model_path, prepare_artifact
from .batch_transform import BatchLocations
from .config import (
    CALIBRATION_KEY,
    ENDPOINT_KINDS,
    ENDPOINT_NAME_KEY,
    LOG_RETENTION_DAYS,
    MAX_BODY_KEY,
    MODEL_SHA256_KEY,
    ConfigError,
    Deployment,
    EndpointKind,
    Environment,
    check_environment,
    check_model_fit,
)
from .dashboard import OperationsDashboard, add_warning_rate_alarm
from .data_bucket import CAPTURE, DataBucket
from .decision_image import CONTAINER_DIR, DecisionImage
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
from .systemone_api import SystemOneApiFront
from .timeouts import derive_timeouts
from .vpc_endpoints import VpcEndpoints

CONSTRUCT_IDS: dict[EndpointKind, str] = {"chat": "Chat", "decision": "Decision"}
THREADS_KEY = "SM_LLAMA_CPP_THREADS"


@dataclass(frozen=True)
class DecisionEndpointPairProps:
    """What the pair is made of: its names and settings (`deployment`), the model artifact both models load, and
    the decision image's Docker build context (by default the toolkit's own: the checkout's `container/`, or the
    copy an installed wheel ships)."""

    deployment: Deployment
    artifact: Artifact
    container_dir: Path = CONTAINER_DIR

    @classmethod
    def build(cls, *, app_name: str, env_name: str, settings: Environment, cache_dir: Path,
              container_dir: Path = CONTAINER_DIR, base_dir: Path | None = None) -> DecisionEndpointPairProps:
        """Validated props from settings made in code (ConfigError names the key, relative to `settings`);
        `cache_dir` keeps the packaged model between synths; relative model paths resolve against `base_dir`."""
        problems = check_environment(settings)
        if problems:
            raise ConfigError(problems)
        artifact = prepare_artifact(settings.model, key="model", base_dir=base_dir or Path.cwd(),
                                    cache=ArtifactCache(cache_dir))
        problems = check_model_fit(settings, model_bytes=artifact.model_bytes, context_length=artifact.context_length)
        if problems:
            raise ConfigError(problems)
        return cls(Deployment(app_name=app_name, env_name=env_name, env=settings), artifact, container_dir)


class DecisionEndpointPair(Construct):
    """The chat endpoint (the stock llama.cpp DLC) and the decision endpoint (the SemIf child image) of one model.

    Endpoint names are `{app}-{env}-chat` and `{app}-{env}-decision` (or the shared/serverless names of their
    hosting mode); `endpoints`, `image`, `artifact`, `alarm_topic` and `dashboard` are there to build on.
    """

    def __init__(self, scope: Construct, construct_id: str, props: DecisionEndpointPairProps) -> None:
        super().__init__(scope, construct_id)
        deployment, artifact, container_dir = props.deployment, props.artifact, props.container_dir
        env = deployment.env
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
        self.systemone_api: SystemOneApiFront | None = None
        if env.systemone_api is not None:
            self.systemone_api = SystemOneApiFront(
                self, "SystemOneApi", deployment=deployment, settings=env.systemone_api, decision=decision,
                key=self.data_key, log_settings=log_settings, alarm_topic=self.alarm_topic)
            self.dashboard.dashboard.add_widgets(*self.systemone_api.ops.widgets())
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

