"""One environment of the app: the chat + decision pair (stacks/pair.py) in a stack of its own, with the outputs
the tools read.

One stack per environment (`{app}-{environment}`), so an environment deploys, rolls back and is deleted as a unit,
and the two models always serve the same model artifact.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import CfnOutput, Stack
from constructs import Construct

from .artifact.source import Artifact
from .config.deployment import Deployment
from .pair import CONSTRUCT_IDS, DecisionEndpointPair, DecisionEndpointPairProps

# The pair's id: CDK leaves a "Default" out of logical ids, so the template is what it was before the pair
# became a construct of its own (ids and thereby deployed resources unchanged).
PAIR_ID = "Default"


class SemifStack(Stack):
    def __init__(self, scope: Construct, deployment: Deployment, artifact: Artifact, *, container_dir: Path,
                 account: str | None = None) -> None:
        settings = deployment.settings
        super().__init__(
            scope, deployment.stack_name,
            env=cdk.Environment(account=settings.account or account, region=settings.region),  # CDK's, not ours
            description=f"{deployment.app_name} {deployment.environment_name}: "
                        + ("llama.cpp chat and SemIf decision endpoints" if settings.chat is not None
                           else "a SemIf decision endpoint (no chat endpoint)") + " on SageMaker",
        )
        self.deployment = deployment
        self.pair = DecisionEndpointPair(self, PAIR_ID, DecisionEndpointPairProps(deployment, artifact, container_dir))
        pair = self.pair  # its parts, as the stack's own attributes were before the pair existed
        self.endpoints, self.shared, self.batch, self.capture = pair.endpoints, pair.shared, pair.batch, pair.capture
        self.artifact, self.image, self.alarm_topic, self.registry = pair.artifact, pair.image, pair.alarm_topic, \
            pair.registry
        self._outputs()

    def _outputs(self) -> None:
        name = self.deployment.environment_name
        for kind, endpoint in self.endpoints.items():
            prefix = CONSTRUCT_IDS[kind]
            CfnOutput(self, f"{prefix}EndpointName", value=endpoint.endpoint_name,
                      description=f"{kind} endpoint (semif smoke {kind} --env {name})")
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
        api = self.pair.https_api
        if api is not None:
            CfnOutput(self, "SystemOneApiUrl", value=api.url,
                      description=f"the System One SDK's base_url (semif smoke systemone --env {name})")
            CfnOutput(self, "SystemOneApiId", value=api.api.rest_api_id, description="the System One API")
            CfnOutput(self, "SystemOneApiUsagePlanId", value=api.usage_plan.usage_plan_id,
                      description=f"every key's usage plan (semif keys create {name} NAME)")
            CfnOutput(self, "SystemOneApiKeysPath", value=api.keys_path,
                      description="SSM path of the API's hashed keys (one SecureString per key)")
            CfnOutput(self, "SystemOneApiKeysKeyArn", value=api.key.key_arn,
                      description="the KMS key the API's keys are encrypted with")
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic.topic_arn,
                  description="every alarm of this environment notifies this topic")
        CfnOutput(self, "ModelDataUrl", value=self.artifact.s3_url, description="model.tar.gz both endpoints load")
        CfnOutput(self, "DecisionImageUri", value=self.image.image_uri, description="decision image, built FROM "
                                                                                   + self.image.base_image)
