"""cdk-nag's AwsSolutions and NIST 800-53 rev 5 packs: the shipped environments are clean, both checks really
run, and acks carry reasons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from cdk_support import Synth, acknowledgements, synth

from stacks.security.nag import acknowledge


def report(synth_result: Synth) -> dict[str, Any]:
    return json.loads((Path(synth_result.app.outdir) / "validation-report.json").read_text())


@pytest.mark.parametrize("env_name", ["dev", "prod", "decisions", "graviton", "pooled", "scaletozero"])
def test_shipped_environments_have_no_unacknowledged_finding(env_name: str, request: pytest.FixtureRequest) -> None:
    # The fixture's synth would have raised on any error; warnings would still be listed in the report.
    result: Synth = request.getfixturevalue(env_name)
    # A clean synth's report lists no plugin; each pack's failure test below shows that it runs.
    violations = [v for plugin in report(result)["pluginReports"] for v in plugin["violations"]]
    assert violations == []


def test_the_nist_pack_runs_and_fails_the_synth(tmp_path: Path) -> None:
    _app, stack = synth("dev", tmp_path)
    alarm = cloudwatch.Alarm(stack, "Unwatched", metric=cloudwatch.Metric(namespace="X", metric_name="Y"),
                             threshold=1, evaluation_periods=1)  # no action: NIST CloudWatchAlarmAction
    assert alarm.alarm_arn
    with pytest.raises(Exception, match=r"NIST\.800\.53\.R5-CloudWatchAlarmAction"):
        Template.from_stack(stack)
    failed = json.loads((tmp_path / "validation-report.json").read_text())["pluginReports"]
    nist = {v["ruleName"] for plugin in failed if plugin["pluginName"] == "NIST.800.53.R5"
            for v in plugin["violations"]}
    assert nist == {"NIST.800.53.R5-CloudWatchAlarmAction"}


def test_every_nist_finding_of_the_variant_is_acknowledged_on_its_resource(variant: Synth) -> None:
    rules = {finding for construct in variant.stack.node.find_all() for finding in acknowledgements(construct)
             if finding.startswith("NIST.800.53.R5-")}
    assert {"NIST.800.53.R5-IAMNoInlinePolicy", "NIST.800.53.R5-LambdaDLQ",
            "NIST.800.53.R5-S3BucketReplicationEnabled"} <= rules
    assert "NIST.800.53.R5-CloudWatchAlarmAction" not in rules, "every alarm notifies: nothing to acknowledge"
    assert [v for plugin in report(variant)["pluginReports"] for v in plugin["violations"]] == []


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
