"""The SM_LLAMA_CPP_* -> llama-server mapping, its validation, and the committed flag list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from semif_adapter.llama_flags import (
    Arity,
    FlagError,
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
    assert known_flags().flags["--flash-attn"] is Arity.OPTIONAL


def test_help_parser_reads_names_aliases_and_arity():
    text = (
        "-c,    --ctx-size N                     size of the prompt context\n"
        "                                        (env: LLAMA_ARG_CTX_SIZE)\n"
        "-kvo,  --kv-offload, -nkvo, --no-kv-offload\n"
        "                                        whether to enable KV cache offloading\n"
        "-fa,   --flash-attn [on|off|auto]       set Flash Attention use\n"
        "-dr,   --docker-repo [<repo>/]<model>[:quant]\n"
    )
    assert parse_help(text) == {"--ctx-size": Arity.REQUIRED, "--docker-repo": Arity.REQUIRED,
                                "--flash-attn": Arity.OPTIONAL, "--kv-offload": Arity.NONE,
                                "--no-kv-offload": Arity.NONE}


def test_committed_list_matches_the_built_llama_server():
    server = Path(sys.executable).parent / "llama-server"  # linked into the venv by the bootstrap
    assert server.exists(), "llama-server is missing: run the bootstrap"
    text = subprocess.run([str(server), "--help"], capture_output=True, text=True, check=True, timeout=60).stdout
    built = parse_help(text)
    committed = dict(known_flags().flags)
    assert len(built) > 200
    assert built == committed, "run scripts/update_llama_flags.py after changing the llama.cpp pin"
