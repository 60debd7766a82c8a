"""Whether the decision endpoint fits what it runs on: the model, every worker's KV cache, the prefix cache and the
adapter's reserve, counted at synth.

Besides the model, the adapter holds one llama.cpp context per worker (`SEMIF_WORKERS`; each context's KV cache is
n_ctx cells of the model's `kv_bytes_per_token`, from its GGUF header), the host prefix cache (`SEMIF_CACHE_BYTES`)
and `MIN_RESERVE_BYTES` for Python, the HTTP server and request bodies. A decision model served by llama.cpp's own
decision engine (decision_engine.py) is counted as that engine runs it (`core/native_service.py`): one llama-server
with `--parallel` slots (`SEMIF_WORKERS`, else 1) and one KV cache of `--ctx-size` = n_ctx per slot x slots, the
model, and the adapter's reserve; no prefix cache of ours (llama-server's own prompt cache, `--cache-ram`, grows
with traffic and is not counted). An unset cache is sized by the adapter from
what the rest leaves, so it always fits; a cache set by hand is counted as given, so 64 GiB on an 8 GiB instance
fails the synth naming the key, not the instance under traffic. The model and the KV cache sit where the layers
do (`instances.placement`), the prefix cache and the reserve in host memory. Only what the header and config say
is counted (llama.cpp's compute buffers are not); a fact not known (an S3 model's header) counts as nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from semif_adapter.engine.llama_settings import DEFAULT_MAX_CONTEXT
from semif_adapter.engine.prefix_cache import MIN_RESERVE_BYTES
from semif_adapter.settings import DEFAULT_CPU_WORKERS

from .container_keys import CACHE_KEY, CTX_SIZE_KEY, GPU_LAYERS_KEY, THREAD_KEYS, WORKERS_KEY
from .decision_engine import DecisionEngine
from .environment import EnvironmentSettings
from .hosting.mode import ServingCapacity, whole_instance
from .instances import GIB, MIB, placement
from .problems import Problems


@dataclass(frozen=True)
class DecisionMemory:
    """What the adapter holds, in bytes."""

    model: int | None  # None: not known (an S3 model without model_bytes)
    workers: int  # the adapter's workers, or llama-server's slots (native)
    n_ctx: int | None  # per worker, or per slot
    kv: int  # every worker's KV cache together; 0 when the model's KV size or its context is not known
    cache: int | None  # SEMIF_CACHE_BYTES when set (and read: not by the native engine)
    engine: DecisionEngine = "ours"

    def resident(self) -> list[tuple[str, int]]:
        """What sits where the layers are."""
        model = [("the model", self.model)] if self.model is not None else []
        if not self.kv or self.n_ctx is None:
            return model
        if self.engine == "native":
            return [*model, (f"llama-server's KV cache of {self.workers * self.n_ctx} tokens ({self.workers} "
                             f"slot(s) of {self.n_ctx})", self.kv)]
        return [*model, (f"{self.workers} worker KV cache(s) of {self.n_ctx} tokens", self.kv)]


RESERVE = ("the adapter's reserve", MIN_RESERVE_BYTES)


def decision_capacities(settings: EnvironmentSettings) -> list[ServingCapacity]:
    """What the decision model runs on, in each place it runs: what its mode gives it (an instance, a component
    copy, the serverless memory), and a Batch Transform job's instance. Types the table does not list are skipped."""
    capacities = settings.mode_of("decision").decision_capacities(settings)
    batch = settings.decision.batch_transform
    transform = whole_instance("decision.batch_transform.instance_type", batch.instance_type) if batch else None
    return capacities + ([transform] if transform is not None else [])


def decision_memory(settings: EnvironmentSettings, capacity: ServingCapacity, *, model_bytes: int | None,
                    context_length: int | None, kv_bytes_per_token: int | None,
                    engine: DecisionEngine = "ours") -> DecisionMemory:
    """The adapter's own defaults, from the container environment it will read (settings.py, llama_runtime.py;
    native_service.py for llama.cpp's decision engine: SEMIF_WORKERS slots, else 1, of the same context each)."""
    container_env = {**settings.llama_env_for("decision"), **settings.decision.adapter_env}
    on_gpu = placement(capacity.gpus, container_env.get(GPU_LAYERS_KEY)) != "host"
    if engine == "native":
        workers = _int(container_env.get(WORKERS_KEY)) or 1
    else:
        workers = _workers(container_env, capacity.vcpus, on_gpu)
    ctx = (_int(container_env.get(CTX_SIZE_KEY))
           or (min(context_length, DEFAULT_MAX_CONTEXT) if context_length else None))
    kv = workers * ctx * kv_bytes_per_token if ctx and kv_bytes_per_token else 0
    cache = _int(container_env.get(CACHE_KEY)) if engine == "ours" else None
    return DecisionMemory(model=model_bytes, workers=workers, n_ctx=ctx, kv=kv, cache=cache, engine=engine)


def _workers(container_env: Mapping[str, str], vcpus: int | None, on_gpu: bool) -> int:
    """SEMIF_WORKERS, else 1 with layers on a GPU, else 2 at most the batch threads (the instance's vCPUs unless
    set: the adapter reads its cgroup's quota)."""
    explicit = _int(container_env.get(WORKERS_KEY))
    if explicit:
        return explicit
    if on_gpu:
        return 1
    threads = _int(container_env.get(THREAD_KEYS[0])) or _int(container_env.get(THREAD_KEYS[1])) or vcpus
    return min(DEFAULT_CPU_WORKERS, threads) if threads else DEFAULT_CPU_WORKERS


def check_decision_memory(settings: EnvironmentSettings, *, model_bytes: int | None, context_length: int | None,
                          kv_bytes_per_token: int | None, engine: DecisionEngine = "ours") -> Problems:
    """The model with its KV caches and reserve, then a hand-set cache on top, against each capacity."""
    problems: Problems = []
    for capacity in decision_capacities(settings):
        memory = decision_memory(settings, capacity, model_bytes=model_bytes, context_length=context_length,
                                 kv_bytes_per_token=kv_bytes_per_token, engine=engine)
        problems += _capacity_problems(settings, capacity, memory)
    return problems


def _capacity_problems(settings: EnvironmentSettings, serving: ServingCapacity, memory: DecisionMemory) -> Problems:
    where = placement(serving.gpus, settings.llama_env_for("decision").get(GPU_LAYERS_KEY))
    if where == "host":
        sides = [("host", serving.key, serving.host_bytes, [*memory.resident(), RESERVE])]
    elif where == "gpu":
        sides = [("gpu", serving.gpu_key, serving.gpu_bytes, memory.resident()),
                 ("host", serving.key, serving.host_bytes, [RESERVE])]
    else:  # llama.cpp splits the layers over both: only the total can be checked
        sides = [("both", serving.key, serving.host_bytes + serving.gpu_bytes, [*memory.resident(), RESERVE])]
    larger = "instance type" if "instance_type" in serving.key else "size"
    advice = f"pick a larger {larger}" + (f", or lower {CTX_SIZE_KEY} or {WORKERS_KEY}" if memory.kv else "")
    for side, key, capacity, parts in sides:
        need = sum(size for _, size in parts)
        if need > capacity:
            return [(key, f"{serving.name} has {serving.describe(side)}; the decision endpoint needs {_size(need)} "
                          f"there: {_listing(parts)}; {advice}")]
    side, _, capacity, parts = sides[-1]  # the prefix cache is host memory
    spare = capacity - sum(size for _, size in parts)
    if memory.cache is not None and memory.cache > spare:
        return [(f"decision.env.{CACHE_KEY}",
                 f"{memory.cache} bytes ({_size(memory.cache)}) of prefix cache do not fit {serving.name}, which has "
                 f"{serving.describe(side)}, with {_listing(parts)}: at most {spare} bytes ({_size(spare)}) fit; lower "
                 "it, or leave it unset (the adapter then takes half of what the rest leaves, at most 16 GiB)")]
    return []


def _listing(parts: list[tuple[str, int]]) -> str:
    named = [f"{name} ({_size(size)})" for name, size in parts]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def _int(value: str | None) -> int | None:
    return int(value) if value and value.strip().isdigit() else None


def _size(count: int) -> str:
    return f"{count / GIB:,.1f} GiB" if count >= GIB else f"{count / MIB:,.0f} MiB"
