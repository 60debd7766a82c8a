"""Assemble the CDK app for the environment chosen with `-c env=NAME` (used by app.py and the tests)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aws_cdk import App

from semif_adapter.kernel_paths import KernelReport

from .artifact_source import Artifact, ArtifactCache, LocalArtifact, prepare_artifact
from .chat_template import missing_template_warning
from .config import CONTEXT_KEY, ENV_CONTEXT_KEY, ConfigError, Environment, check_model_fit, load_deployment
from .decision_image import CONTAINER_DIR
from .nag import add_checks
from .semif_stack import SemifStack

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".cache" / "model-artifacts"


def build_app(app: App, *, repo_root: Path = REPO_ROOT, cache_dir: Path = CACHE_DIR,
              container_dir: Path = CONTAINER_DIR) -> SemifStack:
    """Validate the config (ConfigError names the key), prepare the artifact and check the model fits the
    instances and contexts, add the stack and cdk-nag."""
    deployment = load_deployment(app.node.try_get_context(CONTEXT_KEY), app.node.try_get_context(ENV_CONTEXT_KEY))
    prefix = f"environments.{deployment.env_name}"
    artifact = prepare_artifact(deployment.env.model, key=f"{prefix}.model", base_dir=repo_root,
                                cache=ArtifactCache(cache_dir))
    problems = check_model_fit(deployment.env, model_bytes=artifact.model_bytes,
                               context_length=artifact.context_length,
                               kv_bytes_per_token=artifact.kv_bytes_per_token)
    if problems:
        raise ConfigError([(f"{prefix}.{key}", message) for key, message in problems])
    stack = SemifStack(app, deployment, artifact, container_dir=container_dir,
                       account=os.environ.get("CDK_DEFAULT_ACCOUNT"))
    for warning in model_warnings(artifact, deployment.env, f"{prefix}.model"):
        print(f"warning: {warning}", file=sys.stderr)
    add_checks(app)
    return stack


def model_warnings(artifact: Artifact, env: Environment, key: str) -> list[str]:
    """Printed by every `cdk synth` (stderr, not a CDK annotation: the policy report of a clean synth stays empty):
    weight types with no fast kernel on the accelerator, and a model without a chat template when the chat endpoint
    is given none (llama-server then frames chats in ChatML). A conversion's figures are printed when it runs."""
    if not isinstance(artifact, LocalArtifact):
        return []
    warnings = []
    if artifact.weight_types is not None:
        warnings.append(KernelReport(env.accelerator, dict(artifact.weight_types)).warning())
    template = missing_template_warning(artifact.has_chat_template, env.llama_env_for("chat"))
    warnings.append(f"{template} (cdk.json: chat.llama_env)" if template else None)
    return [f"{key}: {warning}" for warning in warnings if warning]
