"""The stack's two customer managed keys, with key policies that name every action they allow (no `kms:*`).

Two keys, because the image build runs third-party code (dnf, pip, CMake) in a privileged CodeBuild project:
- the **build key** encrypts what the build must read and write: the ECR repository and the CodeBuild project;
- the **data key** encrypts what holds prompts and answers: captured request data, every log group, and the
  endpoint volumes. The build role has no grant on it, and its key policy denies that role every use of it,
  so the build cannot read captured data or logs even if someone later widens the role's own policy.

CDK's default key policy gives the account `kms:*`. Here the account (that is, IAM policies in it, the way
CDK's grants to this stack's roles work) gets the key administration actions and the cryptographic actions
by name instead. AWS documents the account statement as what keeps a key manageable; PutKeyPolicy is in it,
so the key can never be locked out.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

# Administration of the key itself (no key material use); "*" as a key policy's resource means this key.
ADMIN_ACTIONS = [
    "kms:CancelKeyDeletion", "kms:CreateAlias", "kms:DeleteAlias", "kms:DescribeKey", "kms:DisableKey",
    "kms:DisableKeyRotation", "kms:EnableKey", "kms:EnableKeyRotation", "kms:GetKeyPolicy",
    "kms:GetKeyRotationStatus", "kms:ListGrants", "kms:ListKeyPolicies", "kms:ListKeyRotations",
    "kms:ListResourceTags", "kms:PutKeyPolicy", "kms:RevokeGrant", "kms:RotateKeyOnDemand",
    "kms:ScheduleKeyDeletion", "kms:TagResource", "kms:UntagResource", "kms:UpdateAlias", "kms:UpdateKeyDescription",
]
# Use of a symmetric key: what CDK's grants (Encrypt, Decrypt, ReEncrypt*, GenerateDataKey*) and the services
# that encrypt with it on a caller's behalf (ECR, CodeBuild, SageMaker volumes: grants) need.
CRYPTO_ACTIONS = [
    "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:CreateGrant", "kms:RetireGrant",
]


def account_key(scope: Construct, construct_id: str, *, description: str) -> kms.Key:
    """A rotating key whose policy lets this account administer it and use it through IAM, each action named."""
    account = iam.AccountRootPrincipal()
    policy = iam.PolicyDocument(statements=[
        iam.PolicyStatement(sid="AccountAdministersTheKey", principals=[account], actions=ADMIN_ACTIONS,
                            resources=["*"]),
        iam.PolicyStatement(sid="AccountUsesTheKeyThroughIam", principals=[account], actions=CRYPTO_ACTIONS,
                            resources=["*"]),
    ])
    return kms.Key(scope, construct_id, enable_key_rotation=True, description=description, policy=policy)


def deny_key_use(key: kms.Key, role: iam.IRole, sid: str) -> None:
    """Refuse `role` every use of `key` in the key policy itself: no identity policy can then allow it."""
    key.add_to_resource_policy(iam.PolicyStatement(
        sid=sid, effect=iam.Effect.DENY, principals=[iam.ArnPrincipal(role.role_arn)], actions=CRYPTO_ACTIONS,
        resources=["*"]))
