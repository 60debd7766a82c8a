"""A bucket for user data of this stack (captured requests, Batch Transform input and output), made one way.

Such data is user data: encrypted with the stack's data key, TLS-only, never public, with server access logs in a
second bucket (which, being the log sink, cannot log to itself), and deleted after `expire_days`. The data
capture bucket and the batch locations are two instances of it; each says what it holds, which the
acknowledgements of versioning and replication quote.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ..security.nag import NIST, acknowledge


@dataclass(frozen=True)
class Holding:
    """What a data bucket holds, in the words its acknowledgements use."""

    contents: str  # e.g. "captured data is a sample of requests kept {days} days for analysis"
    writer: str  # e.g. "SageMaker writes each capture file once under a unique name"
    log_prefix: str  # server access log prefix in the log bucket


CAPTURE = Holding(contents="captured data is a sample of requests kept {days} days for analysis",
                  writer="SageMaker writes each capture file once under a unique name", log_prefix="capture/")
BATCH = Holding(contents="batch input and output are working files of transform jobs kept {days} days",
                writer="each transform job reads its input files and writes each output file once",
                log_prefix="batch/")


class DataBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, holding: Holding,
                 expire_days: int = 90) -> None:
        super().__init__(scope, construct_id)
        not_replicated = (f"{holding.contents.format(days=expire_days)}, not a record that must survive a regional "
                          "outage; a replica would copy user data to a second place and outlive the expiry")
        self.access_logs = s3.Bucket(
            self, "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # S3 log delivery cannot write with a KMS key
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expire_days))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        log_sink = f"this is the server access log destination of the {construct_id} bucket; logging it to itself " \
                   "would loop"
        log_versions = (f"S3 log delivery writes each log object once and they expire after {expire_days} days; "
                        "versioning would only keep deleted logs")
        acknowledge(self.access_logs, {
            "AwsSolutions-S1": log_sink,
            "CKV_AWS_18": log_sink,
            "CKV_AWS_21": log_versions,
            f"{NIST}S3BucketVersioningEnabled": log_versions,
            f"{NIST}S3BucketReplicationEnabled": not_replicated,
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
            server_access_logs_prefix=holding.log_prefix,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expire_days))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        versions = (f"{holding.writer} and they expire after {expire_days} days; versioning would keep deleted user "
                    "data past that expiry")
        acknowledge(self.bucket, {
            "CKV_AWS_21": versions,
            f"{NIST}S3BucketVersioningEnabled": versions,
            f"{NIST}S3BucketReplicationEnabled": not_replicated,
        })
