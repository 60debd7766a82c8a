"""Two IAM rules applied to the whole stack once it is built, including to the roles CDK makes for its own
constructs (the CodeBuild project's role, the Provider framework's functions and waiter state machine).

- Every service trust policy names the account (and, where the service sets it, the source resource ARN) that
  may make the service assume the role: `aws:SourceAccount` / `aws:SourceArn` against confused deputies. A
  role trusting a service that is not in `SOURCE_ARNS` (or, with its reason, `UNCONFINED`) fails the synth, so a new
  one cannot slip in unconfined.
- The Provider waiter's state machine role gets CloudWatch Logs' delivery actions on `*` (they have no
  resource-level permissions) but also `logs:CreateLogStream`/`logs:PutLogEvents` on `*`: those two are
  scoped to the state machine's own log group here.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import IConstruct

# Service principal -> the `aws:SourceArn` it sets when it assumes a role, as each service's confused-deputy
# documentation gives it (service, resource type, resource name, ARN format), as a pattern within this stack's
# account and region; None: the service documents `aws:SourceAccount` only (Lambda execution roles).
SOURCE_ARNS: dict[str, tuple[str, str, str | None, ArnFormat] | None] = {
    "sagemaker.amazonaws.com": ("sagemaker", "*", None, ArnFormat.NO_RESOURCE_NAME),
    "codebuild.amazonaws.com": ("codebuild", "project", "*", ArnFormat.SLASH_RESOURCE_NAME),
    "states.amazonaws.com": ("states", "stateMachine", "*", ArnFormat.COLON_RESOURCE_NAME),
    "lambda.amazonaws.com": None,
}
# Services that assume a role with no documented confused-deputy key: left unconditioned, each with the reason (a
# condition the service does not set would stop it).
UNCONFINED = {
    "apigateway.amazonaws.com": "API Gateway's CloudWatch Logs role is one per account and region, assumed for every "
                                "API there; API Gateway documents no aws:SourceAccount or aws:SourceArn for it",
}
STREAM_ACTIONS = frozenset({"logs:CreateLogStream", "logs:PutLogEvents"})
WAITER = "waiter-state-machine"


def _service_principal(document: dict[str, object]) -> str:
    statements = document["Statement"]
    assert isinstance(statements, list)
    if len(statements) != 1:
        raise ValueError(f"expected one trust statement, got {statements}")
    principal = statements[0]["Principal"].get("Service")
    if not isinstance(principal, str):
        raise ValueError(f"expected one service principal, got {statements[0]['Principal']}")
    return principal


def confine_service_trust(scope: IConstruct) -> None:
    """Add `aws:SourceAccount` (and `aws:SourceArn`) to the trust policy of every role under `scope`."""
    stack = Stack.of(scope)
    for node in scope.node.find_all():
        if not isinstance(node, iam.Role):
            continue
        role = node.node.default_child
        assert isinstance(role, iam.CfnRole)
        principal = _service_principal(stack.resolve(role.assume_role_policy_document))
        if principal in UNCONFINED:
            continue
        if principal not in SOURCE_ARNS:
            raise ValueError(f"{node.node.path}: no confused-deputy condition known for {principal}; add it to "
                             "stacks/security/iam_hardening.SOURCE_ARNS")
        condition: dict[str, dict[str, str]] = {"StringEquals": {"aws:SourceAccount": stack.account}}
        if (arn := SOURCE_ARNS[principal]) is not None:
            service, resource, name, arn_format = arn
            condition["ArnLike"] = {"aws:SourceArn": stack.format_arn(
                service=service, resource=resource, resource_name=name, arn_format=arn_format)}
        role.add_property_override("AssumeRolePolicyDocument.Statement.0.Condition", condition)


def scope_waiter_logging(scope: IConstruct) -> None:
    """Scope the log-stream actions of every Provider waiter's role to that waiter's log group."""
    for provider in (node for node in scope.node.find_all() if isinstance(node, cr.Provider)):
        waiter = provider.node.try_find_child(WAITER)
        if waiter is None:
            continue
        machines = [c for c in waiter.node.find_all() if isinstance(c, sfn.CfnStateMachine)]
        policies = [c for c in waiter.node.find_all() if isinstance(c, iam.CfnPolicy)]
        if len(machines) != 1 or len(policies) != 1:
            raise ValueError(f"{waiter.node.path}: expected one state machine and one policy")
        logging = Stack.of(scope).resolve(machines[0].logging_configuration)
        log_group = logging["destinations"][0]["cloudWatchLogsLogGroup"]["logGroupArn"]
        document = Stack.of(scope).resolve(policies[0].policy_document)
        statements = []
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            streams = sorted(STREAM_ACTIONS.intersection(actions))
            if statement.get("Resource") != "*" or not streams:
                statements.append(statement)
                continue
            statements.append({**statement, "Action": [a for a in actions if a not in STREAM_ACTIONS]})
            statements.append({"Action": streams, "Effect": "Allow", "Resource": log_group})
        policies[0].policy_document = {**document, "Statement": statements}
