"""Whether the model fits what it runs on: the rules that need the model's facts, run once the artifact is known.

The facts (size, trained context, KV cache per token, decision type) are measured for a local model and declared
(`model.model_bytes`, `model.context_length`) for an existing S3 object; an unknown fact skips its rule.
"""

from __future__ import annotations

from .container_keys import CONTEXT_EXTENSION_KEYS, CTX_SIZE_KEY, GPU_LAYERS_KEY
from .decision_engine import check_decision_engine, decision_engine
from .decision_memory import check_decision_memory
from .environment import EnvironmentSettings
from .hosting.mode import instance_fit
from .problems import Problems


def check_model_fit(settings: EnvironmentSettings, *, model_bytes: int | None, context_length: int | None,
                    kv_bytes_per_token: int | None = None, decision_type: str | None = None,
                    decision_type_key: str | None = None) -> Problems:
    """The model against what each mode gives it (instances, a component, serverless memory: hosting/), and the
    context against the model's trained one. The decision endpoint's memory (the model with every worker's KV
    cache, a hand-set prefix cache and the adapter's reserve; for a decision model on llama.cpp's own decision
    engine, llama-server's KV cache of every slot: decision_memory.py) is checked where the model alone fits.
    `decision_type` is the header's `<arch>.decision.type` (None: none or not known), `decision_type_key` that key
    (None: the header was not read): they choose the engine (decision_engine.py).
    """
    problems: Problems = check_decision_engine(settings, decision_type=decision_type,
                                               decision_type_key=decision_type_key)
    for kind in settings.kinds:
        endpoint = settings.endpoint(kind)
        llama_env = settings.llama_env_for(kind)
        if model_bytes is not None:
            problems += settings.mode_of(kind).model_fit(settings, kind, model_bytes)
            if kind == "decision" and endpoint.batch_transform is not None:
                problems += instance_fit("decision.batch_transform.instance_type",
                                         endpoint.batch_transform.instance_type, model_bytes,
                                         llama_env.get(GPU_LAYERS_KEY))
        ctx = llama_env.get(CTX_SIZE_KEY)
        if (context_length is not None and ctx and ctx.isdigit() and int(ctx) > context_length
                and not CONTEXT_EXTENSION_KEYS & set(llama_env)):
            section = f"{kind}.llama_env" if CTX_SIZE_KEY in endpoint.llama_env else "llama_env"
            problems.append((f"{section}.{CTX_SIZE_KEY}",
                             f"{ctx} tokens is more than the model was trained for ({context_length}, from its "
                             "GGUF header); quality collapses past it unless you set up RoPE scaling "
                             "(SM_LLAMA_CPP_ROPE_SCALING, ..._ROPE_SCALE)"))
    named = {key for key, _ in problems}
    memory = check_decision_memory(settings, model_bytes=model_bytes, context_length=context_length,
                                   kv_bytes_per_token=kv_bytes_per_token,
                                   engine=decision_engine(settings, decision_type))
    problems += [(key, message) for key, message in memory if key not in named]
    return sorted(set(problems))
