"""Helpers of the CDK app tests: synthesize an environment in process, with config changes.

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

import gguf
import numpy as np

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_VALIDATION", "false")

from aws_cdk import App
from aws_cdk.assertions import Template

from stacks.build import REPO_ROOT, build_app
from stacks.semif_stack import SemifStack

CDK_CONTEXT: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]


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

    def one(self, resource_type: str, path_part: str) -> tuple[str, dict[str, Any]]:
        """The single resource of a type whose construct path contains `path_part`."""
        found = [(k, v) for k, v in self.resources(resource_type).items()
                 if path_part in v.get("Metadata", {}).get("aws:cdk:path", "")]
        assert len(found) == 1, f"{resource_type} at *{path_part}*: {[k for k, _ in found]}"
        return found[0]


def write_gguf(path: Path, *, architecture: str = "llama", context: int = 2048) -> Path:
    """A small but genuine GGUF, written by the reference writer (the `gguf` package)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(context)
    writer.add_file_type(3)
    writer.add_name(path.stem)
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
