"""One way from settings to what the pair is built from: validate -> prepare -> fit, for the app and for the pair.

1. validate: the rules across keys (config/rules.py), before anything is read from disk;
2. prepare: the model artifact, packaged, checked or pinned in S3 (artifact/source.py);
3. fit: the rules that need the model's facts, its size, trained context, KV cache and decision type (who scores
   it: config/decision_engine.py), in config/model_fit.py.

`cdk synth` (cdk_app.py) and `DecisionEndpointPairProps.build` (pair.py, settings made in code) both run this, so a
foreign app's settings are checked exactly as cdk.json's are. Every problem names its key under `prefix`
(`environments.dev` for cdk.json; nothing for settings made in code).
"""

from __future__ import annotations

from pathlib import Path

from semif_adapter.deploy.kernel_paths import KernelReport

from .artifact.source import Artifact, ArtifactCache, LocalArtifact, prepare_artifact
from .config.chat_template import missing_template_warning
from .config.deployment import Deployment
from .config.environment import EnvironmentSettings
from .config.model_fit import check_model_fit
from .config.problems import Problems, raise_problems
from .config.rules import check_environment


def prepare(deployment: Deployment, *, prefix: str, base_dir: Path, cache: ArtifactCache) -> Artifact:
    """The deployment's model artifact, once its settings are valid and the model fits them (else ConfigError naming
    every key under `prefix`); relative model paths resolve against `base_dir`, packaged models stay in `cache`."""
    settings = deployment.settings
    raise_problems(check_environment(settings), prefix)
    artifact = prepare_artifact(settings.model, key=f"{prefix}.model" if prefix else "model", base_dir=base_dir,
                                cache=cache)
    raise_problems(check_model_fit(settings, model_bytes=artifact.model_bytes, context_length=artifact.context_length,
                                   kv_bytes_per_token=artifact.kv_bytes_per_token,
                                   decision_type=artifact.decision_type,
                                   decision_type_key=artifact.decision_type_key), prefix)
    return artifact


def model_warnings(artifact: Artifact, settings: EnvironmentSettings, key: str) -> list[str]:
    """Printed by every `cdk synth` (stderr, not a CDK annotation: the policy report of a clean synth stays empty):
    weight types with no fast kernel on the accelerator, a model without a chat template when the chat endpoint
    is given none (llama-server then frames chats in ChatML), and a decision model with a chat endpoint (it was
    fine-tuned to score options, not to chat). A conversion's figures are printed when it runs."""
    if not isinstance(artifact, LocalArtifact):
        return []
    warnings = []
    if artifact.weight_types is not None:
        warnings.append(KernelReport(settings.accelerator, dict(artifact.weight_types)).warning())
    if settings.chat is not None:
        template = missing_template_warning(artifact.has_chat_template, settings.llama_env_for("chat"))
        warnings.append(f"{template} (cdk.json: chat.llama_env)" if template else None)
        warnings.append(decision_model_chat_warning(artifact))
    return [f"{key}: {warning}" for warning in warnings if warning]


def hosting_notices(settings: EnvironmentSettings) -> Problems:
    """What the chosen hosting modes imply (each mode's `notices`: scale to zero's cold start), with their keys."""
    modes = dict.fromkeys(settings.mode_of(kind) for kind in settings.kinds)
    return [notice for mode in modes for notice in mode.notices(settings)]


def decision_model_chat_warning(artifact: LocalArtifact) -> str | None:
    """A decision model (its header declares a decision type) given a chat endpoint."""
    if artifact.decision_type is None:
        return None
    return (f"the model declares {artifact.decision_type_key} = {artifact.decision_type!r}: a decision model, "
            "fine-tuned to score the options of a question with its own head; it does not chat: the chat endpoint "
            "would answer in free text it was not trained to write; leave the chat endpoint out (cdk.json: "
            '"chat": false, a decision-only environment)')
