"""cdk-nag (AwsSolutions) for the app, and the acknowledgements of findings we accept, each with its reason.

cdk-nag 3 runs as a CDK policy-validation plugin (`Validations.of(app).add_plugins`), not an Aspect, and
every finding is acknowledged on its own (`Rule[Finding]`), so a new wildcard can never slip in under an
existing acknowledgement.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, CfnResource, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import custom_resources as cr
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

REDUNDANT_ROLE_DEPENDENCY = frozenset({"AWS::Lambda::Function", "AWS::StepFunctions::StateMachine"})
LAMBDA_BASIC = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def add_checks(app: App) -> None:
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, findings: dict[str, str]) -> None:
    """`findings` maps a finding id (e.g. `AwsSolutions-IAM5[Resource::*]`) to why it is accepted."""
    for finding, reason in findings.items():
        if not reason.strip():
            raise ValueError(f"acknowledgement of {finding} needs a reason")
        Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


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
    framework = [provider.node.try_find_child(name) for name in ("framework-isComplete", "framework-onTimeout")]
    for function in [*handlers, *(f for f in framework if f is not None)]:
        findings[f"AwsSolutions-IAM5[Resource::<{logical_id(function)}.Arn>:*]"] = \
            invoke_any_version.format(function.node.path)
    acknowledge(provider, findings)
    waiter = provider.node.try_find_child("waiter-state-machine")
    if waiter is not None:
        acknowledge(waiter, {
            "AwsSolutions-IAM5[Resource::*]": "CloudWatch Logs delivery actions of the waiter state machine's "
                                              "execution logging have no resource-level permissions",
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
