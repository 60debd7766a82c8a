"""The chat + decision pair as one construct, for any CDK app: the model artifact, the decision image build, the
two models in their hosting mode (the decision model alone where the environment says `chat: false`), and what
operates them (keys, alarm topic, dashboard, batch locations), with the System One API in front of the decision
model where the environment turns it on.

Its props are typed and validated, and need no cdk.json: `DecisionEndpointPairProps.build(...)` takes the app's
name, an environment name and an `EnvironmentSettings` (the same pydantic model cdk.json's environments are parsed
into, built in code) and runs the app's own preparation (stacks/prepare.py: validate, prepare the model artifact,
check the fit; ConfigError names the key, as `cdk synth` does). The app of this repository fills the same props
from cdk.json (stacks/cdk_app.py). `grant_invoke` lets a role of the app call the models.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from .artifact.model_artifact import ModelArtifact
from .artifact.source import Artifact, ArtifactCache, LocalArtifact, container_model_path
from .config.container_env import container_env
from .config.deployment import Deployment
from .config.environment import LOG_RETENTION_DAYS, EnvironmentSettings
from .config.instances import Architecture, describe_instance
from .config.kinds import EndpointKind
from .endpoints.common import INVOKE_ACTIONS
from .endpoints.dashboard import OperationsDashboard, add_warning_rate_alarm
from .endpoints.llama_endpoint import EndpointProps, Hosting, ImageSource, LlamaEndpoint
from .endpoints.shared_endpoint import SharedHostingEndpoint
from .endpoints.timeouts import derive_timeouts
from .https_api.front import HttpsApiFront
from .image.decision_image import CONTAINER_DIR, DecisionImage
from .image.dlc import DlcRegistry
from .operations.batch_transform import BatchLocations
from .operations.data_bucket import CAPTURE, DataBucket
from .operations.logs import LogSettings, allow_cloudwatch_logs
from .operations.notifications import AlarmTopic
from .prepare import prepare
from .security.iam_hardening import confine_service_trust, scope_waiter_logging
from .security.keys import account_key, deny_key_use
from .security.nag import acknowledge_inline_policies
from .security.vpc_endpoints import VpcServiceEndpoints

CONSTRUCT_IDS: dict[EndpointKind, str] = {"chat": "Chat", "decision": "Decision"}


@dataclass(frozen=True)
class DecisionEndpointPairProps:
    """What the pair is made of: its names and settings (`deployment`), the model artifact both models load, and
    the decision image's Docker build context (by default the toolkit's own: the checkout's `container/`, or the
    copy an installed wheel ships)."""

    deployment: Deployment
    artifact: Artifact
    container_dir: Path = CONTAINER_DIR

    @classmethod
    def build(cls, *, app_name: str, environment_name: str, settings: EnvironmentSettings, cache_dir: Path,
              container_dir: Path = CONTAINER_DIR, base_dir: Path | None = None) -> DecisionEndpointPairProps:
        """Validated props from settings made in code (ConfigError names the key, relative to `settings`);
        `cache_dir` keeps the packaged model between synths; relative model paths resolve against `base_dir`."""
        deployment = Deployment(app_name=app_name, environment_name=environment_name, settings=settings)
        artifact = prepare(deployment, prefix="", base_dir=base_dir or Path.cwd(), cache=ArtifactCache(cache_dir))
        return cls(deployment, artifact, container_dir)


class DecisionEndpointPair(Construct):
    """The chat endpoint (the stock llama.cpp DLC) and the decision endpoint (the SemIf child image) of one model.

    Endpoint names are `{app}-{environment}-chat` and `{app}-{environment}-decision` (or the shared/serverless names
    of their hosting mode); `endpoints`, `image`, `artifact`, `alarm_topic` and `dashboard` are there to build on.
    """

    def __init__(self, scope: Construct, construct_id: str, props: DecisionEndpointPairProps) -> None:
        super().__init__(scope, construct_id)
        deployment, artifact, container_dir = props.deployment, props.artifact, props.container_dir
        settings = deployment.settings
        self.settings = settings
        self.deployment = deployment
        # Two keys (stacks/security/keys.py): the build's, and the one for data the build must never read.
        self.build_key = account_key(self, "Key", description=f"{deployment.stack_name}: decision image "
                                                              "repository and its build")
        self.data_key = account_key(self, "DataKey", description=f"{deployment.stack_name}: logs, captured "
                                                                 "request data, endpoint volumes")
        allow_cloudwatch_logs(self.data_key)
        log_settings = LogSettings(logs.RetentionDays[LOG_RETENTION_DAYS[settings.log_retention_days]],
                                   self.data_key)
        self.registry = DlcRegistry.for_region(settings.region, settings.dlc_image)
        self.artifact = ModelArtifact(self, "ModelArtifact", artifact=artifact, log_settings=log_settings)
        self.image = DecisionImage(self, "DecisionImage", context_dir=container_dir, registry=self.registry,
                                   accelerator=settings.accelerator, key=self.build_key,
                                   build=settings.image_build, log_settings=log_settings,
                                   instance_types=settings.decision_instance_types(),
                                   architecture=settings.architecture_of("decision"))
        assert self.image.project.role is not None  # CodeBuild projects get a role unless given one
        deny_key_use(self.data_key, self.image.project.role, "TheImageBuildNeverUsesThisKey")
        if settings.vpc is not None and settings.vpc.vpc_endpoints is not None:
            self.vpc_endpoints = VpcServiceEndpoints(self, "VpcEndpoints", vpc=settings.vpc)
        capture = any(settings.endpoint(kind).data_capture for kind in settings.kinds)
        self.capture = DataBucket(self, "DataCapture", key=self.data_key, holding=CAPTURE) if capture else None
        self.alarm_topic = AlarmTopic(self, "Alarms", stack_name=deployment.stack_name, key=self.data_key,
                                      notifications=settings.notifications)
        inference_ami = settings.inference_ami_version if settings.accelerator == "gpu" else None
        self.shared: SharedHostingEndpoint | None = None
        if settings.shared:
            assert settings.shared_endpoint is not None  # config: required for shared hosting
            self.shared = SharedHostingEndpoint(
                self, "Shared", endpoint_name=deployment.shared_endpoint_name, settings=settings.shared_endpoint,
                key=self.data_key, log_settings=log_settings, inference_ami_version=inference_ami,
                network_isolation=settings.network_isolation, vpc=settings.vpc,
                read_model=self.artifact.read_statements())

        timeouts = derive_timeouts(artifact.model_bytes,
                                   artifact.tarball_bytes if isinstance(artifact, LocalArtifact) else None)
        self.endpoints: dict[EndpointKind, LlamaEndpoint] = {}  # the decision model's, and the chat model's if any
        for kind in settings.kinds:
            image = (ImageSource(uri=self.image.image_uri, repository_arn=self.image.repository.repository_arn)
                     if kind == "decision" else self._dlc_image(settings.architecture_of(kind)))
            self.endpoints[kind] = LlamaEndpoint(self, CONSTRUCT_IDS[kind], EndpointProps(
                image=image,
                artifact=self.artifact,
                container_env=container_env(settings, kind, endpoint_name=deployment.endpoint_name(kind),
                                            model_path=container_model_path(artifact),
                                            model_sha256=artifact.model_sha256),
                settings=settings.endpoint(kind),
                hosting=Hosting(mode=settings.hosting_of(kind), endpoint_name=deployment.endpoint_name(kind),
                                component_name=deployment.component_name(kind), shared=self.shared,
                                network_isolation=settings.network_isolation_for(kind)),
                timeouts=timeouts,
                key=self.data_key,
                log_settings=log_settings,
                alarm_topic=self.alarm_topic,
                inference_ami_version=inference_ami,
                vpc=settings.vpc,
                capture_bucket=self.capture.bucket if self.capture else None,
                pool_images=self._pool_images(kind),
            ))
            if self.shared is not None:
                self.shared.admit(CONSTRUCT_IDS[kind], self.endpoints[kind].pull_and_log_statements())
        decision = self.endpoints["decision"]
        add_warning_rate_alarm(decision)
        self.batch: BatchLocations | None = None
        if settings.decision.batch_transform is not None:
            self.batch = BatchLocations(self, "BatchTransform", key=self.data_key,
                                        settings=settings.decision.batch_transform)
            self.batch.grant(decision.policy)
        self.dashboard = OperationsDashboard(self, "Operations", name=deployment.stack_name, models=self.endpoints,
                                             shared=self.shared, gpu=settings.accelerator == "gpu")
        self.https_api: HttpsApiFront | None = None
        if settings.https_api is not None:
            # The construct id, like the outputs, alarm names and metric namespace, keeps the name of the first deploys:
            # a new id would replace the API (and its URL) on an update.
            self.https_api = HttpsApiFront(
                self, "SystemOneApi", deployment=deployment, settings=settings.https_api, decision=decision,
                key=self.data_key, log_settings=log_settings, alarm_topic=self.alarm_topic)
            self.dashboard.dashboard.add_widgets(*self.https_api.ops.widgets())
        confine_service_trust(self)
        scope_waiter_logging(self)
        acknowledge_inline_policies(self)

    def _dlc_image(self, architecture: Architecture) -> ImageSource:
        """The stock DLC of the environment's accelerator, for an architecture."""
        return ImageSource(uri=self.registry.image_uri(self.settings.accelerator, architecture),
                           repository_arn=self.registry.repository_arn(architecture))

    def _pool_images(self, kind: EndpointKind) -> dict[str, ImageSource]:
        """The pools of `kind` on another architecture than its first: each runs the DLC of its own (config allows
        it only with model_per_image, and only for the chat model: the decision image has one architecture)."""
        settings = self.settings
        primary = settings.architecture_of(kind)
        pools = settings.endpoint(kind).instance_pools or []
        return {pool: self._dlc_image(describe_instance(pool).architecture) for pool in pools
                if describe_instance(pool).architecture != primary}

    def grant_invoke(self, grantee: iam.IGrantable, kinds: Iterable[EndpointKind] | None = None) -> iam.Grant:
        """Let `grantee` invoke the pair's models (every one it has unless `kinds` says which):
        sagemaker:InvokeEndpoint on each one's endpoint, and on its inference component where the endpoint is
        shared, each ARN once."""
        chosen = list(self.endpoints) if kinds is None else list(kinds)
        missing = [kind for kind in chosen if kind not in self.endpoints]
        if missing:
            raise ValueError(f"this pair has no {' or '.join(missing)} endpoint (a decision-only environment: "
                             "chat: false)")
        arns = dict.fromkeys(arn for kind in chosen for arn in self.endpoints[kind].invoke_arns)
        return iam.Grant.add_to_principal(grantee=grantee, actions=INVOKE_ACTIONS, resource_arns=list(arns))
