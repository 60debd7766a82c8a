"""What llama.cpp is started with, as the engine needs it: the settings are read and validated above it
(`semif_adapter.settings`), and handed down as anything that has these fields.

Kept here, not in settings.py, so the engine imports nothing above it: `Settings` meets `LlamaSettings` as it is.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Protocol

DEFAULT_MAX_CONTEXT = 8192  # when CTX_SIZE is unset: the model's own, capped (KV memory grows with it)


class FlashAttention(IntEnum):
    """llama.h `enum llama_flash_attn_type`."""

    AUTO = -1
    DISABLED = 0
    ENABLED = 1


def context_size(configured: int | None, context_train: int) -> int:
    """The context of each worker (or slot): as configured, else the model's own capped at DEFAULT_MAX_CONTEXT."""
    return configured or min(context_train, DEFAULT_MAX_CONTEXT)


class LlamaSettings(Protocol):
    """The llama.cpp settings, with llama-server's meaning (`SM_LLAMA_CPP_*`)."""

    @property
    def n_gpu_layers(self) -> int | None: ...  # None: llama.cpp's default; -1: all
    @property
    def ctx_size(self) -> int | None: ...
    @property
    def threads(self) -> int: ...
    @property
    def threads_batch(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def ubatch_size(self) -> int | None: ...
    @property
    def flash_attn(self) -> FlashAttention: ...
