"""Assemble the CDK app for the environment chosen with `-c env=NAME` (used by app.py and the tests)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aws_cdk import App

from .artifact.source import ArtifactCache
from .config.deployment import CONTEXT_KEY, ENVIRONMENT_CONTEXT_KEY, environment_key, parse_deployment
from .image.decision_image import CONTAINER_DIR
from .prepare import hosting_notices, model_warnings, prepare
from .security.nag import add_checks
from .semif_stack import SemifStack

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".cache" / "model-artifacts"


def build_app(app: App, *, repo_root: Path = REPO_ROOT, cache_dir: Path = CACHE_DIR,
              container_dir: Path = CONTAINER_DIR) -> SemifStack:
    """Read the environment from cdk.json, prepare it (validate, the artifact, the fit: ConfigError names the key),
    add the stack and cdk-nag."""
    deployment = parse_deployment(app.node.try_get_context(CONTEXT_KEY),
                                  app.node.try_get_context(ENVIRONMENT_CONTEXT_KEY))
    prefix = environment_key(deployment.environment_name)
    artifact = prepare(deployment, prefix=prefix, base_dir=repo_root, cache=ArtifactCache(cache_dir))
    stack = SemifStack(app, deployment, artifact, container_dir=container_dir,
                       account=os.environ.get("CDK_DEFAULT_ACCOUNT"))
    for warning in model_warnings(artifact, deployment.settings, f"{prefix}.model"):
        print(f"warning: {warning}", file=sys.stderr)
    for key, notice in hosting_notices(deployment.settings):
        print(f"notice: {prefix}.{key}: {notice}", file=sys.stderr)
    add_checks(app)
    return stack
