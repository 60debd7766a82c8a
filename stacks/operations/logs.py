"""Every log group of the stack: the configured retention, encrypted with the stack's data key, deleted with it.

Endpoint, build and handler logs can hold model output and error details, so they get the data key, the one
that also encrypts captured requests (stacks/security/keys.py) and that the image build cannot use. CloudWatch Logs uses
the key itself, as the service principal of the region (writers and readers need no KMS permission of their
own); the key policy lets that principal use the key for this account's log groups in this region only (the
statement AWS documents for encrypted log groups, with its wildcard actions spelled out).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

# AWS's statement grants kms:Encrypt*, Decrypt*, ReEncrypt*, GenerateDataKey*, Describe*: the same actions, named.
LOGS_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext", "kms:GenerateDataKeyPair",
                    "kms:GenerateDataKeyPairWithoutPlaintext", "kms:DescribeKey"]


@dataclass(frozen=True)
class LogSettings:
    """Passed to every construct that makes a log group, so none can be made without retention or the key."""

    retention: logs.RetentionDays
    key: kms.IKey

    def log_group(self, scope: Construct, construct_id: str, *, name: str | None = None) -> logs.LogGroup:
        return logs.LogGroup(scope, construct_id, log_group_name=name, retention=self.retention,
                             encryption_key=self.key, removal_policy=RemovalPolicy.DESTROY)


def allow_cloudwatch_logs(key: kms.Key) -> None:
    """Let CloudWatch Logs encrypt this account's log groups in the stack's region with `key`."""
    stack = Stack.of(key)
    log_groups = stack.format_arn(service="logs", resource="log-group", resource_name="*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="CloudWatchLogsOfThisAccount",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}")],
        actions=LOGS_KEY_ACTIONS,
        resources=["*"],  # in a key policy, "*" is this key
        conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
    ))
