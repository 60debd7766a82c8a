"""The decision endpoint's memory at synth (issue 28): the model, every worker's KV cache (from the GGUF header),
a hand-set prefix cache and the adapter's reserve, against what the decision model runs on, on both models."""

from __future__ import annotations

from pathlib import Path

import pytest
from cdk_support import load, synth
from support.models import MATRIX, MatrixModel

from semif_adapter.engine.prefix_cache import MIN_RESERVE_BYTES
from stacks.config import ConfigError
from stacks.config.decision_memory import decision_capacities, decision_memory
from stacks.config.instances import GIB
from stacks.config.model_fit import check_model_fit

CACHE = "decision.env.SEMIF_CACHE_BYTES"
DEV_MEMORY = 8 * GIB  # ml.m5.large
DEV_CONTEXT = 4096  # cdk.json: dev's SM_LLAMA_CPP_CTX_SIZE


def fit(env_name: str, changes: dict, model: MatrixModel) -> dict[str, str]:
    settings = load(env_name, changes).settings
    return dict(check_model_fit(settings, model_bytes=model.path.stat().st_size, context_length=model.context_length,
                                kv_bytes_per_token=model.kv_bytes_per_token))


def cache_of(size: int) -> dict:
    return {"decision": {"env": {"SEMIF_CACHE_BYTES": str(size)}}}


@pytest.mark.parametrize("model", MATRIX)
def test_a_prefix_cache_larger_than_the_instance_fails_the_synth_naming_the_key(model: MatrixModel,
                                                                                tmp_path: Path) -> None:
    """64 GiB of cache on an 8 GiB ml.m5.large used to synthesize."""
    with pytest.raises(ConfigError) as caught:
        synth("dev", tmp_path, {"model": {"source": "gguf", "path": str(model.path)}, **cache_of(64 * GIB)})
    found = dict(caught.value.problems)
    assert list(found) == [f"environments.dev.{CACHE}"]
    kv = 2 * DEV_CONTEXT * model.kv_bytes_per_token  # two workers on the two vCPUs
    spare = DEV_MEMORY - model.path.stat().st_size - kv - MIN_RESERVE_BYTES
    message = found[f"environments.dev.{CACHE}"]
    assert message.startswith(f"{64 * GIB} bytes (64.0 GiB) of prefix cache do not fit ml.m5.large, which has "
                              "8.0 GiB of memory, with the model (")
    assert f"2 worker KV cache(s) of {DEV_CONTEXT} tokens ({kv / 2**20:,.0f} MiB)" in message
    assert f"the adapter's reserve (512 MiB): at most {spare} bytes" in message
    assert fit("dev", cache_of(spare), model) == {}  # the largest cache that fits is accepted, one byte more is not
    assert list(fit("dev", cache_of(spare + 1), model)) == [CACHE]


@pytest.mark.parametrize("model", MATRIX)
def test_every_workers_kv_cache_counts_against_the_memory(model: MatrixModel) -> None:
    """16 workers at the model's trained context do not fit a 2 GiB serverless endpoint; one at 4096 does."""
    many = {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": str(model.context_length)},
            "decision": {"env": {"SEMIF_WORKERS": "16"}}}
    found = fit("serverless", many, model)
    kv = 16 * model.context_length * model.kv_bytes_per_token
    assert list(found) == ["decision.serverless.memory_mb"]
    assert found["decision.serverless.memory_mb"].startswith(
        "the serverless endpoint has 2.0 GiB of memory; the decision endpoint needs ")
    assert f"16 worker KV cache(s) of {model.context_length} tokens ({kv / GIB:,.1f} GiB)" in \
        found["decision.serverless.memory_mb"]
    assert found["decision.serverless.memory_mb"].endswith(
        "pick a larger size, or lower SM_LLAMA_CPP_CTX_SIZE or SEMIF_WORKERS")
    assert fit("serverless", {"decision": {"env": {"SEMIF_WORKERS": "1"}}}, model) == {}


def test_with_every_layer_on_the_gpu_the_kv_cache_counts_there_and_the_prefix_cache_in_host_memory() -> None:
    """ml.g5.xlarge: 16 GiB of host memory, one 24 GiB A10G."""
    prod = load("prod", cache_of(15 * GIB)).settings
    kv_per_token = 2**20  # 8 GiB at prod's 8192 tokens, one worker (layers on the GPU)
    assert check_model_fit(prod, model_bytes=15 * GIB, context_length=8192, kv_bytes_per_token=kv_per_token) == []
    found = dict(check_model_fit(prod, model_bytes=17 * GIB, context_length=8192, kv_bytes_per_token=kv_per_token))
    assert found == {"decision.instance_type":
                     "ml.g5.xlarge has 1 x 24 GiB of GPU memory; the decision endpoint needs 25.0 GiB there: the model "
                     "(17.0 GiB) and 1 worker KV cache(s) of 8192 tokens (8.0 GiB); pick a larger instance type, or "
                     "lower SM_LLAMA_CPP_CTX_SIZE or SEMIF_WORKERS"}
    too_much = load("prod", cache_of(16 * GIB)).settings  # host memory holds the cache and the reserve
    assert list(dict(check_model_fit(too_much, model_bytes=GIB, context_length=8192))) == [CACHE]


@pytest.mark.parametrize(("env_name", "changes", "workers"), [
    ("dev", {}, 2),  # two vCPUs: the adapter's default of 2
    ("dev", {"llama_env": {"SM_LLAMA_CPP_THREADS": "1"}}, 1),  # at most the batch threads
    ("dev", {"decision": {"env": {"SEMIF_WORKERS": "5"}}}, 5),
    ("shared", {}, 1),  # a copy reserves one core, which the stack gives it as its threads
    ("serverless", {}, 2),  # vCPUs not known: the default
    ("prod", {}, 1),  # layers on the GPU
])
def test_the_worker_count_is_the_adapters_default_for_where_it_runs(env_name: str, changes: dict,
                                                                    workers: int) -> None:
    settings = load(env_name, changes).settings
    (capacity,) = decision_capacities(settings)
    memory = decision_memory(settings, capacity, model_bytes=GIB, context_length=8192, kv_bytes_per_token=1000)
    assert memory.workers == workers
    assert memory.kv == workers * memory.n_ctx * 1000  # type: ignore[operator]


def test_an_unset_context_is_the_models_capped_at_8192_and_an_unknown_kv_size_counts_nothing() -> None:
    settings = load("dev", {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": None}}).settings
    (host,) = decision_capacities(settings)
    assert decision_memory(settings, host, model_bytes=GIB, context_length=32768, kv_bytes_per_token=10).n_ctx == 8192
    assert decision_memory(settings, host, model_bytes=GIB, context_length=2048, kv_bytes_per_token=10).n_ctx == 2048
    assert decision_memory(settings, host, model_bytes=GIB, context_length=2048, kv_bytes_per_token=None).kv == 0
