"""The template scanners (cdk-nag's AwsSolutions and NIST 800-53 rev 5 packs, checkov) and the findings we
accept, each with its reason.

cdk-nag 3 runs as a CDK policy-validation plugin (`Validations.of(app).add_plugins`), not an Aspect, and
every finding is acknowledged on its own (`Rule[Finding]`), so a new wildcard can never slip in under an
existing acknowledgement. checkov runs on the synthesized templates (tests/security) and reads its skips from
the resource's own CloudFormation Metadata (`checkov.skip`), where `acknowledge` writes them with the reason.
Where a checkov check and a NIST rule say the same thing, both are acknowledged with the same reason.
"""

from __future__ import annotations

import re

from aws_cdk import Acknowledgment, App, CfnResource, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks
from constructs import IConstruct

REDUNDANT_ROLE_DEPENDENCY = frozenset({"AWS::Lambda::Function", "AWS::StepFunctions::StateMachine"})
LAMBDA_BASIC = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
CHECKOV_ID = re.compile(r"^CKV2?_[A-Z0-9]+_\d+$")
CHECKOV_METADATA = "checkov"

NIST = "NIST.800.53.R5-"
# Custom-resource functions (ours and the Provider framework's) run a few times per deployment and only call
# AWS APIs; these findings concern long-running, event-driven functions.
_CONCURRENCY = ("runs only while CloudFormation deploys the stack; reserved concurrency would take capacity from the "
                "account's pool for a handful of invocations")
_VPC = ("calls only AWS APIs (CodeBuild, ECR, S3, Lambda, Step Functions) and reaches no private resource; a VPC "
        "would add NAT or interface endpoints, not isolation")
_HANDLER_DLQ = ("invoked synchronously by the Provider framework, which turns its errors into a FAILED response to "
                "CloudFormation; a dead-letter queue only receives failed asynchronous invocations")
_FRAMEWORK_DLQ = ("CDK's Provider framework reports every failure to CloudFormation itself and a lost request fails "
                  "at the custom resource's timeout; a dead-letter queue would hold events nothing replays")
DEPLOYMENT_FUNCTION = {
    "CKV_AWS_115": _CONCURRENCY, f"{NIST}LambdaConcurrency": _CONCURRENCY,
    "CKV_AWS_117": _VPC, f"{NIST}LambdaInsideVPC": _VPC,
}
HANDLER_FUNCTION = {**DEPLOYMENT_FUNCTION, "CKV_AWS_116": _HANDLER_DLQ, f"{NIST}LambdaDLQ": _HANDLER_DLQ}
FRAMEWORK_FUNCTION = {
    **DEPLOYMENT_FUNCTION,
    "CKV_AWS_116": _FRAMEWORK_DLQ, f"{NIST}LambdaDLQ": _FRAMEWORK_DLQ,
    "CKV_AWS_173": "the Provider framework's environment holds only the ARNs of this stack's handler functions, "
                   "no secret; Lambda encrypts it at rest with its AWS managed key",
}
INLINE_POLICY = {
    f"{NIST}IAMNoInlinePolicy":
        "each policy belongs to exactly one role of this stack and is created and deleted with it (CDK writes every "
        "role's statements as an AWS::IAM::Policy); a managed policy could be attached to other principals too",
}
LOG_DELIVERY = ("the CloudWatch Logs delivery actions (logs:CreateLogDelivery, logs:PutResourcePolicy, ...) of the "
                "waiter state machine's execution logging have no resource-level permissions")


def acknowledge_inline_policies(scope: IConstruct) -> None:
    """NIST's IAMNoInlinePolicy, on every role policy under `scope` (ours and CDK's), each with the reason."""
    for node in scope.node.find_all():
        if isinstance(node, iam.CfnPolicy):
            acknowledge(node, INLINE_POLICY)


def add_checks(app: App) -> None:
    """cdk-nag's AwsSolutions and NIST 800-53 rev 5 packs: an unacknowledged finding of either fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), NIST80053R5Checks(app))


def acknowledge(scope: IConstruct, findings: dict[str, str]) -> None:
    """`findings` maps a finding to why it is accepted: a cdk-nag id (`AwsSolutions-IAM5[Resource::*]`),
    acknowledged on `scope` and its children, or a checkov id (`CKV_AWS_116`), skipped on `scope`'s own
    CloudFormation resource only."""
    for finding, reason in findings.items():
        if not reason.strip():
            raise ValueError(f"acknowledgement of {finding} needs a reason")
        if CHECKOV_ID.match(finding):
            _skip_checkov(scope, finding, reason)
        else:
            Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def _skip_checkov(scope: IConstruct, check_id: str, reason: str) -> None:
    resource = scope if isinstance(scope, CfnResource) else scope.node.default_child
    if not isinstance(resource, CfnResource):
        raise ValueError(f"{scope.node.path}: a checkov skip needs a construct with one CloudFormation resource")
    skips = [s for s in (resource.get_metadata(CHECKOV_METADATA) or {}).get("skip", []) if s["id"] != check_id]
    resource.add_metadata(CHECKOV_METADATA, {"skip": [*skips, {"id": check_id, "comment": reason}]})


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical id of a construct's resource, as cdk-nag spells it in finding ids."""
    stack = Stack.of(construct)
    resource = construct.node.default_child or construct
    return str(stack.resolve(stack.get_logical_id(resource)))  # type: ignore[arg-type]


def acknowledge_provider(provider: cr.Provider, handlers: list[lambda_.IFunction]) -> None:
    """The Provider framework's functions, roles and waiter are CDK's; what they need is accepted here."""
    invoke_any_version = "the Provider framework invokes {} by ARN and qualified ARN (any version)"
    findings = {
        f"AwsSolutions-IAM4[{LAMBDA_BASIC}]":
            "the Provider framework's functions use CDK's standard basic-execution role (log writing only)",
    }
    names = ("framework-onEvent", "framework-isComplete", "framework-onTimeout")
    framework = [f for f in (provider.node.try_find_child(name) for name in names) if f is not None]
    for function in [*handlers, *framework]:
        findings[f"AwsSolutions-IAM5[Resource::<{logical_id(function)}.Arn>:*]"] = \
            invoke_any_version.format(function.node.path)
    acknowledge(provider, findings)
    for function in framework:
        acknowledge(function, FRAMEWORK_FUNCTION)
    waiter = provider.node.try_find_child("waiter-state-machine")
    if waiter is not None:
        acknowledge(waiter, {
            "AwsSolutions-IAM5[Resource::*]": LOG_DELIVERY,
            "AwsSolutions-SF2": "the Provider framework's waiter only polls our build check; X-Ray tracing of "
                                "it is not configurable and adds nothing over its execution logs",
        })


def accept_redundant_depends_on(scope: IConstruct) -> None:
    """cfn-lint W3005 on CDK-made Lambda functions and state machines, which depend on their role twice.

    CDK adds an explicit DependsOn on the role (and its policy) besides the GetAtt of the role ARN; the
    redundant half cannot be removed from outside. The suppression is written into the resource's metadata,
    where cfn-lint reads it and a reviewer sees it.
    """
    for child in scope.node.find_all():
        if isinstance(child, CfnResource) and child.cfn_resource_type in REDUNDANT_ROLE_DEPENDENCY:
            child.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
