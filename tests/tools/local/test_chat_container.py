"""The local chat container keeps the llama.cpp DLC's contract (model choice, flags, /ping, /invocations)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.models import MATRIX, MatrixModel

from scripts.local.chat_container import dlc_model_path, layout_warning, llama_server_argv
from scripts.local.processes import LOOPBACK, descendants, free_port, pid_alive, wait_until

REPO = Path(__file__).resolve().parents[3]


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")
    return path


def test_explicit_model_wins(tmp_path: Path) -> None:
    touch(tmp_path / "a.gguf")
    env = {"SM_LLAMA_CPP_MODEL": "/m/x.gguf", "SM_LLAMA_CPP_MODEL_DIR": str(tmp_path)}
    assert dlc_model_path(env) == Path("/m/x.gguf")


def test_first_top_level_gguf_then_one_level_down(tmp_path: Path) -> None:
    env = {"SM_LLAMA_CPP_MODEL_DIR": str(tmp_path)}
    assert dlc_model_path(env) is None
    nested = touch(tmp_path / "sub" / "b.gguf")
    touch(tmp_path / "sub" / "deeper" / "c.gguf")  # two levels down: not searched
    assert dlc_model_path(env) == nested
    top = touch(tmp_path / "z.gguf")
    touch(tmp_path / "readme.txt")
    assert dlc_model_path(env) == top
    assert dlc_model_path({"SM_LLAMA_CPP_MODEL_DIR": str(tmp_path / "sub")}) == nested


def test_ambiguous_model_dir_is_warned_about(tmp_path: Path) -> None:
    touch(tmp_path / "a.gguf")
    touch(tmp_path / "b.gguf")
    warning = layout_warning({"SM_LLAMA_CPP_MODEL_DIR": str(tmp_path)})
    assert warning is not None and "2 models" in warning
    assert layout_warning({"SM_LLAMA_CPP_MODEL": str(tmp_path / "a.gguf")}) is None


def test_llama_server_command_line_is_the_dlcs() -> None:
    env = {"SM_LLAMA_CPP_MODEL": "/m/x.gguf", "SM_LLAMA_CPP_CTX_SIZE": "512", "SM_LLAMA_CPP_JINJA": "true",
           "SM_LLAMA_CPP_NO_WEBUI": "false", "SM_LLAMA_CPP_PORT": "9000", "OTHER": "x"}
    argv = llama_server_argv("llama-server", env, 1234)
    assert argv[:5] == ["llama-server", "--host", LOOPBACK, "--port", "1234"]
    assert argv[5:7] == ["--model", "/m/x.gguf"]
    assert argv[7:] == ["--ctx-size", "512", "--jinja"]  # false dropped, true bare, PORT consumed


def run_container(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """The chat container with exactly these SM_LLAMA_CPP_* settings (none inherited from the caller)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SM_LLAMA_CPP_")}
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "scripts.local.chat_container", "--port", str(port)],
                                cwd=REPO, env={**inherited, **env}, stdout=sink, stderr=subprocess.STDOUT)


@pytest.mark.slow
@pytest.mark.parametrize("model", MATRIX)
def test_real_container_from_a_model_dir(tmp_path: Path, model: MatrixModel) -> None:
    """On every model of the matrix; a GGUF without a chat template gets llama-server's fallback, ChatML (what
    packaging and synth warn about)."""
    model_dir = tmp_path / "model"
    (model_dir / "nested").mkdir(parents=True)
    (model_dir / "nested" / "model.gguf").symlink_to(model.path)
    port = free_port()
    env = {"SM_LLAMA_CPP_MODEL_DIR": str(model_dir), "SM_LLAMA_CPP_CTX_SIZE": "512",
           "SM_LLAMA_CPP_PARALLEL": "1", "SM_LLAMA_CPP_THREADS": "1", "SM_LLAMA_CPP_NO_WEBUI": "true",
           "SM_LLAMA_CPP_VERBOSE": "false"}
    process = run_container(env, port, tmp_path / "chat.log")
    url = f"http://{LOOPBACK}:{port}"
    try:
        seen: list[int] = []

        def ping() -> bool:
            try:
                seen.append(httpx.get(f"{url}/ping", timeout=2).status_code)
            except httpx.HTTPError:
                return False
            return seen[-1] == 200

        wait_until(ping, timeout_s=60, what="chat container", alive=lambda: process.poll() is None,
                   interval_s=0.02)
        # before llama-server binds: 502 (nginx); while it loads: 503 (llama-server); then 200, never back
        assert set(seen) <= {502, 503, 200}
        assert seen == sorted(seen, key=[502, 503, 200].index)
        props = httpx.get(f"{url}/props", timeout=5).json()  # any other path passes through, as in nginx
        assert props["default_generation_settings"]["n_ctx"] == 512  # SM_LLAMA_CPP_CTX_SIZE reached it
        assert Path(props["model_path"]).name == "model.gguf"
        assert ("<|im_start|>" in props["chat_template"]) is (model.name == "smollm2" or not model.has_chat_template)
        answer = httpx.post(f"{url}/invocations", timeout=60, json={
            "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8, "temperature": 0}).json()
        assert answer["choices"][0]["message"]["content"]
        bad = httpx.post(f"{url}/invocations", timeout=60, content=b"{", headers={"content-type": "application/json"})
        assert bad.status_code >= 400 and "error" in bad.json()
        family = descendants(process.pid)
        assert len(family) == 1  # llama-server
    finally:
        process.terminate()
        status = process.wait(timeout=30)
    assert status == 0
    wait_until(lambda: not any(pid_alive(p) for p in family), timeout_s=5, what="llama-server exit")


def test_flag_typo_is_refused_before_anything_starts(tmp_path: Path, model_path: Path) -> None:
    started = time.monotonic()
    process = run_container({"SM_LLAMA_CPP_MODEL": str(model_path), "SM_LLAMA_CPP_CTX_SIZ": "512"}, free_port(),
                            tmp_path / "chat.log")
    assert process.wait(timeout=30) == 2
    assert time.monotonic() - started < 15
    output = (tmp_path / "chat.log").read_text()
    assert "SM_LLAMA_CPP_CTX_SIZ" in output
    assert "SM_LLAMA_CPP_CTX_SIZE" in output  # the suggestion


def test_missing_model_is_refused(tmp_path: Path) -> None:
    process = run_container({"SM_LLAMA_CPP_MODEL_DIR": str(tmp_path)}, free_port(), tmp_path / "chat.log")
    assert process.wait(timeout=30) == 2
    assert "no *.gguf" in (tmp_path / "chat.log").read_text()
