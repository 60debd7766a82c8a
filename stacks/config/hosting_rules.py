"""Hosting modes across keys: which modes may be combined, each mode's keys and rules (its module in hosting/),
and Batch Transform beside them.

Each refusal names the key and gives SageMaker's reason (or ours, where it is a choice of this app), so that a
mode SageMaker cannot run fails `cdk synth`, not a deployment ten minutes in. Called by rules.py; whether the
model fits what a mode gives it is model_fit.py's, which asks the mode.
"""

from __future__ import annotations

from .container_keys import MAX_BODY_KEY
from .environment import EnvironmentSettings
from .hosting import MODES, mode_for
from .instances import MIB, instance_problem
from .kinds import EndpointKind
from .problems import Problems

# Batch Transform sends up to MaxPayloadInMB per request; the adapter's GET /execution-parameters asks for 1
# (container/semif_adapter/doors/http_app.py EXECUTION_PARAMETERS; a test keeps the two equal).
TRANSFORM_MAX_PAYLOAD_BYTES = 1 * MIB


def check_hosting(settings: EnvironmentSettings) -> Problems:
    """The rules of the chosen modes that need no facts about the model."""
    problems: Problems = []
    environment_mode = mode_for(settings.hosting)
    if environment_mode.chat_refusal and settings.chat is not None:
        problems.append(("hosting", f"{settings.hosting} hosts the decision endpoint only; set decision.hosting: "
                                    f"{settings.hosting} (and the chat endpoint stays dedicated or shared)"))
        return problems
    if settings.chat is not None and settings.chat.alarms.warning_rate is not None:
        problems.append(("chat.alarms.warning_rate", "the chat endpoint (the stock DLC) writes no decision metrics; "
                                                     "the warning-rate alarm watches the decision endpoint only"))
    modes = {kind: settings.mode_of(kind) for kind in settings.kinds}
    chat = modes.get("chat")
    if chat is not None and chat.chat_refusal:
        problems.append(("chat.hosting", chat.chat_refusal))
    sharing = [kind for kind, mode in modes.items() if mode.shares_endpoint]
    if sharing and len({mode.name for mode in modes.values()}) > 1:
        problems.append((f"{sharing[0]}.hosting", f"{modes[sharing[0]].name} hosting puts both models on one "
                                                  f"endpoint; set it for both (the environment's hosting: "
                                                  f"{modes[sharing[0]].name}) or for neither"))
        return problems
    for kind in modes:
        problems += _check_mode_keys(settings, kind)
    if not settings.shared and settings.shared_endpoint is not None:
        problems.append(("shared_endpoint", "only shared hosting has a shared endpoint; set hosting: shared or "
                                            "remove it"))
    for mode in dict.fromkeys(mode for kind, mode in modes.items() if kind == "decision" or not mode.chat_refusal):
        problems += mode.check(settings)
    problems += _check_batch_transform(settings)
    return problems


def _check_mode_keys(settings: EnvironmentSettings, kind: EndpointKind) -> Problems:
    """Keys that one mode needs and the others must not have: its own and its block, and every other mode's
    block refused."""
    endpoint = settings.endpoint(kind)
    mode = settings.mode_of(kind)
    problems = mode.check_keys(settings, kind)
    for other in MODES.values():
        block = other.block
        if block is None:
            continue
        given = getattr(endpoint, block.key) is not None
        if other is mode and not given:
            problems.append((f"{kind}.{block.key}", block.required))
        if other is not mode and given:
            problems.append((f"{kind}.{block.key}", block.only.format(kind=kind)))
    if kind == "chat" and endpoint.batch_transform is not None:
        problems.append(("chat.batch_transform", "Batch Transform runs the decision model; the chat model answers "
                                                 "one conversation per request"))
    return problems


def _check_batch_transform(settings: EnvironmentSettings) -> Problems:
    batch = settings.decision.batch_transform
    if batch is None:
        return []
    problems: Problems = []
    problem = instance_problem(batch.instance_type, settings.accelerator, transform=True)
    if problem:
        problems.append(("decision.batch_transform.instance_type", problem))
    refusal = settings.mode_of("decision").batch_refusal
    if refusal:
        problems.append(("decision.batch_transform", refusal))
    if settings.accelerator == "gpu":
        problems.append(("decision.batch_transform.instance_type",
                         "Batch Transform instances offer NVIDIA drivers up to 535 (TransformAmiVersion "
                         "al2-ami-sagemaker-batch-gpu-535), and the DLC's CUDA 13 image needs 580: a GPU transform "
                         "job cannot start it; run Batch Transform from a cpu environment"))
    body = settings.decision.adapter_env.get(MAX_BODY_KEY)
    if body is not None and body.isdigit() and int(body) < TRANSFORM_MAX_PAYLOAD_BYTES:
        problems.append((f"decision.env.{MAX_BODY_KEY}",
                         f"{body} bytes is below the {TRANSFORM_MAX_PAYLOAD_BYTES} bytes (MaxPayloadInMB 1, from the "
                         "adapter's GET /execution-parameters) Batch Transform packs into one request; every full "
                         "mini-batch would be refused with 413"))
    return problems
