"""Whether the model fits what it runs on: the rules that need the model's facts, run once the artifact is known.

The facts (size, trained context, KV cache per token, decision type) are measured for a local model and declared
(`model.model_bytes`, `model.context_length`) for an existing S3 object; an unknown fact skips its rule.
"""

from __future__ import annotations

from semif_adapter.engine.prefix_cache import MIN_RESERVE_BYTES

from .container_keys import CONTEXT_EXTENSION_KEYS, CTX_SIZE_KEY, GPU_LAYERS_KEY
from .decision_engine import check_decision_engine, decision_engine
from .decision_memory import check_decision_memory
from .environment import EnvironmentSettings
from .instances import GIB, MIB, InstanceCapacity, instance_capacity
from .problems import Problems


def check_model_fit(settings: EnvironmentSettings, *, model_bytes: int | None, context_length: int | None,
                    kv_bytes_per_token: int | None = None, decision_type: str | None = None,
                    decision_type_key: str | None = None) -> Problems:
    """The model against each instance type, component and serverless endpoint, and the context against the
    model's trained one. The decision endpoint's memory (the model with every worker's KV cache, a hand-set prefix
    cache and the adapter's reserve; for a decision model on llama.cpp's own decision engine, llama-server's KV
    cache of every slot: decision_memory.py) is checked where the model alone fits. `decision_type` is the
    header's `<arch>.decision.type` (None: none or not known), `decision_type_key` that key (None: the header was
    not read): they choose the engine (decision_engine.py).
    """
    problems: Problems = check_decision_engine(settings, decision_type=decision_type,
                                               decision_type_key=decision_type_key)
    for kind in settings.kinds:
        endpoint = settings.endpoint(kind)
        llama_env = settings.llama_env_for(kind)
        sized = [(f"{kind}.instance_type", endpoint.instance_type)]
        if kind == "decision" and endpoint.batch_transform is not None:
            sized.append(("decision.batch_transform.instance_type", endpoint.batch_transform.instance_type))
        for where, instance_type in sized:
            capacity = instance_capacity(instance_type) if instance_type else None
            if model_bytes is None or capacity is None:
                continue
            limit, what = capacity.model_limit(llama_env.get(GPU_LAYERS_KEY))
            if model_bytes > limit:
                problems.append((where, f"{instance_type} has {what}; the model is {model_bytes / 2**30:.1f} GiB "
                                        f"({model_bytes:,} bytes) and cannot be loaded; pick a larger instance type"))
        ctx = llama_env.get(CTX_SIZE_KEY)
        if (context_length is not None and ctx and ctx.isdigit() and int(ctx) > context_length
                and not CONTEXT_EXTENSION_KEYS & set(llama_env)):
            section = f"{kind}.llama_env" if CTX_SIZE_KEY in endpoint.llama_env else "llama_env"
            problems.append((f"{section}.{CTX_SIZE_KEY}",
                             f"{ctx} tokens is more than the model was trained for ({context_length}, from its "
                             "GGUF header); quality collapses past it unless you set up RoPE scaling "
                             "(SM_LLAMA_CPP_ROPE_SCALING, ..._ROPE_SCALE)"))
    if model_bytes is not None:
        problems += check_hosting_fit(settings, model_bytes)
    named = {key for key, _ in problems}
    memory = check_decision_memory(settings, model_bytes=model_bytes, context_length=context_length,
                                   kv_bytes_per_token=kv_bytes_per_token,
                                   engine=decision_engine(settings, decision_type))
    problems += [(key, message) for key, message in memory if key not in named]
    return sorted(set(problems))


def check_hosting_fit(settings: EnvironmentSettings, model_bytes: int) -> Problems:
    """A component or a serverless endpoint too small for the model (the instance check is check_model_fit's)."""
    problems: Problems = []
    shared = settings.shared_endpoint
    for kind in settings.kinds:
        endpoint = settings.endpoint(kind)
        component = endpoint.component
        if settings.hosting_of(kind) == "shared" and component is not None and shared is not None:
            capacity = instance_capacity(shared.instance_type)
            gpu_gib = capacity.gpu_memory_gib if capacity else 0
            share = InstanceCapacity(vcpus=0, memory_gib=component.memory_mb / 1024, gpus=component.accelerators,
                                     gpu_memory_gib=gpu_gib)
            limit, what = share.model_limit(settings.llama_env_for(kind).get(GPU_LAYERS_KEY))
            if model_bytes > limit:
                problems.append((f"{kind}.component.memory_mb" if not component.accelerators
                                 else f"{kind}.component.accelerators",
                                 f"one copy reserves {what}; the model is {model_bytes / GIB:.1f} GiB "
                                 f"({model_bytes:,} bytes) and cannot be loaded; reserve more"))
        if settings.hosting_of(kind) == "serverless" and endpoint.serverless is not None:
            memory = endpoint.serverless.memory_mb * MIB
            if model_bytes + MIN_RESERVE_BYTES > memory:
                problems.append((f"{kind}.serverless.memory_mb",
                                 f"{endpoint.serverless.memory_mb} MB does not hold the model "
                                 f"({model_bytes / MIB:,.0f} MB) and the adapter's own "
                                 f"{MIN_RESERVE_BYTES // MIB} MB (Python, HTTP server, request bodies); the "
                                 "context's KV cache comes on top; choose a larger memory_mb (at most 6144)"))
    return problems
