"""Helpers of the CDK app tests (tests/cdk, tests/security): synthesize an environment in process, with config
changes; each shipped environment and the optional-features variant once per test process.

The built-in CloudFormation validation of aws-cdk-lib costs about 6 s per process; it stays on in the CLI
test (test_cdk_cli.py), and is off here through the App property (the environment variable alone would only
work if it were set before the jsii kernel started).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_VALIDATION", "false")

from aws_cdk import App
from aws_cdk.assertions import Template
from constructs import IConstruct

from stacks.cdk_app import REPO_ROOT, build_app
from stacks.config import ConfigError
from stacks.config.deployment import CONTEXT_KEY, Deployment, load_deployment
from stacks.semif_stack import SemifStack

ACK_METADATA = "aws:cdk:acknowledged-rules"  # where Validations.acknowledge records a finding and its reason
ACK_PREFIX = "Annotation::"  # ... under the finding id with this prefix
CDK_CONTEXT: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]

# Every optional feature at once, on dev: pinned S3 model (KMS, version and digest), VPC with service endpoints,
# data capture, Batch Transform locations, alarm notifications (emails and an existing topic).
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/0b1c2d3e-0000-4000-8000-0123456789ab"
MODEL_SHA256 = "0f" * 32
SUBNETS = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
GROUPS = ["sg-0123456789abcdef0"]
PAGING_TOPIC = "arn:aws:sns:us-east-1:123456789012:paging"
OPTIONAL_FEATURES: dict[str, Any] = {
    "model": {"source": "s3", "uri": "s3://models-bucket/llm/model.tar.gz", "version_id": "v2", "sha256": MODEL_SHA256,
              "model_file": "llm/q4.gguf", "model_bytes": 4_000_000_000, "kms_key_arn": KEY_ARN},
    "vpc": {"subnet_ids": SUBNETS, "security_group_ids": GROUPS,
            "vpc_endpoints": {"vpc_id": "vpc-0123456789abcdef0", "route_table_ids": ["rtb-0123456789abcdef0"]}},
    "chat": {"data_capture": {"sampling_percentage": 20, "capture_output": False}},
    "decision": {"startup_health_check_timeout_s": 1800, "batch_transform": {"instance_type": "ml.m5.xlarge"}},
    "notifications": {"emails": ["ops@example.com", "oncall@example.com"], "topic_arn": PAGING_TOPIC},
}
# `shared` with every scaling knob: managed instance scaling, copy autoscaling, rolling updates with rollback.
SCALED_SHARING: dict[str, Any] = {
    "shared_endpoint": {"instance_count": 2, "managed_scaling": {"min_instances": 1, "max_instances": 3}},
    "chat": {"component": {"copy_count": 2, "memory_mb": 2048, "max_memory_mb": 3072,
                           "autoscaling": {"min_copies": 2, "max_copies": 4, "target_invocations_per_copy": 20}},
             "alarms": {"auto_rollback": True}},
    "decision": {"component": {"memory_mb": 2048, "autoscaling": {"min_copies": 1, "max_copies": 2,
                                                                  "target_invocations_per_copy": 200}}},
}

# The System One API in the two hosting modes the shipped `api` environment (dedicated) does not show: on the shared
# endpoint's inference component (with quota, WAF with managed rules only); serverless with a custom domain, its alias
# record, no account logging role, WAF off, a longer timeout and a smaller body limit.
CERTIFICATE_ARN = "arn:aws:acm:us-east-1:123456789012:certificate/0b1c2d3e-0000-4000-8000-0123456789ab"
API_SHARED: dict[str, Any] = {"https_api": {
    "throttle": {"rate_per_s": 2.5, "burst": 5}, "quota": {"requests": 5000, "period": "DAY"},
    "authorizer_cache_s": 0, "waf": {"enabled": True}}}
API_SERVERLESS: dict[str, Any] = {"https_api": {
    "integration_timeout_s": 60, "max_body_bytes": 1_048_576, "account_logging_role": False,
    "alarms": {"latency_p90_ms": 45000, "client_error_rate": 0.5, "min_requests": 50},
    "domain": {"name": "decisions.example.com", "certificate_arn": CERTIFICATE_ARN,
               "hosted_zone_id": "Z0123456789ABCDEFGHIJ", "hosted_zone_name": "example.com"}}}


def merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `changes` into a copy of `base`; a value of None deletes the key."""
    result = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def environment(env_name: str, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The shipped cdk.json settings of one environment, with changes applied."""
    return merge(CDK_CONTEXT["semif"]["environments"][env_name], changes or {})


def context_for(env_name: str, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    context = copy.deepcopy(CDK_CONTEXT)
    context["semif"]["environments"][env_name] = environment(env_name, changes)
    context["env"] = env_name
    context["aws:cdk:enable-path-metadata"] = True  # the CLI sets it; tests find resources by path
    context["aws:cdk:disable-asset-staging"] = True  # no 94 MB copy of the model into every test outdir
    return context


def load(env_name: str, changes: dict[str, Any] | None = None) -> Deployment:
    """Validate one environment of cdk.json with changes, as `cdk synth -c env=NAME` would."""
    return load_deployment(context_for(env_name, changes)[CONTEXT_KEY], env_name)


def problems(env_name: str, changes: dict[str, Any]) -> dict[str, str]:
    """The problems (key -> message) the configuration change is refused with."""
    with pytest.raises(ConfigError) as caught:
        load(env_name, changes)
    return dict(caught.value.problems)


def synth(env_name: str, outdir: Path, changes: dict[str, Any] | None = None, *,
          validation: bool = False, **kwargs: Any) -> tuple[App, SemifStack]:
    app = App(context=context_for(env_name, changes), outdir=str(outdir), analytics_reporting=False,
              builtin_cloud_formation_validation=validation)
    return app, build_app(app, **kwargs)


class Synth:
    """A synthesized environment: the stack, its template, and the raw template dict."""

    def __init__(self, app: App, stack: SemifStack) -> None:
        self.app, self.stack = app, stack
        self.template = Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == resource_type}

    def construct(self, logical_id: str) -> IConstruct:
        """The construct that made a template resource, found by the resource's `aws:cdk:path`."""
        path = self.json["Resources"][logical_id]["Metadata"]["aws:cdk:path"].split("/")
        assert path[0] == self.stack.node.id, path
        node: IConstruct = self.stack
        for part in path[1:]:
            child = node.node.try_find_child(part)
            assert child is not None, f"{'/'.join(path)}: no construct {part!r} under {node.node.path}"
            node = child
        return node

    def one(self, resource_type: str, path_part: str) -> tuple[str, dict[str, Any]]:
        """The single resource of a type whose construct path contains `path_part`."""
        found = [(k, v) for k, v in self.resources(resource_type).items()
                 if path_part in v.get("Metadata", {}).get("aws:cdk:path", "")]
        assert len(found) == 1, f"{resource_type} at *{path_part}*: {[k for k, _ in found]}"
        return found[0]


SHARED: dict[str, Synth] = {}


def shared_synth(name: str, factory: pytest.TempPathFactory, env_name: str,
                 changes: dict[str, Any] | None = None) -> Synth:
    """One synth per name and test process, whichever test directory asks first (synth costs seconds)."""
    if name not in SHARED:
        SHARED[name] = Synth(*synth(env_name, factory.mktemp(f"cdk-{name}"), changes))
    return SHARED[name]


def as_list(value: Any) -> list[Any]:
    """A policy statement's Action or Resource, which CloudFormation allows as one string or a list."""
    return value if isinstance(value, list) else [value]


def acknowledgements(construct: IConstruct) -> dict[str, str]:
    """cdk-nag findings acknowledged on a construct itself (finding id -> reason)."""
    found: dict[str, str] = {}
    for entry in construct.node.metadata:
        if entry.type == ACK_METADATA:
            found.update({key.removeprefix(ACK_PREFIX): reason for key, reason in dict(entry.data).items()})
    return found


def acknowledgements_in_effect(construct: IConstruct) -> dict[str, str]:
    """Findings acknowledged on a construct or any construct above it (an acknowledgement covers children)."""
    found: dict[str, str] = {}
    for scope in construct.node.scopes:
        found.update(acknowledgements(scope))
    return found


