"""The model matrix: the GGUFs the suites run on, where each one is, and what its header says.

The embedded SmolLM2 (llama architecture, ChatML template, 49k BPE vocabulary, Q4_1) and Gemma 3 270M (gemma3,
no chat template: a base model, 262k SentencePiece vocabulary, K-quants), both installed by the bootstrap and
never downloaded by a test. A suite runs on every model with `@pytest.mark.parametrize("model", MATRIX)`; the
facts are checked against each file's header (tests/adapter/test_model_matrix.py), so they cannot go stale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.dev.pypi_models import GEMMA3_270M
from semif_adapter.engine.embedded_model import embedded_model_path


@dataclass(frozen=True)
class MatrixModel:
    name: str  # the test id
    locate: Callable[[], Path]  # raises, naming the bootstrap, when the model is not installed
    architecture: str
    quantization: str
    context_length: int  # trained
    vocab_size: int
    has_chat_template: bool
    kv_bytes_per_token: int  # f16 K and V of every layer (gguf_header)

    @property
    def path(self) -> Path:
        return self.locate()


SMOLLM2 = MatrixModel(name="smollm2", locate=embedded_model_path, architecture="llama", quantization="Q4_1",
                      context_length=8192, vocab_size=49152, has_chat_template=True,
                      kv_bytes_per_token=30 * 2 * 192 * 2)  # 30 layers, 3 KV heads x 64
GEMMA3 = MatrixModel(name="gemma3", locate=GEMMA3_270M.path, architecture="gemma3", quantization="Q4_K_M",
                     context_length=32768, vocab_size=262144, has_chat_template=False,
                     kv_bytes_per_token=18 * 2 * 256 * 2)  # 18 layers, 1 KV head x 256
MODELS = (SMOLLM2, GEMMA3)
MATRIX = [pytest.param(model, id=model.name) for model in MODELS]
