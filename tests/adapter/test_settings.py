"""The adapter's settings model: defaults, the rules resolved from other settings, and every refusal naming its
variable, as the adapter (at start-up) and the CDK app (`check_environment`, at synth) both run it."""

from __future__ import annotations

import pytest

from semif_adapter.core.calibration import CalibrationError, parse_calibration
from semif_adapter.core.question_frames import DEFAULT_FRAMES, Frames
from semif_adapter.engine.llama_settings import FlashAttention
from semif_adapter.engine.model_files import DEFAULT_MODEL_DIR
from semif_adapter.settings import (
    ENV_NAMES,
    MAX_BODY_BYTES,
    SEMIF_KEYS,
    Settings,
    SettingsError,
    check_environment,
    cpu_quota,
    load_settings,
)

CALIBRATION = '{"format": "semif-calibration-v1", "methods": {"pmi": {"temperature": 1.5}}}'


def test_an_empty_environment_gives_the_documented_defaults():
    settings = load_settings({})
    assert (settings.model_path, settings.model_dir, settings.host, settings.port) == (None, DEFAULT_MODEL_DIR,
                                                                                       "0.0.0.0", 8080)
    assert settings.threads == settings.threads_batch == cpu_quota()
    assert (settings.batch_size, settings.ubatch_size, settings.ctx_size, settings.n_gpu_layers) == (2048, None,
                                                                                                     None, None)
    assert settings.flash_attn is FlashAttention.AUTO and settings.scoring == "pmi" and settings.calibration is None
    assert (settings.queue_size, settings.max_body_bytes, settings.drain_seconds, settings.body_timeout_seconds,
            settings.result_cache_entries) == (32, MAX_BODY_BYTES, 20, 30, 4096)
    assert settings.workers is settings.cache_bytes is settings.api_keys_file is settings.model_sha256 is None
    assert settings.frames == DEFAULT_FRAMES


def test_an_empty_value_counts_as_unset():
    env = {key: "" for names in ENV_NAMES.values() for key in names}
    assert load_settings(env) == load_settings({})


def test_values_are_read_with_llama_servers_meaning():
    settings = load_settings({
        "SM_LLAMA_CPP_N_GPU_LAYERS": "all", "SM_LLAMA_CPP_CTX_SIZE": "0", "SM_LLAMA_CPP_THREADS": "3",
        "SM_LLAMA_CPP_FLASH_ATTN": " On ", "SM_LLAMA_CPP_UBATCH_SIZE": "256", "SEMIF_WORKERS": "4",
        "SEMIF_SYSTEMONE_FRAMES": "choice=name_description", "SEMIF_CALIBRATION": CALIBRATION,
        "SEMIF_MODEL_SHA256": "ab" * 32, "SEMIF_SCORING": "letters"})
    assert settings.n_gpu_layers == -1 and settings.ctx_size is None  # 0: the model's own, capped
    assert settings.threads == settings.threads_batch == 3  # THREADS_BATCH follows THREADS unless set
    assert settings.flash_attn is FlashAttention.ENABLED and settings.ubatch_size == 256 and settings.workers == 4
    assert settings.frames == Frames(choice="name_description") and settings.scoring == "letters"
    assert settings.calibration is not None and settings.calibration.methods["pmi"].temperature == 1.5
    assert load_settings({"SM_LLAMA_CPP_N_GPU_LAYERS": "auto"}).n_gpu_layers is None
    assert load_settings({"SM_LLAMA_CPP_FLASH_ATTN": "false"}).flash_attn is FlashAttention.DISABLED


def test_sagemakers_model_dir_wins_over_the_dlcs_and_the_command_line_over_both():
    env = {"SM_MODEL_DIR": "/a", "SM_LLAMA_CPP_MODEL_DIR": "/b", "SAGEMAKER_BIND_TO_PORT": "9000",
           "SM_LLAMA_CPP_MODEL": "/a/m.gguf", "SEMIF_HOST": "::"}
    assert load_settings(env).model_dir == "/a"
    assert load_settings({"SM_LLAMA_CPP_MODEL_DIR": "/b"}).model_dir == "/b"
    given = load_settings(env, model_path="/c/n.gguf", model_dir="/c", port=9001, host="127.0.0.1")
    assert (given.model_path, given.model_dir, given.port, given.host) == ("/c/n.gguf", "/c", 9001, "127.0.0.1")


def test_the_process_environment_is_read_when_no_map_is_given(monkeypatch):
    monkeypatch.setenv("SEMIF_QUEUE_SIZE", "7")
    assert load_settings().queue_size == Settings().queue_size == 7


@pytest.mark.parametrize(("env", "key", "message"), [
    ({"SEMIF_QUEUE_SIZE": "lots"}, "SEMIF_QUEUE_SIZE", "expected an integer, got 'lots'"),
    ({"SEMIF_QUEUE_SIZE": "1.5"}, "SEMIF_QUEUE_SIZE", "expected an integer, got '1.5'"),
    ({"SEMIF_BODY_TIMEOUT_SECONDS": "0"}, "SEMIF_BODY_TIMEOUT_SECONDS", "must be at least 1, got 0"),
    ({"SEMIF_MAX_BODY_BYTES": "10"}, "SEMIF_MAX_BODY_BYTES", "must be at least 1024, got 10"),
    ({"SEMIF_WORKERS": "40"}, "SEMIF_WORKERS", "at most 16, got 40"),
    ({"SEMIF_CACHE_BYTES": "-1"}, "SEMIF_CACHE_BYTES", "must be at least 0, got -1"),
    ({"SAGEMAKER_BIND_TO_PORT": "70000"}, "SAGEMAKER_BIND_TO_PORT", "at most 65535, got 70000"),
    ({"SM_LLAMA_CPP_THREADS": "0"}, "SM_LLAMA_CPP_THREADS", "must be at least 1, got 0"),
    ({"SM_LLAMA_CPP_THREADS_BATCH": "x"}, "SM_LLAMA_CPP_THREADS_BATCH", "expected an integer, got 'x'"),
    ({"SM_LLAMA_CPP_N_GPU_LAYERS": "-2"}, "SM_LLAMA_CPP_N_GPU_LAYERS", "must be at least -1, got -2"),
    ({"SM_LLAMA_CPP_N_GPU_LAYERS": "lots"}, "SM_LLAMA_CPP_N_GPU_LAYERS", "expected an integer, got 'lots'"),
    ({"SM_LLAMA_CPP_UBATCH_SIZE": "4096"}, "SM_LLAMA_CPP_UBATCH_SIZE", "4096 exceeds BATCH_SIZE 2048"),
    ({"SM_LLAMA_CPP_FLASH_ATTN": "maybe"}, "SM_LLAMA_CPP_FLASH_ATTN", "expected on, off or auto, got 'maybe'"),
    ({"SEMIF_SCORING": "vibes"}, "SEMIF_SCORING", "expected one of letters, likelihood, pmi, got 'vibes'"),
    ({"SEMIF_MODEL_SHA256": "AB" * 32}, "SEMIF_MODEL_SHA256", "expected 64 lower-case hex digits"),
    ({"SEMIF_SYSTEMONE_FRAMES": "choice=x"}, "SEMIF_SYSTEMONE_FRAMES", "choice='x': expected one of description"),
    ({"SEMIF_API_KEYS_FILE": "/no/such/keys"}, "SEMIF_API_KEYS_FILE", "/no/such/keys is not a readable file"),
])
def test_a_bad_value_is_refused_with_its_variable_named(env, key, message):
    with pytest.raises(SettingsError) as caught:
        load_settings(env)
    assert caught.value.key == key and str(caught.value).startswith(f"{key}: ") and message in str(caught.value)


def test_a_bad_calibration_is_refused_with_the_calibrations_own_message():
    with pytest.raises(SettingsError) as caught:
        load_settings({"SEMIF_CALIBRATION": '{"format": "semif-calibration-v1"}'})
    with pytest.raises(CalibrationError) as parsed:
        parse_calibration('{"format": "semif-calibration-v1"}')
    assert caught.value.key == "SEMIF_CALIBRATION" and str(caught.value) == f"SEMIF_CALIBRATION: {parsed.value}"


def test_check_environment_names_the_closest_setting_for_an_unknown_key():
    with pytest.raises(SettingsError) as caught:
        check_environment({"SEMIF_QUEUE_SIZ": "8"})
    assert caught.value.key == "SEMIF_QUEUE_SIZ"
    assert "not an adapter setting (did you mean SEMIF_QUEUE_SIZE? the adapter would ignore it)" in str(caught.value)
    with pytest.raises(SettingsError, match=r"not an adapter setting \(the adapter would ignore it\); known: "):
        check_environment({"SEMIF_ZZZZZZZZZZ": "1"})


def test_check_environment_runs_the_adapters_own_checks_and_ignores_what_is_not_the_adapters():
    with pytest.raises(SettingsError, match="SEMIF_DRAIN_SECONDS: expected an integer"):
        check_environment({"SEMIF_DRAIN_SECONDS": "soon"})
    check_environment({"SEMIF_QUEUE_SIZE": "8", "SM_LLAMA_CPP_TEMP": "0.5", "PATH": "/bin"})  # flags: llama_flags'


def test_every_semif_key_is_a_field_with_a_description():
    semif = {names[0] for names in ENV_NAMES.values() if names[0].startswith("SEMIF_")}
    assert set(SEMIF_KEYS) == semif and len(semif) == 18
    assert all(field.description for field in Settings.model_fields.values())

