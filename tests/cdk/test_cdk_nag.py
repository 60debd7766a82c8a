"""cdk-nag AwsSolutions: the shipped environments are clean, the check really runs, and acks carry reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from cdk_support import Synth, acknowledgements, synth

from stacks.nag import acknowledge


def report(synth_result: Synth) -> dict[str, Any]:
    return json.loads((Path(synth_result.app.outdir) / "validation-report.json").read_text())


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_shipped_environments_have_no_unacknowledged_finding(env_name: str, request: pytest.FixtureRequest) -> None:
    # The fixture's synth would have raised on any error; warnings would still be listed in the report.
    result: Synth = request.getfixturevalue(env_name)
    violations = [v for plugin in report(result)["pluginReports"] for v in plugin["violations"]]
    assert violations == []


def test_the_check_runs_and_fails_the_synth(tmp_path: Path) -> None:
    _app, stack = synth("dev", tmp_path)
    s3.Bucket(stack, "Unlogged")  # no access logs, no TLS-only policy
    with pytest.raises(Exception, match="AwsSolutions-S1"):
        Template.from_stack(stack)
    failed = json.loads((tmp_path / "validation-report.json").read_text())["pluginReports"]
    rules = {v["ruleName"] for plugin in failed if plugin["pluginName"] == "AwsSolutions" for v in plugin["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_every_acknowledgement_has_a_reason_and_is_one_finding(dev: Synth, prod: Synth) -> None:
    seen = 0
    for result in (dev, prod):
        for construct in result.stack.node.find_all():
            for finding, reason in acknowledgements(construct).items():
                seen += 1
                assert len(reason.strip()) >= 20, f"{construct.node.path}: {finding} has no real reason"
                assert finding != "AwsSolutions-IAM5", "IAM5 is acknowledged per finding, never wholesale"
                if finding.startswith("AwsSolutions-IAM5"):
                    assert finding.startswith("AwsSolutions-IAM5[") and finding.endswith("]"), finding
    assert seen > 10


def test_an_acknowledgement_without_a_reason_is_refused(dev: Synth) -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        acknowledge(dev.stack, {"AwsSolutions-S1": "  "})
