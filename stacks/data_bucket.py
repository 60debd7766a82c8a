"""The bucket that receives endpoint data capture, only created when an endpoint turns capture on.

Captured requests and responses are user data: encrypted with the stack's data key, TLS-only, never public,
and with server access logs in a second bucket (which, being the log sink, cannot log to itself).
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .nag import NIST, acknowledge

# Captured requests are a sample kept for a limited time to look at, not a record that must outlive a region.
NOT_REPLICATED = ("captured data is a sample of requests kept {days} days for analysis, not a record that must "
                  "survive a regional outage; a replica would copy user data to a second place and outlive the expiry")


class CaptureBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, expire_days: int = 90) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = s3.Bucket(
            self, "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # S3 log delivery cannot write with a KMS key
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expire_days))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        log_sink = "this is the server access log destination of the capture bucket; logging it to itself would loop"
        log_versions = (f"S3 log delivery writes each log object once and they expire after {expire_days} days; "
                        "versioning would only keep deleted logs")
        acknowledge(self.access_logs, {
            "AwsSolutions-S1": log_sink,
            "CKV_AWS_18": log_sink,
            "CKV_AWS_21": log_versions,
            f"{NIST}S3BucketVersioningEnabled": log_versions,
            f"{NIST}S3BucketReplicationEnabled": NOT_REPLICATED.format(days=expire_days),
            f"{NIST}S3DefaultEncryptionKMS": "S3 server access log delivery only writes to buckets encrypted with "
                                             "S3-managed keys (SSE-S3); the logs hold request metadata, no bodies",
        })
        self.bucket = s3.Bucket(
            self, "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="capture/",
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expire_days))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        versions = (f"SageMaker writes each capture file once under a unique name and they expire after "
                    f"{expire_days} days; versioning would keep deleted user data past that expiry")
        acknowledge(self.bucket, {
            "CKV_AWS_21": versions,
            f"{NIST}S3BucketVersioningEnabled": versions,
            f"{NIST}S3BucketReplicationEnabled": NOT_REPLICATED.format(days=expire_days),
        })
