"""Decision models at synth (issue 42): who scores the model, chosen from the header of the artifact the synth
reads; the decision types and settings it refuses, each naming its key; the memory of llama.cpp's own decision
engine; and decision-only environments (`"chat": false`), synthesized with no chat endpoint at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdk_support import Synth, load, problems, synth
from support.gguf_files import declaring, tarball_of

from scripts.dev.decision_models import decision_model
from semif_adapter.engine.decision_types import DECISION_TYPES, PINNED_LLAMA_CPP
from semif_adapter.engine.gguf_header import GGUFInfo, read_gguf_info
from stacks.artifact.source import ArtifactCache, LocalArtifact, prepare_artifact
from stacks.cdk_app import CACHE_DIR
from stacks.config import ConfigError, GgufModel
from stacks.config.decision_engine import check_decision_engine, decision_engine
from stacks.config.decision_memory import decision_capacities, decision_memory
from stacks.config.instances import GIB
from stacks.config.model_fit import check_model_fit
from stacks.prepare import model_warnings

ENGINE = "decision.env.SEMIF_DECISION_ENGINE"
CACHE = "decision.env.SEMIF_CACHE_BYTES"
TYPE_KEY = "llama.decision.type"  # the embedded model's architecture is llama
SUPPORTED = ", ".join(DECISION_TYPES)




def synth_problems(env_name: str, tmp_path: Path, changes: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        synth(env_name, tmp_path, changes)  # a refused model is never remembered in the artifact cache
    return dict(caught.value.problems)


@pytest.fixture(scope="module")
def openjev() -> tuple[Path, GGUFInfo]:
    """The decision-typed copy of the embedded model (made once, cached) and its header."""
    path = decision_model("openjev")
    with path.open("rb") as stream:
        return path, read_gguf_info(stream)


# ---- refusals, each naming its key ----------------------------------------------------------------------------

@pytest.mark.parametrize("source", ["gguf", "tarball"])
def test_an_unknown_decision_type_fails_the_synth_naming_the_key_and_the_supported_types(tmp_path: Path,
                                                                                        source: str) -> None:
    model = declaring(tmp_path / "frob.gguf", "frob")
    path = model if source == "gguf" else tarball_of(model)
    found = synth_problems("dev", tmp_path, {"model": {"source": source, "path": str(path)}})
    assert list(found) == ["environments.dev.model.path"]
    assert f"{TYPE_KEY} = 'frob' is not a decision type llama.cpp {PINNED_LLAMA_CPP} serves (supported: " \
           f"{SUPPORTED})" in found["environments.dev.model.path"]


def test_a_decision_model_without_its_systemone_template_fails_the_synth(tmp_path: Path) -> None:
    model = declaring(tmp_path / "bare.gguf", "openjev", systemone=False)
    found = synth_problems("dev", tmp_path, {"model": {"source": "gguf", "path": str(model)}})
    assert list(found) == ["environments.dev.model.path"]
    assert f"declares {TYPE_KEY} = 'openjev' but has no tokenizer.chat_template.systemone" in \
        found["environments.dev.model.path"]


def test_native_for_a_model_without_a_decision_type_fails_the_synth_naming_both_keys(tmp_path: Path) -> None:
    found = synth_problems("dev", tmp_path, {"decision": {"env": {"SEMIF_DECISION_ENGINE": "native"}}})
    assert list(found) == [f"environments.dev.{ENGINE}"]
    assert found[f"environments.dev.{ENGINE}"].startswith(
        f"native scores with the model's own decision head, and the model declares no {TYPE_KEY}: it is a generic "
        "chat model")
    assert "set auto (the default" in found[f"environments.dev.{ENGINE}"]


def test_the_engine_setting_is_checked_only_against_a_header_that_was_read() -> None:
    native = load("dev", {"decision": {"env": {"SEMIF_DECISION_ENGINE": "native"}}}).settings
    assert check_decision_engine(native, decision_type="lev", decision_type_key=TYPE_KEY) == []
    assert check_decision_engine(native, decision_type=None, decision_type_key=None) == []  # an S3 model
    for setting in ("auto", "ours"):
        given = load("dev", {"decision": {"env": {"SEMIF_DECISION_ENGINE": setting}}}).settings
        assert check_decision_engine(given, decision_type=None, decision_type_key=TYPE_KEY) == []
    assert list(dict(problems("dev", {"decision": {"env": {"SEMIF_DECISION_ENGINE": "llama"}}}))) == \
        [f"environments.dev.{ENGINE}"]  # the adapter's own parser, as for every SEMIF_* value


@pytest.mark.parametrize(("setting", "declared", "engine"), [
    (None, "openjev", "native"), ("auto", "lev", "native"), (None, None, "ours"), ("ours", "openjev", "ours"),
    ("native", None, "native"),  # an S3 model whose header is not read: the setting decides
])
def test_the_engine_follows_the_header_as_the_adapter_chooses_at_start(setting: str | None, declared: str | None,
                                                                        engine: str) -> None:
    env = {"SEMIF_DECISION_ENGINE": setting} if setting else {}
    assert decision_engine(load("dev", {"decision": {"env": env}}).settings, declared) == engine


# ---- the fit of llama.cpp's decision engine ---------------------------------------------------------------------

def test_the_fit_counts_llama_servers_slots_not_our_workers(openjev: tuple[Path, GGUFInfo]) -> None:
    """dev (ml.m5.large, 2 vCPUs, 4096 tokens): our engine runs 2 workers, llama-server 1 slot unless
    SEMIF_WORKERS says more; each slot a context of the same size in one --ctx-size."""
    _, info = openjev
    assert info.kv_bytes_per_token
    settings = load("dev").settings
    (capacity,) = decision_capacities(settings)
    facts = {"model_bytes": GIB, "context_length": info.context_length, "kv_bytes_per_token": info.kv_bytes_per_token}
    ours = decision_memory(settings, capacity, **facts)
    native = decision_memory(settings, capacity, **facts, engine="native")
    assert (ours.workers, native.workers) == (2, 1)
    assert native.kv == 4096 * info.kv_bytes_per_token
    assert native.resident()[1][0] == "llama-server's KV cache of 4096 tokens (1 slot(s) of 4096)"
    slots = load("dev", {"decision": {"env": {"SEMIF_WORKERS": "3"}}}).settings
    assert decision_memory(slots, capacity, **facts, engine="native").kv == 3 * 4096 * info.kv_bytes_per_token


def test_a_decision_model_too_large_for_its_slots_fails_naming_the_native_numbers(
        openjev: tuple[Path, GGUFInfo]) -> None:
    """16 slots of the trained context (8192) on the 2 GiB serverless endpoint: llama-server's one KV cache of
    131072 tokens does not fit; the same with SEMIF_DECISION_ENGINE=ours names our 16 workers instead."""
    path, info = openjev
    assert info.context_length == 8192 and info.kv_bytes_per_token
    many = {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": "8192"}, "decision": {"env": {"SEMIF_WORKERS": "16"}}}
    facts: dict[str, Any] = {"model_bytes": path.stat().st_size, "context_length": info.context_length,
                             "kv_bytes_per_token": info.kv_bytes_per_token, "decision_type": info.decision_type,
                             "decision_type_key": info.decision_type_key}
    found = dict(check_model_fit(load("serverless", many).settings, **facts))
    kv = 16 * 8192 * info.kv_bytes_per_token
    assert list(found) == ["decision.serverless.memory_mb"]
    assert f"llama-server's KV cache of 131072 tokens (16 slot(s) of 8192) ({kv / GIB:,.1f} GiB)" in \
        found["decision.serverless.memory_mb"]
    ours = load("serverless", {**many, "decision": {"env": {"SEMIF_WORKERS": "16", "SEMIF_DECISION_ENGINE": "ours"}}})
    assert "16 worker KV cache(s) of 8192 tokens" in dict(check_model_fit(ours.settings, **facts))[
        "decision.serverless.memory_mb"]
    assert check_model_fit(load("serverless").settings, **facts) == []  # one slot of 4096 fits


def test_the_native_engine_keeps_no_prefix_cache_of_ours(openjev: tuple[Path, GGUFInfo]) -> None:
    _, info = openjev
    settings = load("dev", {"decision": {"env": {"SEMIF_CACHE_BYTES": str(64 * GIB)}}}).settings
    facts: dict[str, Any] = {"model_bytes": GIB, "context_length": 8192, "kv_bytes_per_token": info.kv_bytes_per_token}
    assert list(dict(check_model_fit(settings, **facts))) == [CACHE]  # a generic model: our engine's cache
    assert check_model_fit(settings, **facts, decision_type="openjev", decision_type_key=TYPE_KEY) == []


# ---- the warning, and decision-only environments ----------------------------------------------------------------

def test_a_decision_model_with_a_chat_endpoint_is_warned_about_and_without_one_is_not(
        openjev: tuple[Path, GGUFInfo], tmp_path: Path) -> None:
    path, _ = openjev
    artifact = prepare_artifact(GgufModel(source="gguf", path=str(path)), key="model", base_dir=tmp_path,
                                cache=ArtifactCache(CACHE_DIR))
    assert isinstance(artifact, LocalArtifact)
    assert (artifact.decision_type, artifact.decision_type_key) == ("openjev", TYPE_KEY)
    chats = [w for w in model_warnings(artifact, load("dev").settings, "model") if "does not chat" in w]
    assert chats == [f"model: the model declares {TYPE_KEY} = 'openjev': a decision model, fine-tuned to score the "
                     "options of a question with its own head; it does not chat: the chat endpoint would answer in "
                     "free text it was not trained to write; leave the chat endpoint out (cdk.json: \"chat\": false, "
                     "a decision-only environment)"]
    assert not [w for w in model_warnings(artifact, load("decisions").settings, "model") if "chat" in w]
    embedded = prepare_artifact(load("dev").settings.model, key="model", base_dir=tmp_path,
                                cache=ArtifactCache(CACHE_DIR))
    assert isinstance(embedded, LocalArtifact) and embedded.decision_type is None
    assert not [w for w in model_warnings(embedded, load("dev").settings, "model") if "does not chat" in w]


def sagemaker_resources(result: Synth) -> dict[str, list[str]]:
    """Each SageMaker resource type with the construct paths of its resources."""
    found: dict[str, list[str]] = {}
    for resource in result.json["Resources"].values():
        if resource["Type"].startswith("AWS::SageMaker::"):
            found.setdefault(resource["Type"], []).append(resource["Metadata"]["aws:cdk:path"])
    return found


def assert_no_chat(result: Synth) -> None:
    paths = [r.get("Metadata", {}).get("aws:cdk:path", "") for r in result.json["Resources"].values()]
    assert not [path for path in paths if "/Chat/" in path or "Chat" in path.split("/")]
    assert not [name for name in result.json["Outputs"] if name.startswith("Chat")]
    assert not [name for name in result.json["Resources"] if name.startswith("Chat")]
    assert "-chat" not in str(result.json), "no endpoint, component, log group or alarm of a chat model"


def test_the_shipped_decision_only_environment_synthesizes_with_no_chat_endpoint(decisions: Synth) -> None:
    assert_no_chat(decisions)
    assert {kind: len(paths) for kind, paths in sagemaker_resources(decisions).items()} == {
        "AWS::SageMaker::Model": 1, "AWS::SageMaker::EndpointConfig": 1, "AWS::SageMaker::Endpoint": 1}
    (endpoint,) = decisions.resources("AWS::SageMaker::Endpoint").values()
    assert endpoint["Properties"]["EndpointName"] == "semif-decisions-decision"
    assert list(decisions.stack.endpoints) == ["decision"]
    assert {"DecisionEndpointName", "DecisionModelName", "DecisionImageUri"} <= set(decisions.json["Outputs"])
    assert decisions.json["Description"] == "semif decisions: a SemIf decision endpoint (no chat endpoint) on SageMaker"


def test_the_decision_image_container_gets_nothing_new_for_a_decision_model(decisions: Synth, openjev: tuple[Path,
                                                                            GGUFInfo], tmp_path: Path) -> None:
    """The adapter detects the decision type itself at start: the stack sets the same variables for either model."""
    path, _ = openjev
    app, stack = synth("decisions", tmp_path, {"model": {"source": "gguf", "path": str(path)}})
    with_type = Synth(app, stack)
    assert_no_chat(with_type)

    def variables(result: Synth) -> set[str]:
        (model,) = result.resources("AWS::SageMaker::Model").values()
        return set(model["Properties"]["PrimaryContainer"]["Environment"])

    assert variables(with_type) == variables(decisions)
    assert "SEMIF_DECISION_ENGINE" not in variables(with_type)


@pytest.mark.parametrize(("env_name", "changes", "sagemaker"), [
    ("shared", {"chat": False}, {"AWS::SageMaker::Model": 1, "AWS::SageMaker::EndpointConfig": 1,
                                 "AWS::SageMaker::Endpoint": 1, "AWS::SageMaker::InferenceComponent": 1}),
    ("serverless", {"chat": False}, {"AWS::SageMaker::Model": 1, "AWS::SageMaker::EndpointConfig": 1,
                                     "AWS::SageMaker::Endpoint": 1}),
])
def test_decision_only_in_shared_hosting_with_one_component_and_serverless(env_name: str, changes: dict[str, Any],
                                                                          sagemaker: dict[str, int],
                                                                          tmp_path: Path) -> None:
    result = Synth(*synth(env_name, tmp_path, changes))
    assert_no_chat(result)
    assert {kind: len(paths) for kind, paths in sagemaker_resources(result).items()} == sagemaker


def test_decision_only_settings_are_validated() -> None:
    assert load("decisions").settings.kinds == ("decision",)
    assert load("dev").settings.kinds == ("chat", "decision")
    assert problems("decisions", {"chat": True}) == {
        "environments.decisions.chat": "give the chat endpoint's settings, or false to leave the chat endpoint out"}
    assert problems("decisions", {"chat": None})["environments.decisions.chat"] == "Field required"
    assert "environments.decisions.chat.alarms" in problems("decisions", {"chat": {"instance_type": "ml.m5.large"}})
    # the environment's hosting may be serverless where there is no chat endpoint to refuse it
    serverless = {"hosting": "serverless", "decision": {"instance_type": None, "instance_count": None,
                                                        "network_isolation": False,
                                                        "serverless": {"memory_mb": 2048, "max_concurrency": 2}}}
    assert load("decisions", serverless).settings.hosting_of("decision") == "serverless"
    assert "environments.serverless.hosting" in problems("serverless", {"hosting": "serverless"})
    with pytest.raises(ValueError, match="no chat endpoint"):
        load("decisions").settings.endpoint("chat")
