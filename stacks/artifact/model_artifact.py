"""The model.tar.gz both endpoints load: a CDK file asset, or an existing pinned S3 object.

The asset's hash is the model digest computed (once) by `source.py`, so CDK neither re-reads a
multi-GB tarball on every synth nor re-uploads an unchanged model. The bootstrap assets bucket already
enforces encryption and TLS. Every read of the object is confined to its expected bucket owner
(`s3:ResourceAccount`: the deploying account unless `model.bucket_owner` names another), and for an existing
object a check runs before the models are created: the bucket's owner (`ExpectedBucketOwner`) and, with a
version pin, the current version, because SageMaker itself checks neither.
"""

from __future__ import annotations

from aws_cdk import AssetHashType, CustomResource, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import custom_resources as cr
from constructs import Construct, IDependable

from ..custom_resources.function import HandlerFunction
from ..operations.logs import LogSettings
from ..security.nag import accept_redundant_depends_on, acknowledge_provider
from .source import Artifact, LocalArtifact, RemoteArtifact


class ModelArtifact(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, artifact: Artifact,
                 log_settings: LogSettings) -> None:
        super().__init__(scope, construct_id)
        self.artifact = artifact
        self.ready: list[IDependable] = []  # what a model must wait for before it may load the object
        self.kms_key_arn: str | None = None
        stack = Stack.of(self)
        # The CDK asset lives in the bootstrap bucket of the deploying account; an existing object in its owner's.
        self.bucket_owner = (artifact.bucket_owner if isinstance(artifact, RemoteArtifact) else None) or stack.account
        if isinstance(artifact, LocalArtifact):
            asset = s3_assets.Asset(self, "Tarball", path=str(artifact.tarball), asset_hash=artifact.asset_hash,
                                    asset_hash_type=AssetHashType.CUSTOM)
            self.bucket_name, self.object_key = asset.s3_bucket_name, asset.s3_object_key
            self.s3_url = asset.s3_object_url
        else:
            self.bucket_name, self.object_key = artifact.bucket, artifact.key
            self.s3_url = f"s3://{artifact.bucket}/{artifact.key}"
            self.kms_key_arn = artifact.kms_key_arn
        self.object_arn = stack.format_arn(
            service="s3", region="", account="", resource=self.bucket_name, resource_name=self.object_key)
        if isinstance(artifact, RemoteArtifact):
            self.ready.append(self._pin_check(artifact, log_settings))

    def _read_object(self, sid: str | None = None) -> iam.PolicyStatement:
        """`s3:GetObject` on exactly this object, and only in a bucket of the expected owner."""
        return iam.PolicyStatement(sid=sid, actions=["s3:GetObject"], resources=[self.object_arn],
                                   conditions={"StringEquals": {"s3:ResourceAccount": self.bucket_owner}})

    def read_statements(self) -> list[iam.PolicyStatement]:
        """Read access to exactly this one object (and its key, when it is KMS-encrypted)."""
        statements = [self._read_object("ReadModelArtifact")]
        if self.kms_key_arn:
            statements.append(iam.PolicyStatement(sid="DecryptModelArtifact", actions=["kms:Decrypt"],
                                                  resources=[self.kms_key_arn]))
        return statements

    def _pin_check(self, artifact: RemoteArtifact, log_settings: LogSettings) -> CustomResource:
        handler = HandlerFunction(
            self, "PinCheckHandler", handler="artifact_pin.on_event",
            description="model artifact owner and version-pin check",
            statements=[self._read_object()], log_settings=log_settings)
        provider = cr.Provider(self, "PinCheckProvider", on_event_handler=handler.function,
                               log_group=log_settings.log_group(self, "PinCheckProviderLogs"))
        acknowledge_provider(provider, [handler.function])
        accept_redundant_depends_on(self)
        return CustomResource(
            self, "PinCheck", service_token=provider.service_token, resource_type="Custom::ModelArtifactPin",
            properties={"Bucket": artifact.bucket, "Key": artifact.key, "VersionId": artifact.version_id or "",
                        "ExpectedBucketOwner": self.bucket_owner})
