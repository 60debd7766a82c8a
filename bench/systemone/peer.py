"""SemIf's own System One server, `semif-serve`, as the peer: its llama.cpp backend on the same GGUF as the adapter.

Nothing of SemIf is in this repository. An installation lives outside it, in a scratch folder (`SEMIF_SERVE_DIR`,
default ~/.cache/semif-sagemaker/peers/semif-serve), laid out as
    venv/        a Python with semif-serve's dependencies (fastapi, uvicorn, transformers, llama-cpp-python)
    src/         SemIf's source (`semif_api`, `semif_phase1`), put on PYTHONPATH (absent when installed in venv/)
    tokenizer/<GGUF file stem>/   the model's Hugging Face tokenizer: SemIf builds and checks every prompt with it
                 before llama.cpp reads the tokens (its backend refuses to start when the two disagree)
(SemIf's own install: its docs/SERVE.md, `pip install -e '.[serve]'` with llama-cpp-python; the tokenizer saved from
the GGUF by transformers' `AutoTokenizer.from_pretrained(folder, gguf_file=name)`). It is started here as SemIf's
docs/SERVE.md starts it (`semif-serve`, the `llamacpp` backend, its defaults otherwise) with two choices of ours:
the llama.cpp library is this checkout's own build (`LLAMA_CPP_LIB_PATH`, the one the adapter loads), and it gets
the adapter's thread count.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.reliability.servers import START_TIMEOUT_S
from bench.systemone.tools import Running
from scripts.dev.build_llama_cpp import build_dir, cache_root
from scripts.local.processes import LOOPBACK, free_port, start_child, wait_for_ping

PEER_ENV = "SEMIF_SERVE_DIR"


class PeerMissingError(RuntimeError):
    """No semif-serve installation where we looked (the layout: this module's docstring)."""


def peer_dir() -> Path:
    return Path(os.environ.get(PEER_ENV) or cache_root() / "peers" / "semif-serve")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(8 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def installation(model: Path) -> dict[str, Any]:
    """What the peer is made of, checked before anything starts: its Python, its source, the tokenizer for this
    GGUF, and the provenance record its set-up left (which SemIf files, from which commits)."""
    root = peer_dir()
    python, tokenizer = root / "venv" / "bin" / "python", root / "tokenizer" / model.stem
    missing = [str(path) for path in (python, tokenizer / "tokenizer.json") if not path.exists()]
    if missing:
        raise PeerMissingError(f"no semif-serve installation for {model.name} under {root} (missing: "
                               f"{', '.join(missing)}); bench/systemone/peer.py describes one, "
                               f"{PEER_ENV} names another")
    provenance = root / "PROVENANCE.json"
    return {"dir": str(root), "python": str(python), "source": str(root / "src") if (root / "src").is_dir() else None,
            "tokenizer": str(tokenizer), "llama_cpp_lib": str(build_dir() / "bin"),
            "provenance": json.loads(provenance.read_text()) if provenance.exists() else None}


@contextlib.contextmanager
def semif_serve(model: Path, threads: int) -> Iterator[Running]:
    """semif-serve on a free loopback port, `llamacpp` backend on `model`, `threads` llama.cpp threads; stopped
    on the way out. Its model id is `semif/<GGUF stem>@<sha256[:12]>+llamacpp-gguf`."""
    found = installation(model)
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SEMIF_", "SM_", "VIRTUAL_ENV", "PYTHON", "LLAMA_CPP"))}
    env.update({"SEMIF_BACKEND": "llamacpp", "SEMIF_MODEL": found["tokenizer"], "SEMIF_REVISION": _sha256(model),
                "SEMIF_GGUF": str(model), "SEMIF_LLAMA_THREADS": str(threads), "SEMIF_HOST": LOOPBACK,
                "SEMIF_PORT": str(port), "HF_HUB_OFFLINE": "1", "LLAMA_CPP_LIB_PATH": found["llama_cpp_lib"]})
    if found["source"]:
        env["PYTHONPATH"] = found["source"]
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as logs:
        child = start_child("semif-serve", [found["python"], "-m", "semif_api.app"], env,
                            log_path=Path(logs) / "semif-serve.log")
        url = f"http://{LOOPBACK}:{port}"
        try:
            wait_for_ping(child, url + "/healthz", START_TIMEOUT_S)
            yield Running("semif-serve", url)
        finally:
            child.stop()
