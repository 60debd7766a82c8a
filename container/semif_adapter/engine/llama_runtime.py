"""The llama.cpp model and context behind the adapter: loading, tokenizer, chat frame.

A thin layer over llama-cpp-python's ctypes bindings (the low-level API, not
its `Llama` class, which has no multi-sequence batches). It owns the native
objects and turns llama.cpp's failures into `RuntimeStartError`, so the server
can exit with one clear line instead of crashing later.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from .gguf_header import GGUFHeaderError, GGUFInfo, read_gguf_info, require_complete
from .llama_settings import LlamaSettings, context_size
from .prompt_plan import PLAIN_FRAME, SLOT_LETTERS, USER_SENTINEL, ChatFrame
from .tool_call_template import ToolCallTemplate

LOG = logging.getLogger("semif_adapter")
MAX_BRANCHES = 255  # one sequence per scored branch: System One's 255 options (letters: 16 at most)
PAD_SEQ = MAX_BRANCHES  # the sequence of the pad row a lone token's call gets (`KvEngine._run`)
DEFAULT_UBATCH = 512
MIN_DEFAULT_UBATCH = 64  # flash attention's tiled kernel (GGML_FA_TILE_Q): partial_reuse's rules assume it
LOGITS_BUDGET_BYTES = 128 << 20  # one ubatch's float logits, per context
BYTE_PARTITIONING_VOCABS = frozenset({llama_cpp.LLAMA_VOCAB_TYPE_SPM, llama_cpp.LLAMA_VOCAB_TYPE_BPE})


def default_ubatch(vocab_size: int, batch_size: int) -> int:
    """The tokens llama.cpp computes at once when UBATCH_SIZE is unset: 512 (llama-server's default), halved while a
    ubatch's logits (vocabulary x 4 bytes each, held in the graph's buffer and in the output buffer) would pass
    LOGITS_BUDGET_BYTES; never under the 64 tokens of flash attention's tiled kernel. 512 for a 49k vocabulary, 128
    for a 262k one (1 MB of logits per position)."""
    ubatch = min(DEFAULT_UBATCH, batch_size)
    while ubatch > MIN_DEFAULT_UBATCH and ubatch * vocab_size * 4 > LOGITS_BUDGET_BYTES:
        ubatch //= 2
    return ubatch


class RuntimeStartError(RuntimeError):
    """The model cannot serve decisions; the process must not report healthy."""


class TooManyTokensError(ValueError):
    """A text has more tokens than the caller's limit; `count` is the exact number, or a lower bound when not
    `exact` (a text too long to be worth tokenizing)."""

    def __init__(self, count: int, limit: int, *, exact: bool = True) -> None:
        super().__init__(f"{'' if exact else 'at least '}{count} tokens, more than {limit}")
        self.count, self.limit, self.exact = count, limit, exact


@dataclass(frozen=True)
class ModelFacts:
    file: str
    architecture: str | None
    quantization: str | None
    context_train: int
    context: int
    vocab_size: int


def _stop(_data: ctypes.c_void_p) -> bool:
    return True


def _log_warnings(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    if level in (3, 4):  # GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR
        LOG.warning("llama.cpp: %s", text.decode("utf-8", errors="replace").rstrip())


# The C callbacks, kept alive for the process's life (llama.cpp holds bare pointers to them):
ABORT_NOW = llama_cpp.ggml_abort_callback(_stop)  # installed only when a drain deadline passes: free until then
# llama.cpp's own chatter goes to our logger; only warnings and errors are shown by default.
FORWARD_NATIVE_LOG = llama_cpp.llama_log_callback(_log_warnings)


@cache
def load_backends() -> None:
    """Register ggml's compute backends once per process, in the libraries the bindings loaded.

    A build with GGML_BACKEND_DL keeps its CPU variants and CUDA as loadable modules beside libllama and starts
    with an empty registry; ggml only searches the executable's directory (python's) unless told where. The
    loader is called through the bindings' own libllama handle, so it resolves in the libggml that libllama
    was linked against: the wheel stores each library under three names (wheels have no symlinks), and opening
    `libggml.so` by path would map a second copy of ggml, with a registry of its own. A build with the backends
    linked in (the shipped ones) has them registered already and loads nothing.
    """
    llama_cpp.llama_log_set(FORWARD_NATIVE_LOG, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    bindings = llama_cpp.llama_cpp._lib  # libllama as the bindings opened it, with its dependencies
    bindings.ggml_backend_reg_count.restype = ctypes.c_size_t
    if bindings.ggml_backend_reg_count() == 0:
        bindings.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        bindings.ggml_backend_load_all_from_path(str(llama_cpp.llama_cpp._base_path).encode())


class LlamaContext:
    """One llama.cpp context on a loaded model: up to 255 sequences sharing a unified KV cache. Not thread-safe:
    one decision worker uses it at a time."""

    def __init__(self, model: ctypes.c_void_p, params: llama_cpp.llama_context_params, vocab_size: int,
                 model_path: Path) -> None:
        self.vocab_size = vocab_size
        self.context: ctypes.c_void_p | None = llama_cpp.llama_init_from_model(model, params)
        if not self.context:
            raise RuntimeStartError(f"{model_path}: llama.cpp could not create a context of {params.n_ctx} tokens")
        self.memory: ctypes.c_void_p = llama_cpp.llama_get_memory(self.context)
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.context))
        self.n_batch = int(llama_cpp.llama_n_batch(self.context))
        self.n_ubatch = int(llama_cpp.llama_n_ubatch(self.context))
        self.threads = int(params.n_threads_batch)

    def use_threads(self, threads: int) -> None:
        """The threads of the next llama_decode calls (the adapter decodes batches only: both counts alike)."""
        if threads != self.threads:
            llama_cpp.llama_set_n_threads(self.context, threads, threads)
            self.threads = threads

    def logits_row(self, batch_index: int) -> np.ndarray:
        """A view of the logits of one token of the last batch (no copy: vocabularies reach 250k)."""
        pointer = llama_cpp.llama_get_logits_ith(self.context, batch_index)
        if not pointer:
            raise RuntimeError(f"llama.cpp returned no logits for batch position {batch_index}")
        return np.ctypeslib.as_array(pointer, shape=(self.vocab_size,))

    def request_abort(self) -> None:
        """Make the running llama_decode stop at its next graph (safe from another thread)."""
        if self.context:
            llama_cpp.llama_set_abort_callback(self.context, ABORT_NOW, ctypes.c_void_p())

    def close(self) -> None:
        if self.context:
            llama_cpp.llama_free(self.context)
            self.context = None


class LlamaRuntime:
    """One model and its contexts (`new_context`); the first one is created with the model."""

    def __init__(self, model_path: Path, settings: LlamaSettings) -> None:
        load_backends()
        try:
            with model_path.open("rb") as stream:
                info: GGUFInfo = read_gguf_info(stream)
            require_complete(info, model_path.stat().st_size)  # (a shard's header describes its own tensors)
        except (OSError, GGUFHeaderError) as error:
            raise RuntimeStartError(f"{model_path}: {error}") from error
        model_params = llama_cpp.llama_model_default_params()
        # Repacked CPU weights (Q4_0, Q4_K, IQ4_NL, MXFP4) run a 4-row GEMM kernel and a GEMV one for a batch's
        # remainder rows, which round differently: a token's numbers would then hang on where it falls in its
        # batch, so on cached prefixes and on the other options decoded beside it. Off: every row takes one path.
        model_params.use_extra_bufts = False
        if settings.n_gpu_layers is not None:
            model_params.n_gpu_layers = settings.n_gpu_layers
        self.model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), model_params)
        if not self.model:
            raise RuntimeStartError(f"{model_path}: llama.cpp could not load the model (corrupt or unsupported)")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.vocab_size = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self._piece_probe = ctypes.create_string_buffer(8)
        # BPE and SPM split a text's bytes among its tokens with nothing dropped, so no token covers more bytes
        # than the longest piece: a text of more bytes than `limit` such pieces has more than `limit` tokens.
        # (WPM and UGM normalise: they may drop whitespace, so there is no such bound.)
        self.max_piece_bytes = max(self.piece_length(token) for token in range(self.vocab_size)) \
            if llama_cpp.llama_vocab_type(self.vocab) in BYTE_PARTITIONING_VOCABS else None
        context_train = int(llama_cpp.llama_model_n_ctx_train(self.model))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = context_size(settings.ctx_size, context_train)
        params.n_batch = settings.batch_size
        params.n_ubatch = settings.ubatch_size or default_ubatch(self.vocab_size, settings.batch_size)
        params.n_seq_max = MAX_BRANCHES + 1  # and the pad row's
        params.kv_unified = True  # branches share the prefix cells instead of copying them
        params.n_threads = settings.threads
        params.n_threads_batch = settings.threads_batch
        params.flash_attn_type = int(settings.flash_attn)
        params.no_perf = True
        self._params, self._path = params, model_path
        self.contexts: list[LlamaContext] = []
        self.primary = self.new_context()  # every context has the same geometry: the first one stands for all
        self.n_ctx, self.n_batch, self.n_ubatch = self.primary.n_ctx, self.primary.n_batch, self.primary.n_ubatch
        # no layer on a GPU: the CPU kernels' rules (partial_reuse) apply to every token
        self.cpu_only = not llama_cpp.llama_supports_gpu_offload() or settings.n_gpu_layers == 0
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self._tool_calls: ToolCallTemplate | None = None  # read on the first conversation with tool calls
        # K and V in f16 for every layer and cell: what one context's KV cache occupies. The header's per-token figure
        # knows head sizes that differ from embedding / heads (Gemma 3: 256, not 160); the model's shape is the
        # fallback where the header cannot say (MLA, attention-free models).
        heads = max(1, int(llama_cpp.llama_model_n_head(self.model)))
        kv_width = int(llama_cpp.llama_model_n_embd(self.model)) // heads * int(llama_cpp.llama_model_n_head_kv(
            self.model))
        per_token = info.kv_bytes_per_token or int(llama_cpp.llama_model_n_layer(self.model)) * 2 * kv_width * 2
        self.context_bytes = self.n_ctx * per_token
        self.facts = ModelFacts(file=model_path.name, architecture=info.architecture,
                                quantization=info.quantization, context_train=context_train,
                                context=self.n_ctx, vocab_size=self.vocab_size)

    @property
    def context(self) -> ctypes.c_void_p | None:
        return self.primary.context

    @property
    def memory(self) -> ctypes.c_void_p:
        return self.primary.memory

    def new_context(self) -> LlamaContext:
        """Another context on the same weights (a KV cache of its own): one per decision worker."""
        context = LlamaContext(self.model, self._params, self.vocab_size, self._path)
        self.contexts.append(context)
        return context

    # -- tokenizer -------------------------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool, add_bos: bool = False, limit: int | None = None) -> list[int]:
        """Tokens of `text`; `special` parses control tokens (template text only, never user text).

        With `limit`, a text of more tokens raises `TooManyTokensError` without materialising them: a text
        too long for even `limit` of the longest pieces costs nothing, any other one native pass, never a
        million-entry buffer and list.
        """
        data = text.encode("utf-8")
        if limit is not None and self.max_piece_bytes and len(data) > limit * self.max_piece_bytes:
            # Refused without tokenizing: a hostile 6 MB text would hold the decision worker ~1.7 s (measured).
            raise TooManyTokensError(-(-len(data) // self.max_piece_bytes), limit, exact=False)
        capacity = len(data) + 8 if limit is None else min(len(data) + 8, limit + 1)
        buffer = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, capacity, add_bos, special)
        if count < 0 and limit is not None and -count > limit:
            raise TooManyTokensError(-count, limit)
        if count < 0:  # more tokens than bytes cannot happen for BPE/SPM, but be exact anyway
            capacity = -count
            buffer = (llama_cpp.llama_token * capacity)()
            count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, capacity, add_bos, special)
        if count < 0:
            raise RuntimeError("llama.cpp could not tokenize the text")
        if limit is not None and count > limit:
            raise TooManyTokensError(count, limit)
        return list(buffer[:count])

    def piece(self, token: int) -> bytes:
        """The text of a user-text token (control tokens render empty)."""
        size = self.piece_length(token)
        buffer = ctypes.create_string_buffer(max(size, 1))
        llama_cpp.llama_token_to_piece(self.vocab, token, buffer, len(buffer), 0, False)
        return buffer.raw[:size]

    def piece_length(self, token: int) -> int:
        """Bytes of `piece(token)`; llama.cpp answers minus the size needed when the buffer is too small."""
        size = int(llama_cpp.llama_token_to_piece(self.vocab, token, self._piece_probe, len(self._piece_probe), 0,
                                                  False))
        return -size if size < 0 else size

    # -- chat template -----------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(llama_cpp.llama_model_chat_template(self.model, None))

    def frame_name(self, template_name: str | None) -> str:
        """Which frame the prompts use: a named one, the model's own template ("model"), or the plain frame of a
        model without a template (README, "Bring your own GGUF")."""
        if template_name:
            return template_name
        return "model" if self.has_chat_template else PLAIN_FRAME

    def chat_frame(self, template_name: str | None, system_text: str) -> ChatFrame:
        """Render the system + user turns with the model's template, a named built-in one, or the plain frame."""
        name = self.frame_name(template_name)
        if name == PLAIN_FRAME:
            return ChatFrame.plain(system_text)
        template = name.encode() if template_name else llama_cpp.llama_model_chat_template(self.model, None)
        turns = [(b"system", system_text.encode()), (b"user", USER_SENTINEL.encode())]
        try:
            return ChatFrame.from_rendered(self._render(template, turns, self._fix_hint(template_name)))
        except ValueError as error:
            raise RuntimeStartError(f"chat template: {error}; {self._fix_hint(template_name)}") from None

    def _fix_hint(self, template_name: str | None) -> str:
        """What to set instead, right for this model: a built-in template of its family, or the plain frame."""
        family = {"gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "llama": "llama3", "qwen2": "chatml",
                  "qwen3": "chatml", "phi3": "phi3", "mistral": "mistral-v7"}.get(self.facts.architecture or "")
        suggestions = [f"SEMIF_CHAT_TEMPLATE={family}" if family and family != template_name else None,
                       f"SEMIF_CHAT_TEMPLATE={PLAIN_FRAME} (no template: the prompt a base model reads)"]
        return "set " + " or ".join(s for s in suggestions if s)

    def render_turns(self, template_name: str | None, turns: Sequence[tuple[str, str]]) -> str | None:
        """A conversation's turns as this model's chat template (or the named built-in one) lays them out, with no
        assistant turn opened after them; None where there is no template or llama.cpp cannot apply it."""
        if self.frame_name(template_name) == PLAIN_FRAME:
            return None
        template = template_name.encode() if template_name else llama_cpp.llama_model_chat_template(self.model, None)
        try:
            return self._render(template, [(role.encode(), text.encode()) for role, text in turns], "",
                                opening=False)
        except RuntimeStartError:
            return None

    def render_tool_calls(self, template_name: str | None, messages: list[dict[str, Any]]) -> str | None:
        """A conversation with tool calls as the model's own template shows them (engine/tool_call_template.py);
        None where a built-in template is named or the model's does not show tool calls."""
        if template_name or not self.has_chat_template:
            return None
        if self._tool_calls is None:
            eos = llama_cpp.llama_vocab_get_text(self.vocab, llama_cpp.llama_vocab_eos(self.vocab)) or b""
            source = llama_cpp.llama_model_chat_template(self.model, None)
            self._tool_calls = ToolCallTemplate(source.decode("utf-8", "replace"), eos.decode("utf-8", "replace"))
        return self._tool_calls.render(messages)

    @staticmethod
    def _render(template: bytes, turns: list[tuple[bytes, bytes]], hint: str, *, opening: bool = True) -> str:
        messages = (llama_cpp.llama_chat_message * len(turns))(
            *(llama_cpp.llama_chat_message(role=role, content=content) for role, content in turns))
        size = max(4096, 2 * sum(len(role) + len(content) for role, content in turns))
        for _ in range(2):
            buffer = ctypes.create_string_buffer(size)
            written = llama_cpp.llama_chat_apply_template(template, messages, len(turns), opening, buffer, size)
            if written < 0:
                raise RuntimeStartError(f"llama.cpp does not support this chat template; {hint}")
            if written <= size:
                return buffer.raw[:written].decode("utf-8")
            size = written
        raise RuntimeStartError("the rendered chat template keeps growing")

    def slot_tokens(self, frame: ChatFrame) -> list[int]:
        """The token of each slot letter, checked the way the scores depend on them."""
        tail = frame.tail
        tail_tokens = self.tokenize(tail, special=True)
        tokens = []
        for slot in SLOT_LETTERS:
            letter = frame.answer_lead + slot  # the plain frame's answer follows "Answer:" after a space
            ids = self.tokenize(letter, special=False)
            if len(ids) != 1:
                raise RuntimeStartError(f"slot label {letter!r} is {len(ids)} tokens in this vocabulary, not one")
            if self.piece(ids[0]) != letter.encode():
                raise RuntimeStartError(f"slot label {letter!r} does not round-trip through its token")
            if self.tokenize(tail + letter, special=True) != [*tail_tokens, ids[0]]:
                raise RuntimeStartError(f"slot label {letter!r} merges with the end of the prompt")
            tokens.append(ids[0])
        if len(set(tokens)) != len(tokens):
            raise RuntimeStartError("two slot labels share one token")
        return tokens

    # -- evaluation ---------------------------------------------------------------------------------
    def logits_row(self, batch_index: int) -> np.ndarray:
        return self.primary.logits_row(batch_index)

    def request_abort(self) -> None:
        """Make every context's running llama_decode stop at its next graph (safe from another thread)."""
        for context in self.contexts:
            context.request_abort()

    def close(self) -> None:
        for context in getattr(self, "contexts", ()):
            context.close()
        if getattr(self, "model", None):
            llama_cpp.llama_model_free(self.model)
            self.model = None
