"""The SM_LLAMA_CPP_* -> llama-server mapping, its validation, and the committed flag list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from semif_adapter.deploy.llama_flags import (
    Arity,
    Flag,
    FlagError,
    ValueType,
    check_environment,
    known_flags,
    parse_help,
    server_args,
)


def test_values_become_flags_like_the_dlc_entry_point():
    env = {"SM_LLAMA_CPP_CTX_SIZE": "4096", "SM_LLAMA_CPP_N_GPU_LAYERS": "999", "PATH": "/bin"}
    assert server_args(env) == ["--ctx-size", "4096", "--n-gpu-layers", "999"]


def test_true_is_a_bare_flag_and_false_is_dropped_in_any_case():
    env = {"SM_LLAMA_CPP_JINJA": "TRUE", "SM_LLAMA_CPP_NO_WEBUI": "true", "SM_LLAMA_CPP_VERBOSE": "False"}
    assert server_args(env) == ["--jinja", "--no-webui"]


def test_model_model_dir_and_port_are_consumed_not_passed():
    env = {"SM_LLAMA_CPP_MODEL": "/opt/ml/model/m.gguf", "SM_LLAMA_CPP_MODEL_DIR": "/x",
           "SM_LLAMA_CPP_PORT": "8080", "SM_LLAMA_CPP_THREADS": "2"}
    assert server_args(env) == ["--threads", "2"]
    check_environment(env)  # consumed keys are valid whatever their value


def test_a_typo_is_refused_with_the_key_and_a_suggestion():
    with pytest.raises(FlagError, match="has no flag --ctx-siz") as caught:
        check_environment({"SM_LLAMA_CPP_CTX_SIZ": "4096"})
    assert caught.value.key == "SM_LLAMA_CPP_CTX_SIZ"
    assert "did you mean SM_LLAMA_CPP_CTX_SIZE?" in str(caught.value)


@pytest.mark.parametrize("key, value, message", [
    ("SM_LLAMA_CPP_CTX_SIZE", "true", "needs a value"),
    ("SM_LLAMA_CPP_CTX_SIZE", "", "needs a value"),
    ("SM_LLAMA_CPP_JINJA", "1", "is a switch"),
    ("SM_LLAMA_CPP_HOST", "0.0.0.0", "set by the DLC's entry point"),
    ("SM_LLAMA_CPP_ctx_size", "4096", "upper-case words"),
    ("SM_LLAMA_CPP_CTX__SIZE", "4096", "upper-case words"),
])
def test_values_that_would_stop_llama_server_are_refused(key, value, message):
    with pytest.raises(FlagError, match=message):
        check_environment({key: value})


def test_flags_with_optional_values_accept_both_forms():
    check_environment({"SM_LLAMA_CPP_FLASH_ATTN": "on"})
    check_environment({"SM_LLAMA_CPP_FLASH_ATTN": "true"})
    assert known_flags().flags["--flash-attn"].arity is Arity.OPTIONAL


def test_help_parser_reads_names_aliases_arity_and_value_types():
    text = (
        "----- common params -----\n"
        "\n"
        "-c,    --ctx-size N                     size of the prompt context (default: 0, 0 = loaded from model)\n"
        "                                        (env: LLAMA_ARG_CTX_SIZE)\n"
        "-kvo,  --kv-offload, -nkvo, --no-kv-offload\n"
        "                                        whether to enable KV cache offloading\n"
        "-fa,   --flash-attn [on|off|auto]       set Flash Attention use\n"
        "-dr,   --docker-repo [<repo>/]<model>[:quant]\n"
        "--temp N                                temperature (default: 0.80)\n"
        "-ngl,  --gpu-layers, --n-gpu-layers N   max. number of layers, either an exact number,\n"
        "                                        'auto', or 'all' (default: auto)\n"
        "--rope-scaling {none,linear,yarn}       RoPE frequency scaling method\n"
        "-ctk,  --cache-type-k TYPE              KV cache data type for K\n"
        "                                        allowed values: f32, f16, q8_0\n"
        "--poll <0...100>                        use polling level (default: 50)\n"
        "-ot,   --override-tensor <tensor name pattern>=<buffer type>,...\n"
        "--draft, --draft-n, --draft-max N       the argument has been removed. use --spec-draft-n-max\n"
        "                                        (env: LLAMA_ARG_DRAFT_MAX)\n"
    )
    int_flag = Flag(Arity.REQUIRED, ValueType.INT, minimum=-1, maximum=2**31 - 1)
    layers = Flag(Arity.REQUIRED, ValueType.NUMBER, ("auto", "all"))
    removed = Flag(Arity.REQUIRED, ValueType.STRING, removed="use --spec-draft-n-max")
    assert parse_help(text) == {
        "--ctx-size": int_flag,
        "--docker-repo": Flag(Arity.REQUIRED, ValueType.STRING),
        "--flash-attn": Flag(Arity.OPTIONAL, ValueType.CHOICE, ("on", "off", "auto")),
        "--kv-offload": Flag(Arity.NONE), "--no-kv-offload": Flag(Arity.NONE),
        "--temp": Flag(Arity.REQUIRED, ValueType.FLOAT),
        "--gpu-layers": layers, "--n-gpu-layers": layers,
        "--rope-scaling": Flag(Arity.REQUIRED, ValueType.CHOICE, ("none", "linear", "yarn")),
        "--cache-type-k": Flag(Arity.REQUIRED, ValueType.CHOICE, ("f32", "f16", "q8_0")),
        "--poll": Flag(Arity.REQUIRED, ValueType.INT, minimum=0, maximum=100),
        "--override-tensor": Flag(Arity.REQUIRED, ValueType.STRING),
        "--draft": removed, "--draft-n": removed, "--draft-max": removed,
    }


@pytest.mark.parametrize("key, value, message", [
    ("SM_LLAMA_CPP_CTX_SIZE", "lots", "takes an integer, not 'lots'"),
    ("SM_LLAMA_CPP_CTX_SIZE", "99999999999", "takes an integer from -1 to 2147483647, not 99999999999"),
    ("SM_LLAMA_CPP_THREADS", "-5", "takes an integer from -1 to 2147483647, not -5"),
    ("SM_LLAMA_CPP_N_GPU_LAYERS", "lots", "takes a number or 'auto', 'all', not 'lots'"),
    ("SM_LLAMA_CPP_TEMP", "warm", "takes a number, not 'warm'"),
    ("SM_LLAMA_CPP_TOP_P", "nan", "takes a number, not 'nan'"),
    ("SM_LLAMA_CPP_CACHE_TYPE_K", "q9_9", "takes f32, f16, bf16"),
    ("SM_LLAMA_CPP_SPLIT_MODE", "rows", "takes none, layer, row, tensor; not 'rows'"),
    ("SM_LLAMA_CPP_FLASH_ATTN", "yes", "takes on, off, auto; not 'yes'"),
    ("SM_LLAMA_CPP_POLL", "101", "from 0 to 100"),
    ("SM_LLAMA_CPP_SPEC_TYPE", "draft-simple,magic", "a comma-separated list of"),
    ("SM_LLAMA_CPP_DRAFT_MAX", "4", "no longer accepts --draft-max"),
])
def test_values_are_checked_against_their_type_from_the_pinned_help(key, value, message):
    with pytest.raises(FlagError, match="^" + key) as caught:
        check_environment({key: value})
    assert message in str(caught.value)


@pytest.mark.parametrize("key, value", [
    ("SM_LLAMA_CPP_CTX_SIZE", "0"), ("SM_LLAMA_CPP_THREADS", "-1"), ("SM_LLAMA_CPP_N_GPU_LAYERS", "all"),
    ("SM_LLAMA_CPP_N_GPU_LAYERS", "999"), ("SM_LLAMA_CPP_TEMP", "0.7"), ("SM_LLAMA_CPP_PRESENCE_PENALTY", "-1.5"),
    ("SM_LLAMA_CPP_ROPE_FREQ_BASE", "10000.0"), ("SM_LLAMA_CPP_SEED", "4000000000"),
    ("SM_LLAMA_CPP_SPEC_TYPE", "draft-simple,ngram-cache"), ("SM_LLAMA_CPP_CHAT_TEMPLATE", "chatml"),
    ("SM_LLAMA_CPP_OVERRIDE_TENSOR", "blk\\.0\\.=CPU"),
])
def test_valid_values_of_each_type_pass(key, value):
    check_environment({key: value})


@pytest.mark.parametrize("flag", ["TOOLS", "AGENT", "MCP_SERVERS_JSON", "TOOLS_RUNTIME", "RPC", "LOG_PROMPTS_DIR",
                                  "API_PREFIX", "SSL_KEY_FILE", "SSL_CERT_FILE", "SLOT_SAVE_PATH", "MEDIA_PATH",
                                  "LORA", "HF_REPO", "VERSION"])
def test_unsafe_flags_are_refused_with_their_reason(flag):
    value = "true" if known_flags().flags[f"--{flag.lower().replace('_', '-')}"].arity is Arity.NONE else "x"
    with pytest.raises(FlagError, match=f"^SM_LLAMA_CPP_{flag}: --[a-z-]+ is refused: ") as caught:
        check_environment({f"SM_LLAMA_CPP_{flag}": value})
    assert len(str(caught.value)) > 80  # the reason, not just the verdict
    check_environment({f"SM_LLAMA_CPP_{flag}": "false"})  # dropped by the entry point: harmless


def test_every_refused_flag_is_a_flag_of_the_pinned_server():
    table = known_flags()
    assert len(table.unsafe) > 40
    assert set(table.unsafe) <= set(table.flags), "a refused flag no longer exists: update the unsafe list"


@pytest.mark.parametrize("value", ["4096\n--tools all", "a\x00b", "tab\there", "\x7f"])
def test_control_characters_in_values_are_refused(value):
    with pytest.raises(FlagError, match="control character"):
        check_environment({"SM_LLAMA_CPP_ALIAS": value})


def test_committed_list_matches_the_built_llama_server():
    server = Path(sys.executable).parent / "llama-server"  # linked into the venv by the bootstrap
    assert server.exists(), "llama-server is missing: run the bootstrap"
    text = subprocess.run([str(server), "--help"], capture_output=True, text=True, check=True, timeout=60).stdout
    built = parse_help(text)
    committed = dict(known_flags().flags)
    assert len(built) > 300
    assert {"--override-tensor", "--control-vector-layer-range"} <= set(built)  # metavars with spaces
    assert built == committed, "run `python -m scripts.dev.update_llama_flags` after changing the llama.cpp pin"
