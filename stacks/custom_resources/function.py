"""A Python Lambda for a custom resource handler: its own role, its own log group, nothing else.

Shared by the image-build waiter and the artifact pin check so both get the same least-privilege shape: no
managed policy (only write to its own, retention-bounded log group) plus the statements the caller passes.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from ..operations.logs import LogSettings
from ..security.nag import HANDLER_FUNCTION, acknowledge

HANDLERS_DIR = Path(__file__).resolve().parent / "handlers"
RUNTIME = lambda_.Runtime.PYTHON_3_14  # the newest Python runtime this aws-cdk-lib knows (cdk-nag L1)


class HandlerFunction(Construct):
    """`handler` is `module.function` inside handlers/ (this directory is the function's code asset)."""

    def __init__(self, scope: Construct, construct_id: str, *, handler: str, description: str,
                 statements: list[iam.PolicyStatement], log_settings: LogSettings,
                 timeout_s: int = 60) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description=f"Runs the {description} handler")
        self.log_group = log_settings.log_group(self, "Logs")
        self.function = lambda_.Function(
            self, "Function",
            runtime=RUNTIME,
            handler=handler,
            code=lambda_.Code.from_asset(str(HANDLERS_DIR), exclude=["__pycache__", "*.pyc"]),
            description=description,
            timeout=Duration.seconds(timeout_s),
            memory_size=256,
            role=self.role,
            log_group=self.log_group,
        )
        self.log_group.grant_write(self.role)
        acknowledge(self.function, HANDLER_FUNCTION)
        for statement in statements:
            self.role.add_to_policy(statement)
